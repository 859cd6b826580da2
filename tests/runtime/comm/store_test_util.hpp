#pragma once
// Helpers for the store tests: temporary directories, free loopback ports, forked children
// that are always reaped, the measured duration of a call, and a store that stalls a Gloo
// rendezvous half-way.

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <netinet/in.h>
#include <optional>
#include <signal.h>
#include <stdlib.h>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <system_error>
#include <thread>
#include <unistd.h>
#include <vector>

#include "runtime/comm/store.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::comm::test {

// Temporary directories come from the shared test support.
using stretch::test::TempDir;

// A loopback port nobody listens on (stretch::test::freeTestPort: outside the ephemeral range).
inline int freeLoopbackPort() {
  return stretch::test::freeTestPort();
}

// Forked children that are killed and reaped when the guard goes, whatever the test did.
class Children {
 public:
  Children() = default;
  ~Children() {
    for (const pid_t pid : pids_) {
      ::kill(pid, SIGKILL);
      int status = 0;
      ::waitpid(pid, &status, 0);
    }
  }
  Children(const Children&) = delete;
  Children& operator=(const Children&) = delete;

  // Runs `body` in a child that exits 0 when it returns, 1 when it throws; never returns into
  // the test framework. Returns the pid, or -1 when fork failed.
  pid_t spawn(const std::function<void()>& body) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      int code = 0;
      try {
        body();
      } catch (...) {
        code = 1;
      }
      ::_exit(code);
    }
    if (pid > 0)
      pids_.push_back(pid);
    return pid;
  }

  // Waits for every child until `timeout`; returns the exit codes (-1: did not exit in time or
  // died of a signal). Children still running are killed by the destructor.
  std::vector<int> join(std::chrono::nanoseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::vector<int> codes;
    std::vector<pid_t> left;
    for (const pid_t pid : pids_) {
      int code = -1;
      for (;;) {
        int status = 0;
        const pid_t rc = ::waitpid(pid, &status, WNOHANG);
        if (rc == pid) {
          code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
          break;
        }
        if (rc < 0 || std::chrono::steady_clock::now() >= deadline) {
          left.push_back(pid);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      codes.push_back(code);
    }
    pids_ = left;
    return codes;
  }

 private:
  std::vector<pid_t> pids_;
};

// How long `body` took.
inline std::chrono::milliseconds timed(const std::function<void()>& body) {
  const auto start = std::chrono::steady_clock::now();
  body();
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

// A store over another whose reads of Gloo's pair addresses stall, then fail: a rank that builds
// a Gloo group over it publishes its own address, then never reads the others' and so never
// connects (a worker frozen or dying during a live generation's rendezvous).
class StallingStore final : public ForwardingStore {
 public:
  StallingStore(std::shared_ptr<Store> store, std::chrono::milliseconds stall)
      : ForwardingStore(std::move(store), "stalling store"), stall_(stall) {}
  // get() waits through wait(), so it stalls on the same keys.
  void wait(const std::vector<std::string>& keys, std::optional<Duration> timeout) override {
    for (const auto& key : keys) {
      if (isAddressKey(key))
        stallThenFail(key);
    }
    ForwardingStore::wait(keys, timeout);
  }

 private:
  // Gloo first exchanges host names ("gloo/rank_<r>"), then the pairs' addresses ("gloo/<r>").
  static bool isAddressKey(const std::string& key) {
    const auto name = key.substr(key.rfind('/') + 1);
    return !name.empty() && name.find_first_not_of("0123456789") == std::string::npos;
  }
  [[noreturn]] void stallThenFail(const std::string& key) {
    std::this_thread::sleep_for(stall_);
    throwTimeout("stalling store", {key}, stall_);
  }
  std::chrono::milliseconds stall_;
};

}  // namespace stretch::comm::test
