#pragma once
// Shared output helpers of the CLI: one-line errors and warnings, and the one mapping from
// stretch's exception tree to exit statuses (runCommand).

#include <exception>
#include <functional>
#include <iostream>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/common/error.hpp"

namespace stretch::cli {

// "stretch <command>: error: <message>" on stderr.
inline void printError(std::string_view command, const std::string& message) {
  std::cerr << "stretch " << command << ": error: " << message << "\n";
}

inline void printWarning(std::string_view command, const std::string& message) {
  std::cerr << "stretch " << command << ": warning: " << message << "\n";
}

// The kind shown in --json errors. A file that cannot be read is a config problem to the user.
inline std::string errorKind(const Error& e) {
  const std::string kind = e.kind();
  return kind == "IoError" ? std::string("ConfigError") : kind;
}

// An error as the command's --json output ({"error": kind, "message": ...} on stdout) or as the
// one-line "stretch <command>: error: <kind>: <message>" on stderr.
inline void printError(std::string_view command, const Error& e, bool json) {
  if (json) {
    nlohmann::ordered_json out;
    out["error"] = errorKind(e);
    out["message"] = e.what();
    std::cout << out.dump() << "\n";
  } else {
    printError(command, fmt::format("{}: {}", errorKind(e), e.what()));
  }
}

// How a command prints the exception it ends on.
struct ErrorStyle {
  bool json = false;  // {"error": kind, "message": ...} on stdout (printError above)
  bool kind = true;   // "error: <Kind>: <message>"; false: "error: <message>" (launch, agent)
  bool print = true;  // false: the status alone (an MPI rank other than the root)
};

// The exit status for an exception a command ends on, the one mapping for every command:
// bad input (ConfigError and its children such as LaunchError, IoError, ElasticityError) is
// kExitUsage; anything else (a store or collective failure, a bug) is kExitFailed.
int exitStatusFor(std::exception_ptr error);

// Runs a command's body and returns its exit status; an exception it throws is printed once, in
// `style` (read when the exception arrives, so the body may still change it), and mapped by
// exitStatusFor. A std::exception that is not a stretch::Error prints as kind "Error".
int runCommand(std::string_view command, const ErrorStyle& style, const std::function<int()>& body);

}  // namespace stretch::cli
