#pragma once
// The agent loop: feeds an AgentStateMachine with what happens to its workers (a WorkerGroup)
// and to the job's nodes, and with the passing of time, and carries out its actions. Three
// drivers use it:
//  - runLocalAgent: a single-node job; the workers are this machine's processes;
//  - the job controller of a multi-node job (job_controller.hpp): the workers are remote, run by
//    node agents, and node joins, departures and lost keep-alives come from the job's store;
//  - tests, with scripted worker groups.
// The loop polls the worker group every 10 ms and ticks the machine every `monitorInterval`; a
// stop request (the launcher's SIGINT/SIGTERM handler sets the flag) stops every worker and ends
// the loop.
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
#include "runtime/agent/worker_group.hpp"

namespace stretch::agent {

// The variables of one worker (RANK, WORLD_SIZE, ...), from its generation and node.
using EnvironmentFor = std::function<std::map<std::string, std::string>(
    const StartWorkers& start, const NodeAssignment& node, std::int64_t localRank)>;

struct AgentResult {
  int exitCode = 0;
  std::string message;  // the Fail message, or why the agent stopped
  std::int64_t restarts = 0;
  std::uint64_t generations = 0;
  std::vector<Duration> recoveryTimes;  // failure reaped -> replacement workers started
};
using LocalAgentResult = AgentResult;

struct AgentLoopOptions {
  AgentConfig config;
  // Events applied first, in order (the local node joining).
  std::vector<Event> initialEvents;
  // Called every 10 ms: node joins, departures, lost keep-alives seen since the last call.
  std::function<std::vector<Event>(Time now)> nodeEvents;
  std::optional<std::filesystem::path> eventLog;
  std::optional<std::filesystem::path> checkpointDir;  // for the resume step in the event log
  Duration monitorInterval = std::chrono::seconds(1);
  const std::atomic<int>* stopSignal = nullptr;  // non-zero: stop (the signal number)
  Clock clock = systemClock();
};

// Runs the machine to Finish or Fail (or a stop request). Never throws for worker failures
// (they are the machine's business); throws for its own errors (bad config, unwritable log).
AgentResult runAgentLoop(const AgentLoopOptions& options, WorkerGroup& workers);

// The step <dir>/latest names ("global_step120" -> 120); nullopt without a readable one.
std::optional<std::int64_t> latestCheckpointStep(const std::filesystem::path& dir);

// The worker processes one node runs for a job: a WorkerGroup over LocalWorkerGroup that starts
// this node's part (its NodeAssignment) of every generation.
class NodeWorkers final : public WorkerGroup {
 public:
  NodeWorkers(std::string nodeId, std::vector<std::string> command, EnvironmentFor environment,
              std::filesystem::path logDir, Duration stopGrace);

  void start(const StartWorkers& action) override;
  void stop() override;
  std::vector<WorkerExited> poll() override;

  int running() const { return workers_.running(); }
  std::vector<pid_t> pids() const { return workers_.pids(); }

 private:
  std::string nodeId_;
  std::vector<std::string> command_;
  EnvironmentFor environment_;
  std::filesystem::path logDir_;
  Duration stopGrace_;
  std::uint64_t generation_ = 0;
  LocalWorkerGroup workers_;
};

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

// A single-node job to its end (runAgentLoop over this node's NodeWorkers).
AgentResult runLocalAgent(const LocalAgentOptions& options);

}  // namespace stretch::agent
