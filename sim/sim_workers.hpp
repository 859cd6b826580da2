#pragma once
// SimWorkerGroup: the agent::WorkerGroup of the simulator. It "runs" the workers a StartWorkers
// assigns to every node of the job (no processes), knows which node runs which ranks, and
// reports the exits the simulation makes happen (a failure kills a node's workers, the end of
// the job makes every worker exit 0) through poll(), as real processes would.
//
// Node indices are the simulation's; the group maps the action's node ids to them with the
// resolver given at construction. Memory: O(nodes of the job). Not thread-safe.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/agent/worker_group.hpp"

namespace stretch::sim {

class SimWorkerGroup final : public agent::WorkerGroup {
 public:
  using Resolver = std::function<std::int64_t(const std::string& nodeId)>;
  SimWorkerGroup(std::int64_t nodeCount, Resolver resolver);

  void start(const agent::StartWorkers& action) override;
  void stop() override;
  std::vector<agent::WorkerExited> poll() override;

  bool running() const noexcept { return running_; }
  std::uint64_t generation() const noexcept { return generation_; }
  std::int64_t worldSize() const noexcept { return worldSize_; }
  // Workers the node runs in the current generation (0 when none).
  std::int64_t workersOn(std::int64_t node) const noexcept;
  // The node and local rank of a global rank; nullopt when no such rank runs.
  std::optional<std::pair<std::int64_t, std::int64_t>> locate(std::int64_t rank) const;
  const std::string& nodeId(std::int64_t node) const;

  // Worker `localRank` on `node` exits with `exitCode` (reported by the next poll()). Returns
  // false (and reports nothing) when it does not run.
  bool exitWorker(std::int64_t node, std::int64_t localRank, int exitCode);
  // Every worker of the generation exits 0, in rank order.
  void finishAll();

 private:
  struct Assigned {
    std::int64_t node;
    std::int64_t firstRank;
    std::int64_t workers;
  };
  Resolver resolver_;
  std::vector<std::int64_t> workersOn_;
  std::vector<Assigned> assigned_;       // by node rank
  std::vector<std::string> ids_;         // by node index, filled as nodes appear
  std::vector<std::int64_t> lastNodes_;  // node indices of the last generation, by node rank
  std::vector<agent::WorkerExited> pending_;
  bool running_ = false;
  std::uint64_t generation_ = 0;
  std::int64_t worldSize_ = 0;
};

}  // namespace stretch::sim
