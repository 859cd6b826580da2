#include "cli/output.hpp"

#include <iostream>

#include <CLI/CLI.hpp>

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

int parseAndRun(CLI::App& app, const std::vector<Command>& commands, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << app.get_name() << ": error: " << e.what() << "\n"
              << "Run `" << app.get_name() << " --help` for usage.\n";
    return kExitUsage;
  }
  for (const auto& command : commands) {
    if (command.app->parsed())
      return command.run();
  }
  return kExitUsage;
}

}  // namespace stretch::cli
