#pragma once
// Shared output helpers of the CLI: one-line errors and warnings.

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

}  // namespace stretch::cli
