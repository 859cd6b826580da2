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
//
// Live recovery: the group keeps, as the launcher's groups do, what its workers hold. The workers
// of the last generation that completed a step hold the job's state (and, with ZeRO 1/2, one copy
// of a peer's partition); a worker struck since has lost its part. liveSituation() reports that to
// the agent driver (runtime/agent/driver.hpp), which decides with the launcher's rule
// (runtime/agent/live_plan.hpp), and continueLive() starts the next generation from the workers the
// plan keeps. Simulated workers are capable of going on live once they hold the state; a worker
// that has not (started since the last completed step) counts as a joiner that is started again.
// liveSituation costs O(workers) and is asked once per restart.

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
  // `liveRecovery`: report live situations (recovery.mode live); `partitionCopies`: the workers
  // keep ZeRO 1/2 partition copies.
  explicit SimWorkerGroup(Directory directory, bool liveRecovery = false,
                          bool partitionCopies = false);

  void start(const agent::StartWorkers& action) override;
  void stop() override;
  std::vector<agent::WorkerExited> poll() override;
  std::optional<agent::LiveSituation> liveSituation(const agent::StartWorkers& next) const override;
  // The kept workers go on (nothing is stopped or started in a simulation but the membership).
  void continueLive(const agent::StartWorkers& action, const agent::LivePlan& plan) override;

  // Worker `localRank` of `node` lost what it held (its process died); kWholeNode: every worker
  // of the node. Only the workers of the last generation that completed a step count.
  static constexpr std::int64_t kWholeNode = -1;
  void strike(std::int64_t node, std::int64_t localRank = kWholeNode);
  // The running generation completed a step: its workers hold the state from now on.
  void stepCompleted();
  // Whether the running generation has not completed a step yet.
  bool stepPending() const noexcept { return stepPending_; }

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
  bool liveRecovery_ = false;
  bool partitionCopies_ = false;
  agent::NodeSequence members_;  // the running generation's nodes, by node rank
  // The nodes of the last generation that completed a step, and what struck them since:
  // (node key, local rank or kWholeNode).
  agent::NodeSequence holders_;
  std::vector<std::pair<std::uint64_t, std::int64_t>> struck_;
  // What struck the running generation's workers since it started (they no longer run).
  std::vector<std::pair<std::uint64_t, std::int64_t>> down_;
  bool stepPending_ = false;
  std::vector<agent::WorkerExited> pending_;
  bool running_ = false;
  std::uint64_t generation_ = 0;
  std::int64_t worldSize_ = 0;
};

}  // namespace stretch::sim
