#include "runtime/common/error.hpp"

#include <utility>

namespace stretch {

std::string formatDetail(const ErrorDetail& detail) {
  std::string out = detail.path;
  out += " = ";
  out += detail.value;
  out += ": expected ";
  out += detail.expected;
  return out;
}

Error::Error(const std::string& message) : std::runtime_error(message) {}

bool isBadInput(const std::exception& e) noexcept {
  return dynamic_cast<const ConfigError*>(&e) != nullptr ||
         dynamic_cast<const IoError*>(&e) != nullptr ||
         dynamic_cast<const ElasticityError*>(&e) != nullptr;
}

Error::Error(ErrorDetail detail)
    : std::runtime_error(formatDetail(detail)), detail_(std::move(detail)) {}

}  // namespace stretch
