#pragma once
// Shared output helpers of the CLI: one-line errors and warnings.

#include <iostream>
#include <string>
#include <string_view>

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

}  // namespace stretch::cli
