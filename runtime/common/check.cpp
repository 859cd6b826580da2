#include "runtime/common/check.hpp"

#include <string_view>

namespace stretch::detail {

namespace {
// Report paths relative to the source tree, not the build machine's absolute path.
std::string_view sourceRelative(std::string_view file) {
  for (std::string_view root : {"runtime/", "sim/", "planner/", "gui/", "cli/", "tests/"}) {
    if (auto pos = file.rfind(root); pos != std::string_view::npos) {
      return file.substr(pos);
    }
  }
  return file;
}
}  // namespace

void throwCheckFailure(const char* file, int line, const char* condition,
                       const std::string& values, const std::string& context) {
  std::string message = fmt::format("{}:{}: check '{}' failed", sourceRelative(file), line,
                                    condition);
  if (!values.empty()) {
    message += ": " + values;
  }
  if (!context.empty()) {
    message += " (" + context + ")";
  }
  throw InternalError(message);
}

}  // namespace stretch::detail
