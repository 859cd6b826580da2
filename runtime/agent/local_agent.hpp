#pragma once
// The agent loop of one node: feeds the AgentStateMachine with what happens to this node's
// worker processes (LocalWorkerGroup) and the passing of time, and carries out its actions.
// It reaps exited workers every 10 ms and ticks the machine every `monitorInterval`; a stop
// request (the launcher's SIGINT/SIGTERM handler sets the flag) stops every worker and ends the
// loop.
//
// Resume step: before each start the loop reads <checkpointDir>/latest (when a checkpoint
// directory is given) to record in the event log which step the workers resume from.
//
// Recovery time: for each restart after a failure, the time from the moment the failed exit was
// reaped to the moment the new workers were started is reported in the result (the workers'
// own start-up and checkpoint load come on top; the launcher's tests measure those end to end).

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/agent/clock.hpp"
#include "runtime/agent/event_log.hpp"
#include "runtime/agent/local_workers.hpp"
#include "runtime/agent/state_machine.hpp"

namespace stretch::agent {

using EnvironmentFor = std::function<std::map<std::string, std::string>(
    const StartWorkers& start, const NodeAssignment& node, std::int64_t localRank)>;

struct LocalAgentOptions {
  AgentConfig config;
  std::string nodeId = "localhost";
  std::int64_t slots = 1;
  std::vector<std::string> command;  // the worker program and its arguments
  EnvironmentFor environment;        // each worker's variables (RANK, WORLD_SIZE, ...)
  std::filesystem::path logDir;      // empty: workers write to the agent's stdout/stderr
  std::optional<std::filesystem::path> eventLog;
  std::optional<std::filesystem::path> checkpointDir;  // for the resume step in the event log
  Duration monitorInterval = std::chrono::seconds(1);
  Duration stopGrace = std::chrono::seconds(5);
  const std::atomic<int>* stopSignal = nullptr;  // non-zero: stop (the signal number)
  Clock clock = systemClock();
};

struct LocalAgentResult {
  int exitCode = 0;
  std::string message;  // the Fail message, or why the agent stopped
  std::int64_t restarts = 0;
  std::uint64_t generations = 0;
  std::vector<Duration> recoveryTimes;  // failure reaped -> replacement workers started
};

// Runs the job to its end. Never throws for worker failures (they are the machine's business);
// throws for the agent's own errors (bad options, cannot create the log directory).
LocalAgentResult runLocalAgent(const LocalAgentOptions& options);

}  // namespace stretch::agent
