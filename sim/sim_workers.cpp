#include "sim/sim_workers.hpp"

#include <algorithm>
#include <limits>

#include "runtime/common/check.hpp"

namespace stretch::sim {

namespace {

using Struck = std::vector<std::pair<std::uint64_t, std::int64_t>>;

bool contains(const Struck& list, std::uint64_t key, std::int64_t localRank) {
  return std::binary_search(list.begin(), list.end(), std::make_pair(key, localRank)) ||
         std::binary_search(list.begin(), list.end(),
                            std::make_pair(key, SimWorkerGroup::kWholeNode));
}

// Whether anything struck the node of `key` (list sorted): O(log list).
bool anyOn(const Struck& list, std::uint64_t key) {
  const auto it = std::lower_bound(list.begin(), list.end(),
                                   std::make_pair(key, std::numeric_limits<std::int64_t>::min()));
  return it != list.end() && it->first == key;
}

Struck sorted(Struck list) {
  std::sort(list.begin(), list.end());
  return list;
}

}  // namespace

SimWorkerGroup::SimWorkerGroup(Directory directory, bool liveRecovery, bool partitionCopies)
    : directory_(std::move(directory)),
      liveRecovery_(liveRecovery),
      partitionCopies_(partitionCopies) {}

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
  down_.clear();
  stepPending_ = liveRecovery_;
}

void SimWorkerGroup::continueLive(const agent::StartWorkers& action, const agent::LivePlan& plan) {
  STRETCH_CHECK(running_ && plan.live, "live start of generation {} without running workers",
                action.generation);
  STRETCH_CHECK_EQ(action.nodes.usedSum(), action.worldSize, "workers of generation {}",
                   action.generation);
  generation_ = action.generation;
  worldSize_ = action.worldSize;
  members_ = action.nodes;
  pending_.clear();
  down_.clear();  // the plan stopped the struck workers; their places start again (joiners)
  stepPending_ = true;
}

void SimWorkerGroup::strike(std::int64_t node, std::int64_t localRank) {
  if (!liveRecovery_) {
    return;
  }
  const std::optional<std::uint64_t> key = directory_.keyOf(node);
  if (!key) {
    return;
  }
  const std::pair<std::uint64_t, std::int64_t> hit{*key, localRank};
  for (Struck* list : {&struck_, &down_}) {
    if (std::find(list->begin(), list->end(), hit) == list->end()) {
      list->push_back(hit);
    }
  }
}

void SimWorkerGroup::stepCompleted() {
  if (!stepPending_ || !running_) {
    return;
  }
  holders_ = members_;
  struck_.clear();
  stepPending_ = false;
}

std::optional<agent::LiveSituation> SimWorkerGroup::liveSituation(
    const agent::StartWorkers& /*next*/) const {
  if (!liveRecovery_) {
    return std::nullopt;
  }
  agent::LiveSituation s;
  s.partitionCopies = partitionCopies_;
  s.copyDistance = holders_.empty() ? 1 : holders_.entry(0).used;
  s.group.reserve(static_cast<std::size_t>(holders_.usedSum()));
  for (auto it = holders_.begin(); it != holders_.end(); ++it) {
    for (std::int64_t local = 0; local < it.entry().used; ++local) {
      s.group.emplace_back(it.entry().nodeId, local);
    }
  }
  if (!running_) {
    return s;
  }
  const Struck struck = sorted(struck_);
  const Struck down = sorted(down_);
  s.running.reserve(static_cast<std::size_t>(members_.usedSum()));
  for (auto it = members_.begin(); it != members_.end(); ++it) {
    const agent::NodeEntry& e = it.entry();
    const std::optional<std::size_t> at = holders_.indexOfKey(e.key);
    const std::int64_t held = at ? holders_.entry(*at).used : 0;
    const bool anyDown = anyOn(down, e.key);
    const bool anyStruck = anyOn(struck, e.key);
    for (std::int64_t local = 0; local < e.used; ++local) {
      if (anyDown && contains(down, e.key, local)) {
        continue;  // no longer runs
      }
      // It holds the state when it trained the last completed step and nothing struck it since;
      // otherwise it is a worker started since, not ready: started again.
      const bool capable = local < held && !(anyStruck && contains(struck, e.key, local));
      s.running.push_back({{e.nodeId, local}, 0, capable, !capable});
    }
  }
  return s;
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
