#pragma once
// Reading the plain-text tables the tests compare against (fixtures recorded from DeepSpeed and
// other peers): trimmed lines and '|'-separated fields.

#include <sstream>
#include <string>
#include <vector>

namespace stretch::test {

// `s` without leading and trailing blanks (space, tab, CR).
inline std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) {
    return "";
  }
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// The lines of `text`, trimmed; blank lines are left out.
inline std::vector<std::string> trimmedLines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line = trim(line); !line.empty()) {
      lines.push_back(line);
    }
  }
  return lines;
}

// The fields of `line` between `separator`s, each trimmed.
inline std::vector<std::string> trimmedFields(const std::string& line, char separator) {
  std::vector<std::string> fields;
  std::stringstream in(line);
  std::string field;
  while (std::getline(in, field, separator)) {
    fields.push_back(trim(field));
  }
  return fields;
}

}  // namespace stretch::test
