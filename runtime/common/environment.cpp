#include "runtime/common/environment.hpp"

#include <cstdlib>
#include <exception>
#include <string>

#include <fmt/format.h>

#include "runtime/common/error.hpp"

namespace stretch {

std::int64_t integerVariable(const char* name, std::int64_t fallback, std::int64_t minimum) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0')
    return fallback;
  try {
    std::size_t used = 0;
    const auto value = std::stoll(text, &used);
    if (used == std::string(text).size() && value >= minimum)
      return value;
  } catch (const std::exception&) {
  }
  throw ConfigError(ErrorDetail{name, text, fmt::format("an integer >= {}", minimum)});
}

}  // namespace stretch
