#include "sim/sim_workers.hpp"

#include <algorithm>

#include "runtime/common/check.hpp"

namespace stretch::sim {

SimWorkerGroup::SimWorkerGroup(std::int64_t nodeCount, Resolver resolver)
    : resolver_(std::move(resolver)),
      workersOn_(static_cast<std::size_t>(nodeCount), 0),
      ids_(static_cast<std::size_t>(nodeCount)) {}

void SimWorkerGroup::start(const agent::StartWorkers& action) {
  STRETCH_CHECK(!running_, "start of generation {} while generation {} runs", action.generation,
                generation_);
  running_ = true;
  generation_ = action.generation;
  worldSize_ = action.worldSize;
  assigned_.clear();
  assigned_.reserve(action.nodes.size());
  pending_.clear();
  // Restarts mostly run the previous generation's nodes in the same order, less a failed node or
  // two, plus replacements: walking the previous list alongside (skipping a few departed nodes)
  // is far cheaper than a lookup per node (16,384 nodes per restart).
  constexpr std::size_t kLookAhead = 4;
  std::size_t previous = 0;
  for (std::size_t i = 0; i < action.nodes.size(); ++i) {
    const agent::NodeAssignment& a = action.nodes[i];
    std::int64_t node = -1;
    for (std::size_t k = previous; k < lastNodes_.size() && k < previous + kLookAhead; ++k) {
      if (ids_[static_cast<std::size_t>(lastNodes_[k])] == a.nodeId) {
        node = lastNodes_[k];
        previous = k + 1;
        break;
      }
    }
    if (node < 0) {
      node = resolver_(a.nodeId);
    }
    STRETCH_CHECK(node >= 0 && node < static_cast<std::int64_t>(workersOn_.size()),
                  "unknown node {} in generation {}", a.nodeId, action.generation);
    workersOn_[static_cast<std::size_t>(node)] = a.localWorldSize;
    if (ids_[static_cast<std::size_t>(node)].empty()) {
      ids_[static_cast<std::size_t>(node)] = a.nodeId;
    }
    assigned_.push_back(Assigned{node, a.firstRank, a.localWorldSize});
  }
  lastNodes_.resize(assigned_.size());
  for (std::size_t i = 0; i < assigned_.size(); ++i) {
    lastNodes_[i] = assigned_[i].node;
  }
}

void SimWorkerGroup::stop() {
  for (const Assigned& a : assigned_) {
    workersOn_[static_cast<std::size_t>(a.node)] = 0;
  }
  assigned_.clear();
  pending_.clear();  // exits of stopped workers are not reported (WorkerGroup contract)
  running_ = false;
  worldSize_ = 0;
}

std::vector<agent::WorkerExited> SimWorkerGroup::poll() {
  std::vector<agent::WorkerExited> out;
  out.swap(pending_);
  return out;
}

std::int64_t SimWorkerGroup::workersOn(std::int64_t node) const noexcept {
  if (node < 0 || node >= static_cast<std::int64_t>(workersOn_.size())) {
    return 0;
  }
  return workersOn_[static_cast<std::size_t>(node)];
}

std::optional<std::pair<std::int64_t, std::int64_t>> SimWorkerGroup::locate(
    std::int64_t rank) const {
  // assigned_ is in rank order (node rank = position, ranks consecutive).
  const auto it =
      std::upper_bound(assigned_.begin(), assigned_.end(), rank,
                       [](std::int64_t r, const Assigned& a) { return r < a.firstRank; });
  if (it == assigned_.begin()) {
    return std::nullopt;
  }
  const Assigned& a = *(it - 1);
  if (rank - a.firstRank >= a.workers) {
    return std::nullopt;
  }
  return std::make_pair(a.node, rank - a.firstRank);
}

const std::string& SimWorkerGroup::nodeId(std::int64_t node) const {
  return ids_.at(static_cast<std::size_t>(node));
}

bool SimWorkerGroup::exitWorker(std::int64_t node, std::int64_t localRank, int exitCode) {
  if (!running_ || localRank < 0 || localRank >= workersOn(node)) {
    return false;
  }
  pending_.push_back(
      agent::WorkerExited{generation_, ids_[static_cast<std::size_t>(node)], localRank, exitCode});
  return true;
}

void SimWorkerGroup::finishAll() {
  if (!running_) {
    return;
  }
  for (const Assigned& a : assigned_) {
    for (std::int64_t local = 0; local < a.workers; ++local) {
      pending_.push_back(
          agent::WorkerExited{generation_, ids_[static_cast<std::size_t>(a.node)], local, 0});
    }
  }
}

}  // namespace stretch::sim
