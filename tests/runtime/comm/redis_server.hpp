#pragma once
// A private redis-server on a free loopback port for the tests of RedisStore and of
// initDistributed("redis://..."); the tests skip when no redis-server binary is installed.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <string>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <fmt/format.h>

#include "tests/runtime/comm/store_test_util.hpp"

namespace stretch::comm::test {

// redis-server from STRETCH_REDIS_SERVER (configure time) or PATH; empty when neither has it.
inline std::string findRedisServer() {
#if defined(STRETCH_REDIS_SERVER)
  if (::access(STRETCH_REDIS_SERVER, X_OK) == 0)
    return STRETCH_REDIS_SERVER;
#endif
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    const std::size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string candidate = dirs.substr(start, end - start) + "/redis-server";
    if (end > start && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = end + 1;
  }
  return {};
}

// A private redis-server on a free loopback port, for the lifetime of the object.
class RedisServer {
 public:
  RedisServer() {
    binary_ = findRedisServer();
    if (binary_.empty())
      return;
    for (int attempt = 0; attempt < 3 && pid_ <= 0; ++attempt)
      start();
  }
  ~RedisServer() { stop(); }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  const std::string& binary() const noexcept { return binary_; }
  bool running() const noexcept { return pid_ > 0; }
  int port() const noexcept { return port_; }
  const std::string& error() const noexcept { return error_; }

 private:
  void start() {
    port_ = freeLoopbackPort();
    const std::string port = std::to_string(port_);
    const pid_t pid = ::fork();
    if (pid < 0) {
      error_ = "fork failed";
      return;
    }
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
      const int devnull = ::open("/dev/null", O_WRONLY);
      if (devnull >= 0) {
        ::dup2(devnull, STDOUT_FILENO);
        ::dup2(devnull, STDERR_FILENO);
      }
      ::execl(binary_.c_str(), "redis-server", "--port", port.c_str(), "--bind", "127.0.0.1",
              "--save", "", "--appendonly", "no", "--daemonize", "no", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // Ready when it accepts connections; give up after 10 s or when it exits.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        error_ = fmt::format("{} exited with status {} on port {}", binary_, status, port_);
        return;
      }
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(static_cast<std::uint16_t>(port_));
      const bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
      ::close(fd);
      if (up) {
        pid_ = pid;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    error_ = fmt::format("{} did not accept connections on port {} within 10 s", binary_, port_);
  }

  void stop() {
    if (pid_ <= 0)
      return;
    ::kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() >= deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    pid_ = -1;
  }

  std::string binary_;
  pid_t pid_ = -1;
  int port_ = 0;
  std::string error_;
};

}  // namespace stretch::comm::test
