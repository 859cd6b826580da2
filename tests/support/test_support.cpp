#include "tests/support/test_support.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace stretch::test {

std::filesystem::path sourceDir() {
  if (const char* env = std::getenv("STRETCH_SOURCE_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  return STRETCH_SOURCE_DIR_DEFAULT;
}

std::filesystem::path fixturePath(const std::string& relative) {
  return sourceDir() / "fixtures" / relative;
}

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return {};
  }
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace stretch::test
