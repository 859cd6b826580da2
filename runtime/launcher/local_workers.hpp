#pragma once
// The worker processes of one node: started with their environment, each in its own process
// group with its output in a per-attempt log file, watched without blocking, and stopped so that
// nothing survives (not the workers, not their children). Processes come from spawnProcess
// (process.hpp): own process group, SIGKILL when the agent dies, exit 127 when the program
// cannot be executed.
//
//  - start(): one process per worker; stdout and stderr go to
//    <logDir>/attempt_<k>/rank_<r>.log (appended), through a LogPump (log_pump.hpp): a log file
//    that stops taking writes (a full disk) is reported once and lostOutput() says so, while the
//    worker trains on.
//  - poll(): reaps exited workers without blocking and returns each exit once.
//  - stop(grace): SIGTERM to every live worker's process group, SIGKILL after `grace`, then
//    reaps them. The destructor calls stop().
//  - detectHangs(dir, policy): workers started from then on get a heartbeat file in `dir`
//    (STRETCH_HEARTBEAT_FILE; runtime/engine/heartbeat.hpp) and poll() SIGKILLs the process
//    group of one whose beat stopped for longer than its limit (agent/hang_rule.hpp); its exit
//    then carries the reason in WorkerExit::hung.
//
// Processes only, no job: the agent::WorkerGroup a node's agent drives is NodeWorkers
// (node_workers.hpp), which starts a generation's workers through this class.
//
// Not thread-safe: one thread (the agent's) drives it.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <sys/types.h>
#include <vector>

#include "runtime/agent/hang_rule.hpp"
#include "runtime/launcher/launch_defaults.hpp"
#include "runtime/launcher/log_pump.hpp"
#include "runtime/launcher/process.hpp"

namespace stretch::launcher {

struct WorkerProcessSpec {
  int localRank = 0;
  int globalRank = 0;
  std::map<std::string, std::string> env;  // added to (and overriding) the agent's environment
  std::vector<std::string> argv;           // this worker's command; empty: the group's argv
};

struct WorkerExit {
  int localRank = 0;
  int globalRank = 0;
  ProcessExit exit;  // exit status, or 128 + signal when killed by a signal
  std::string hung;  // why the agent killed it as hung ("no heartbeat for ..."), else empty
  // It failed before completing a step: its heartbeat never advanced, or (a program that never
  // beat, or hang detection off) it ran less than kEarlyExitWindow; and no worker of the group
  // completed a step either (live recovery's survivors that train on make no crash loop).
  bool early = false;
  std::filesystem::path log;  // its log file (attempt_K/rank_R.log), empty when inherited
  // "exit status 3", "killed by signal 9 (Killed)", or "hung (no heartbeat for ...): killed".
  std::string describe() const;
};

class WorkerProcesses {
 public:
  WorkerProcesses() = default;
  ~WorkerProcesses();
  WorkerProcesses(const WorkerProcesses&) = delete;
  WorkerProcesses& operator=(const WorkerProcesses&) = delete;

  // Starts one process per spec running argv (argv[0] is looked up in PATH when it has no '/').
  // logDir empty: the workers inherit the agent's stdout and stderr. A log directory or file
  // that cannot be created (a full disk) never stops a worker: it is reported (takeProblems) and
  // its output counted as lost (lostOutput); nothing is written through a link planted in
  // logDir (openLogFile). Throws Error when fork fails; an exec failure shows up as exit code
  // 127 with the reason in the worker's log.
  void start(const std::vector<std::string>& argv, const std::vector<WorkerProcessSpec>& workers,
             const std::filesystem::path& logDir, int attempt);

  // Reaps exited workers (each exit once); first kills those that hang (detectHangs).
  std::vector<WorkerExit> poll();
  void detectHangs(std::filesystem::path dir, agent::HangPolicy policy);
  void stop(std::chrono::milliseconds grace = kDefaultStopGraceMs);

  // Live recovery (NodeWorkers::continueLive): the running workers as {local rank, pid}; stops
  // the workers of the given local ranks (as stop() does) and forgets them; sends `signal` to
  // the running workers of the given local ranks.
  std::vector<std::pair<int, pid_t>> runningWorkers() const;
  void stopLocalRanks(const std::vector<int>& localRanks,
                      std::chrono::milliseconds grace = kDefaultStopGraceMs);
  void signalLocalRanks(const std::vector<int>& localRanks, int signal);

  // One line per rank log that lost output (LogPump::lost), since the group was made.
  std::vector<std::string> lostOutput() const;
  // What went wrong with the logs since the last call (a directory that cannot be made, a link
  // planted at a rank log and removed), already on stderr, for the event log.
  std::vector<std::string> takeProblems();

  // Workers started and not yet reaped.
  int running() const;
  std::vector<pid_t> pids() const;

 private:
  struct Worker {
    WorkerProcessSpec spec;
    ChildProcess process;
    std::string heartbeat;  // its STRETCH_HEARTBEAT_FILE, or empty
    std::filesystem::path log;
    int logSink = -1;  // its LogPump sink
    agent::HeartbeatTracker beats;
    std::string hung;
    std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
    bool beat = false;      // its heartbeat was seen (sticky: the engine removes it at its end)
    bool advanced = false;  // and its step changed
  };
  void observe(Worker& worker);
  void killHung(Worker& worker);
  void makeAttemptDirectory(const std::filesystem::path& dir);

  std::unique_ptr<LogPump> logs_;  // made at the first start with a log directory
  std::vector<Worker> workers_;
  std::filesystem::path heartbeatDir_;
  agent::HangPolicy hangPolicy_;
  std::uint64_t heartbeatsMade_ = 0;
  std::vector<std::string> problems_;  // for takeProblems
  static constexpr std::chrono::milliseconds kHangCheckPeriod{100};
  // How long poll() waits, at a worker's exit, for its output to reach its log.
  static constexpr std::chrono::milliseconds kLogSettle{300};

 public:
  // A worker without heartbeats that fails within this time of its start failed early.
  static constexpr std::chrono::seconds kEarlyExitWindow{10};

 private:
  std::chrono::steady_clock::time_point lastHangCheck_{};
};

}  // namespace stretch::launcher
