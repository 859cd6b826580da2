#pragma once
// A single-node job: this machine's slots under one agent (runAgentLoop over this node's
// NodeWorkers), as `stretch launch` runs it when the job has one host and the local runner.

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "runtime/launcher/agent_loop.hpp"
#include "runtime/launcher/launch_defaults.hpp"
#include "runtime/launcher/node_workers.hpp"

namespace stretch::launcher {

struct LocalAgentOptions {
  agent::AgentConfig config;
  std::string nodeId = "localhost";
  std::int64_t slots = 1;
  WorkerCommand command;         // the worker program and its arguments
  EnvironmentFor environment;    // each worker's variables (RANK, WORLD_SIZE, ...)
  std::filesystem::path logDir;  // empty: workers write to the agent's stdout/stderr
  std::optional<std::filesystem::path> eventLog;
  std::optional<std::filesystem::path> checkpointDir;  // for the resume step in the event log
  Duration monitorInterval = kDefaultMonitorInterval;
  Duration stopGrace = kDefaultStopGrace;
  agent::HangPolicy hang;  // workers whose heartbeat stops are killed (floor zero: off)
  const std::atomic<int>* stopSignal = nullptr;  // non-zero: stop (the signal number)
  Clock clock = agent::systemClock();
  // Live recovery (node_workers.hpp): the store this agent serves its workers; null: every
  // failure restarts every worker.
  std::shared_ptr<comm::Store> liveStore;
  // The launcher tells the workers their batch (its --config): live generations carry it.
  bool batchContract = true;
  // The per-generation config copies `environment` writes (--config), whose problems the agent
  // reports (event log, exit status); null without a config.
  std::shared_ptr<GenerationConfigs> configs;
};

// A single-node job to its end (runAgentLoop over this node's NodeWorkers).
AgentResult runLocalAgent(const LocalAgentOptions& options);

}  // namespace stretch::launcher
