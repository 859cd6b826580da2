#pragma once
// Starts the ranks of a benchmark as real processes on this machine, as a launcher would: each
// child gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, a free
// MASTER_PORT and a fresh STRETCH_STORE_TOKEN, and runs `executable args...` (started with
// launcher::spawnProcess: own process group, killed when the launching thread ends).
//
// The call blocks until every child has exited. Children are always reaped: when one fails (a
// non-zero exit or a signal), the others are terminated (SIGTERM, then SIGKILL after a grace
// period) and the call throws CommError with the failed rank's status and the end of its stderr;
// when the deadline passes, every child is killed and the call throws CommTimeoutError.
//
// Safe to call from a process that has threads. Not thread-safe itself: one launch at a time per
// thread (it reaps only its own children, by pid).

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace stretch::tools {

struct RankLaunch {
  std::string executable;         // absolute path, e.g. "/proc/self/exe" resolved
  std::vector<std::string> args;  // argv[1..]
  int worldSize = 1;
  std::map<std::string, std::string> env;  // extra variables for every child
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // Called on the launching thread for every line a child writes to stdout (without '\n').
  std::function<void(int rank, const std::string& line)> onStdoutLine;
  // Copy children's stderr lines to ours as they arrive, prefixed "[rank R] "; otherwise it is
  // kept and shown only when the rank fails.
  bool forwardStderr = false;
};

void runRanks(const RankLaunch& launch);

}  // namespace stretch::tools
