#include "runtime/launcher/live_executor.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "runtime/launcher/launch_defaults.hpp"
#include "runtime/live/generation.hpp"

namespace stretch::launcher {

namespace {

LocalsByNode localsOf(const std::map<std::string, std::vector<std::int64_t>>& byNode) {
  LocalsByNode out;
  for (const auto& [node, list] : byNode)
    out[node] = std::vector<int>(list.begin(), list.end());
  return out;
}

void add(LocalsByNode& to, const agent::WorkerPlace& p) {
  auto& locals = to[p.nodeId];
  const auto local = static_cast<int>(p.localRank);
  const auto at = std::lower_bound(locals.begin(), locals.end(), local);
  if (at == locals.end() || *at != local)
    locals.insert(at, local);
}

std::int64_t count(const LocalsByNode& places) {
  std::int64_t n = 0;
  for (const auto& [node, list] : places)
    n += static_cast<std::int64_t>(list.size());
  return n;
}

}  // namespace

LiveExecutor::LiveExecutor(comm::Store& store, LiveTransport& transport, agent::Clock clock,
                           std::string who, bool batchContract)
    : store_(store),
      transport_(transport),
      clock_(std::move(clock)),
      who_(std::move(who)),
      batchContract_(batchContract) {}

void LiveExecutor::started(const agent::StartWorkers& action) {
  stopped();
  members_ = agent::placesOf(action);
  copyDistance_ = action.nodes.empty() ? 1 : action.nodes.front().localWorldSize;
}

void LiveExecutor::stopped() {
  pending_.reset();
  donorRelease_.reset();
}

agent::LiveSituation LiveExecutor::situation() const {
  agent::LiveSituation s;
  s.group = members_;
  s.copyDistance = copyDistance_;
  for (const RunningWorkerInfo& w : transport_.liveWorkers()) {
    const auto capability = live::liveCapability(store_, w.place.nodeId, w.pid);
    s.running.push_back({w.place, w.pid, capability != live::LiveCapability::None, w.joiner});
    s.partitionCopies = s.partitionCopies || capability == live::LiveCapability::CapableWithCopies;
  }
  return s;
}

void LiveExecutor::carryOut(const agent::StartWorkers& action, const agent::LivePlan& plan) {
  stopped();
  const LocalsByNode keep = localsOf(plan.keep);
  const LocalsByNode join = localsOf(plan.join);
  std::uint64_t donorGeneration = 0;
  LocalsByNode told = keep;  // the kept workers, and the donors until they gave their copies
  if (plan.publish) {
    donorGeneration = ++liveGeneration_;
    publish(donorGeneration, action, plan.publish->members, plan.publish->batch,
            plan.publish->donors);
    members_ = plan.publish->members;
    for (const agent::WorkerPlace& d : plan.publish->donors)
      add(told, d);
  }
  std::uint64_t generation = liveGeneration_;
  if (plan.awaitJoiners) {
    generation = ++liveGeneration_;
    pending_ = Pending{action, generation, count(join), keep};
  }
  transport_.adopt(action, told, join, generation, plan.publish.has_value());
  if (!plan.releaseAfterDonating.empty() && plan.publish) {
    LocalsByNode stay = keep;
    for (const auto& [node, list] : join) {
      for (const int local : list)
        add(stay, {node, local});
    }
    donorRelease_ =
        DonorRelease{donorGeneration, static_cast<std::int64_t>(plan.publish->donors.size()),
                     action,          std::move(stay),
                     generation,      clock_()};
  }
}

void LiveExecutor::poll() {
  if (donorRelease_ && (store_.add(live::live_keys::donated(donorRelease_->generation), 0) >=
                            donorRelease_->donors ||
                        clock_() - donorRelease_->since > kDonorReleaseWait)) {
    const DonorRelease release = std::move(*donorRelease_);
    donorRelease_.reset();
    transport_.adopt(release.target, release.keep, {}, release.liveGeneration, false);
  }
  if (!pending_ || store_.add(live::live_keys::ready(pending_->generation), 0) < pending_->joiners)
    return;
  // Every joiner is ready: the generation the state machine asked for, at the survivors' next
  // step boundary.
  const Pending done = std::move(*pending_);
  pending_.reset();
  const std::vector<agent::WorkerPlace> all = agent::placesOf(done.target);
  publish(done.generation, done.target, all, done.target.batch);
  members_ = all;
  transport_.signal(done.keep);
}

void LiveExecutor::publish(std::uint64_t generation, const agent::StartWorkers& target,
                           const std::vector<agent::WorkerPlace>& members,
                           const config::BatchTriple& batch,
                           const std::vector<agent::WorkerPlace>& donors) {
  const auto pairs = [](const std::vector<agent::WorkerPlace>& list) {
    std::vector<std::pair<std::string, std::int64_t>> out;
    for (const agent::WorkerPlace& m : list)
      out.emplace_back(m.nodeId, m.localRank);
    return out;
  };
  const config::BatchTriple told = batchContract_ ? batch : config::BatchTriple{0, 0, 0};
  const live::LiveGeneration record =
      live::makeLiveGeneration(generation, target.generation, pairs(members), told.trainBatchSize,
                               told.microBatchPerGpu, told.gradientAccumulation, pairs(donors));
  live::publishLiveGeneration(store_, record);
  spdlog::info(
      "{}: live generation {}: {} worker(s) on {} node(s), {}{}", who_, generation, members.size(),
      record.nodes.size(),
      batchContract_
          ? fmt::format("batch {} = micro {} x accumulation {} x {}", batch.trainBatchSize,
                        batch.microBatchPerGpu, batch.gradientAccumulation, members.size())
          : std::string("batch from each worker's config"),
      donors.empty() ? "" : fmt::format("; {} survivor(s) give it their copies", donors.size()));
}

}  // namespace stretch::launcher
