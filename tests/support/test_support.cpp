#include "tests/support/test_support.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdlib.h>

#include <gtest/gtest.h>

#include "runtime/common/posix_files.hpp"

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

std::string readFileIfAny(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

TempDir::TempDir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string pattern =
      std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/" + prefix + "-XXXXXX";
  if (::mkdtemp(pattern.data()) != nullptr)
    path_ = pattern;
}

TempDir::~TempDir() {
  // POSIX calls, not std::filesystem::remove_all: in a test linked against PyTorch 2.11's
  // LibTorch that call binds to libtorch.so's copy and crashed (docs/gpu.md).
  // Errors are ignored, as before.
  try {
    stretch::removeTree(path_.native());
  } catch (const std::exception&) {
  }
}

bool processAlive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line))
    return false;
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

}  // namespace stretch::test
