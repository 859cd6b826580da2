#pragma once
// SimWorkerGroup: the agent::WorkerGroup of the simulator. It "runs" the workers a StartWorkers
// assigns to every node of the job (no processes), knows which node runs which ranks, and
// reports the exits the simulation makes happen (a failure kills a node's workers, the end of
// the job makes every worker exit 0) through poll(), as real processes would.
//
// Node indices are the simulation's; the group keeps the generation's NodeSequence and maps
// between the two through the Directory given at construction. Starting and stopping a
// generation costs O(1) whatever the number of nodes (the sequence is shared with the agent);
// a node's or a rank's lookup costs O(log nodes). Not thread-safe.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/agent/worker_group.hpp"

namespace stretch::sim {

class SimWorkerGroup final : public agent::WorkerGroup {
 public:
  // How the simulation names its nodes.
  struct Directory {
    std::function<std::int64_t(const std::string& nodeId)> indexOf;
    std::function<const std::string&(std::int64_t node)> idOf;
    // The node's key in the agent's sequences (AgentStateMachine::nodeKey); nullopt when the
    // agent does not know the node.
    std::function<std::optional<std::uint64_t>(std::int64_t node)> keyOf;
  };
  explicit SimWorkerGroup(Directory directory);

  void start(const agent::StartWorkers& action) override;
  void stop() override;
  std::vector<agent::WorkerExited> poll() override;

  bool running() const noexcept { return running_; }
  std::uint64_t generation() const noexcept { return generation_; }
  std::int64_t worldSize() const noexcept { return worldSize_; }
  // Workers the node runs in the current generation (0 when none).
  std::int64_t workersOn(std::int64_t node) const;
  // The node and local rank of a global rank; nullopt when no such rank runs.
  std::optional<std::pair<std::int64_t, std::int64_t>> locate(std::int64_t rank) const;

  // Worker `localRank` on `node` exits with `exitCode` (reported by the next poll()). Returns
  // false (and reports nothing) when it does not run.
  bool exitWorker(std::int64_t node, std::int64_t localRank, int exitCode);
  // Every worker of the generation exits 0, in rank order (O(world size), once per run).
  void finishAll();

 private:
  Directory directory_;
  agent::NodeSequence members_;  // the running generation's nodes, by node rank
  std::vector<agent::WorkerExited> pending_;
  bool running_ = false;
  std::uint64_t generation_ = 0;
  std::int64_t worldSize_ = 0;
};

}  // namespace stretch::sim
