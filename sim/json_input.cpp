#include "sim/json_input.hpp"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/common/error.hpp"

namespace stretch::sim {

std::string showJson(const nlohmann::json& value, std::size_t maxChars) {
  std::string text = value.dump();
  if (text.size() > maxChars) {
    text = text.substr(0, maxChars - 3) + "...";
  }
  return text;
}

void badValue(const std::string& path, const nlohmann::json& value, const std::string& expected) {
  throw ConfigError(ErrorDetail{path, showJson(value), expected});
}

std::string readTextFile(const std::filesystem::path& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw IoError(ErrorDetail{path.string(), "unreadable", "a readable " + what});
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace stretch::sim
