#pragma once
// NodeWorkers: the worker processes one node runs for a job, as the agent::WorkerGroup the agent
// loop drives. start() launches this node's part (its NodeAssignment) of a generation through a
// LocalWorkerGroup, each worker with the variables `environment` gives it; poll() turns process
// exits into WorkerExited events (a signal k as exit code -k). Used by the single-node agent
// (local_agent.hpp) and by each node agent of a multi-node job (node_agent.hpp). Not
// thread-safe.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "runtime/agent/worker_group.hpp"
#include "runtime/launcher/local_workers.hpp"
#include "runtime/launcher/worker_command.hpp"

namespace stretch::launcher {

// The variables of one worker (RANK, WORLD_SIZE, ...), from its generation and node.
using EnvironmentFor = std::function<std::map<std::string, std::string>(
    const agent::StartWorkers& start, const agent::NodeAssignment& node, std::int64_t localRank)>;

// The worker processes one node runs for a job: a WorkerGroup over LocalWorkerGroup that starts
// this node's part (its NodeAssignment) of every generation.
class NodeWorkers final : public agent::WorkerGroup {
 public:
  NodeWorkers(std::string nodeId, WorkerCommand command, EnvironmentFor environment,
              std::filesystem::path logDir, agent::Duration stopGrace);

  void start(const agent::StartWorkers& action) override;
  void stop() override;
  std::vector<agent::WorkerExited> poll() override;

  int running() const { return workers_.running(); }
  std::vector<pid_t> pids() const { return workers_.pids(); }

 private:
  std::string nodeId_;
  WorkerCommand command_;
  EnvironmentFor environment_;
  std::filesystem::path logDir_;
  agent::Duration stopGrace_;
  std::uint64_t generation_ = 0;
  LocalWorkerGroup workers_;
};

}  // namespace stretch::launcher
