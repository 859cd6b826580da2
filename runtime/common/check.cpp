#include "runtime/common/check.hpp"

#include <algorithm>
#include <string_view>

namespace stretch::detail {

namespace {
// Report paths relative to the source tree, not the build machine's absolute path.
std::string_view sourceRelative(std::string_view file) {
  // The earliest top-level folder in the path: "tests/runtime/x.cpp" stays whole.
  std::size_t best = std::string_view::npos;
  for (std::string_view root :
       {"/runtime/", "/sim/", "/planner/", "/gui/", "/cli/", "/tests/", "/bench/"}) {
    best = std::min(best, file.find(root));
  }
  return best == std::string_view::npos ? file : file.substr(best + 1);
}
}  // namespace

void throwCheckFailure(const char* file, int line, const char* condition, const std::string& values,
                       const std::string& context) {
  std::string message =
      fmt::format("{}:{}: check '{}' failed", sourceRelative(file), line, condition);
  if (!values.empty()) {
    message += ": " + values;
  }
  if (!context.empty()) {
    message += " (" + context + ")";
  }
  throw InternalError(message);
}

}  // namespace stretch::detail
