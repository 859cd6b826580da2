#include "sim/sim_workers.hpp"

#include "runtime/common/check.hpp"

namespace stretch::sim {

SimWorkerGroup::SimWorkerGroup(Directory directory) : directory_(std::move(directory)) {}

void SimWorkerGroup::start(const agent::StartWorkers& action) {
  STRETCH_CHECK(!running_, "start of generation {} while generation {} runs", action.generation,
                generation_);
  STRETCH_CHECK_EQ(action.nodes.usedSum(), action.worldSize, "workers of generation {}",
                   action.generation);
  running_ = true;
  generation_ = action.generation;
  worldSize_ = action.worldSize;
  members_ = action.nodes;
  pending_.clear();
}

void SimWorkerGroup::stop() {
  members_ = {};
  pending_.clear();  // exits of stopped workers are not reported (WorkerGroup contract)
  running_ = false;
  worldSize_ = 0;
}

std::vector<agent::WorkerExited> SimWorkerGroup::poll() {
  std::vector<agent::WorkerExited> out;
  out.swap(pending_);
  return out;
}

std::int64_t SimWorkerGroup::workersOn(std::int64_t node) const {
  if (!running_) {
    return 0;
  }
  const std::optional<std::uint64_t> key = directory_.keyOf(node);
  if (!key) {
    return 0;
  }
  const std::optional<std::size_t> index = members_.indexOfKey(*key);
  return index ? members_.entry(*index).used : 0;
}

std::optional<std::pair<std::int64_t, std::int64_t>> SimWorkerGroup::locate(
    std::int64_t rank) const {
  const std::optional<std::size_t> index = members_.indexOfRank(rank);
  if (!index) {
    return std::nullopt;
  }
  return std::make_pair(directory_.indexOf(members_.entry(*index).nodeId),
                        rank - members_.firstRank(*index));
}

bool SimWorkerGroup::exitWorker(std::int64_t node, std::int64_t localRank, int exitCode) {
  if (!running_ || localRank < 0 || localRank >= workersOn(node)) {
    return false;
  }
  pending_.push_back(agent::WorkerExited{generation_, directory_.idOf(node), localRank, exitCode});
  return true;
}

void SimWorkerGroup::finishAll() {
  if (!running_) {
    return;
  }
  for (auto it = members_.begin(); it != members_.end(); ++it) {
    for (std::int64_t local = 0; local < it.entry().used; ++local) {
      pending_.push_back(agent::WorkerExited{generation_, it.entry().nodeId, local, 0});
    }
  }
}

}  // namespace stretch::sim
