#include "tests/support/test_support.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <netinet/in.h>
#include <random>
#include <sstream>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "runtime/common/posix_files.hpp"

namespace stretch::test {

std::string mpirunPrefix(const std::string& cli, int ranks, int timeoutSeconds) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) {
    return "";
  }
  std::string report;
  if (FILE* p = popen((cli + " report --json 2>/dev/null").c_str(), "r"); p != nullptr) {
    char buf[4096];
    std::size_t n = 0;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) {
      report.append(buf, n);
    }
    pclose(p);
  }
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

int positiveFromEnvironment(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::max(1, std::atoi(v)) : fallback;
}

bool portIsFree(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool free = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return free;
}

int freeTestPort(int alsoFree) {
  int low = 32768;
  int high = 60999;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low >> high;
  // 12,000 ports below the range, or the ones above it.
  const int first = low >= 13024 ? low - 12000 : std::min(high + 1, 65000);
  const int last = low >= 13024 ? low : 65535;
  const auto span = static_cast<unsigned>(std::max(1, last - first - alsoFree));
  static std::mt19937 rng(static_cast<unsigned>(::getpid()));
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int port = first + static_cast<int>(rng() % span);
    bool free = true;
    for (int i = 0; i <= alsoFree && free; ++i)
      free = portIsFree(port + i);
    if (free)
      return port;
  }
  return first + static_cast<int>(rng() % span);
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
