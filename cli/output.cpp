#include "cli/output.hpp"

#include "cli/commands.hpp"

namespace stretch::cli {

int exitStatusFor(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return isBadInput(e) ? kExitUsage : kExitFailed;
  } catch (...) {
    return kExitFailed;
  }
}

int runCommand(std::string_view command, const ErrorStyle& style,
               const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    if (style.print) {
      const auto* error = dynamic_cast<const Error*>(&e);
      if (!style.kind)
        printError(command, std::string(e.what()));
      else if (error != nullptr)
        printError(command, *error, style.json);
      else
        printError(command, Error(e.what()), style.json);
    }
    return exitStatusFor(std::current_exception());
  }
}

}  // namespace stretch::cli
