#pragma once
// The agent loop: feeds an agent::AgentDriver (the state machine and the live-recovery decision,
// shared with the simulator) with what happens to its workers (a WorkerGroup)
// and to the job's nodes, and with the passing of time, and carries out its actions. Three
// drivers use it:
//  - runLocalAgent (local_agent.hpp): a single-node job; the workers are this machine's processes;
//  - the job controller of a multi-node job (job_controller.hpp): the workers are remote, run by
//    node agents, and node joins, departures and lost keep-alives come from the job's store;
//  - tests, with scripted worker groups.
// The loop polls the worker group every 10 ms and ticks the machine every `monitorInterval`; a
// stop request (the launcher's SIGINT/SIGTERM handler sets the flag) stops every worker and ends
// the loop.
//
// Nodes gone before a start: the loop asks the group (WorkerGroup::goneNodes) before it carries
// out or logs a StartWorkers; a start naming nodes it knows are gone is skipped, and their
// departures go to the machine, which plans the start again without them.
//
// Resume step: before each start the loop reads <checkpointDir>/latest (when a checkpoint
// directory is given) to record in the event log which step the workers resume from.
//
// Recovery time: for each restart after a failure, the time from the moment the failed exit was
// reaped to the moment the new workers were started is reported in the result (the workers'
// own start-up and checkpoint load come on top; the launcher's tests measure those end to end).

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/agent/clock.hpp"
#include "runtime/agent/state_machine.hpp"
#include "runtime/agent/worker_group.hpp"

namespace stretch::launcher {

using agent::Clock;
using agent::Duration;
using agent::Time;

struct AgentResult {
  int exitCode = 0;
  std::string message;  // the Fail message, or why the agent stopped
  std::int64_t restarts = 0;
  std::uint64_t generations = 0;
  std::vector<Duration> recoveryTimes;  // failure reaped -> replacement workers started
  std::int64_t liveRecoveries = 0;      // restarts that kept the running workers (live)
  // Output that could not be written (a full disk): one line per event log or rank log, with
  // what was lost. The launcher's exit status says so (kExitOutputLost when the job succeeded).
  std::vector<std::string> lostOutput;
};

struct AgentLoopOptions {
  agent::AgentConfig config;
  // Events applied first, in order (the local node joining).
  std::vector<agent::Event> initialEvents;
  // Called every 10 ms: node joins, departures, lost keep-alives seen since the last call.
  std::function<std::vector<agent::Event>(Time now)> nodeEvents;
  std::optional<std::filesystem::path> eventLog;
  std::optional<std::filesystem::path> checkpointDir;  // for the resume step in the event log
  Duration monitorInterval = std::chrono::seconds(1);
  const std::atomic<int>* stopSignal = nullptr;  // non-zero: stop (the signal number)
  Clock clock = agent::systemClock();
  // Live recovery, decided by agent::AgentDriver (runtime/agent/driver.hpp) as the simulator
  // decides it: a live plan keeps the running workers (WorkerGroup::continueLive carries it
  // out); the plan's reason goes to the agent's log. Off: every restart stops every worker (no
  // "recovery" key in the event log).
  bool liveRecovery = false;
  // The job's batch comes from the launcher's --config. Without one every world size is valid
  // and the machine plans one sample per rank and step only to have a world to start: that
  // triple is nobody's batch, so the event log's records and the agent's log leave it out.
  bool batchContract = true;
};

// Runs the machine to Finish or Fail (or a stop request). Never throws for worker failures
// (they are the machine's business); throws for its own errors (bad config, unwritable log).
AgentResult runAgentLoop(const AgentLoopOptions& options, agent::WorkerGroup& workers);

// The step of the checkpoint under <dir> that the workers' engine will resume from
// (checkpoint::resumePoint: <dir>/latest's when that checkpoint is complete and intact, else the
// newest older global_step<N> that is; "global_step120" -> 120); nullopt when there is none or
// its tag is not a global_step<N>. Reads the candidates' files to check their digests.
std::optional<std::int64_t> latestCheckpointStep(const std::filesystem::path& dir);

}  // namespace stretch::launcher
