#include "tests/support/test_support.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "runtime/common/ports.hpp"
#include "runtime/common/posix_files.hpp"

namespace stretch::test {

std::string mpirunPrefix(const std::string& cli, int ranks, int timeoutSeconds) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) {
    return "";
  }
  const std::string report = runShell(cli + " report --json 2>/dev/null").out;
  // `"mpi":{"built":true` in the report's communication section, without a JSON parser here.
  const auto at = report.find("\"mpi\":");
  if (at == std::string::npos || report.find("\"built\":true", at) != at + 7) {
    return "";
  }
  return "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,tcp "
         "OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo timeout " +
         std::to_string(timeoutSeconds) + " mpirun --oversubscribe -n " + std::to_string(ranks) +
         " ";
}

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

ShellRun runShell(const std::string& command) {
  ShellRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    return run;
  }
  char buf[4096];
  std::size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) {
    run.out.append(buf, n);
  }
  const int status = pclose(pipe);
  run.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

int positiveFromEnvironment(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::max(1, std::atoi(v)) : fallback;
}

int freeTestPort(int alsoFree) {
  static std::atomic<std::uint32_t> calls{0};
  return freePortOutsideEphemeralRange(
      alsoFree, static_cast<std::uint32_t>(::getpid()) * 1'000'003u + calls.fetch_add(1));
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
  // Errors are ignored, as before. STRETCH_KEEP_TEST_DIRS=1 keeps the directory (a failing
  // launch test's rank logs) and says where.
  if (const char* keep = std::getenv("STRETCH_KEEP_TEST_DIRS"); keep != nullptr && *keep != '\0') {
    std::fprintf(stderr, "[test] kept %s\n", path_.c_str());
    return;
  }
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
