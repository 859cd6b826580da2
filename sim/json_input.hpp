#pragma once
// Small helpers shared by the JSON inputs of the simulator (scenario files) and the planner (job
// files): errors that name the JSON path, the offending value (shortened) and what was expected,
// and reading a whole file.

#include <cstddef>
#include <filesystem>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace stretch::sim {

// The value as compact JSON, cut to maxChars characters ("...") for messages.
std::string showJson(const nlohmann::json& value, std::size_t maxChars = 60);

// Throws ConfigError "<path> = <value>: expected <expected>".
[[noreturn]] void badValue(const std::string& path, const nlohmann::json& value,
                           const std::string& expected);

// The file's bytes; IoError naming the path ("expected a readable <what>") when it cannot be read.
std::string readTextFile(const std::filesystem::path& path, const std::string& what);

}  // namespace stretch::sim
