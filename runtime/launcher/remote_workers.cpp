#include "runtime/launcher/remote_workers.hpp"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "runtime/launcher/launch_defaults.hpp"
#include "runtime/live/generation.hpp"

namespace stretch::launcher {

using namespace agent;

using std::chrono::milliseconds;

RemoteWorkers::RemoteWorkers(const JobControllerOptions& options, NodeTracker& tracker)
    : options_(options), store_(*options.store), tracker_(tracker) {}

void RemoteWorkers::start(const StartWorkers& action) {
  Command c;
  c.kind = CommandKind::Start;
  c.start = action;
  c.reason = action.reason;
  c.masterAddr = masterAddrFor(action);
  c.liveGeneration = liveGeneration_;
  pendingTarget_.reset();
  members_ = agent::placesOf(action);
  copyDistance_ = action.nodes.empty() ? 1 : action.nodes.front().localWorldSize;
  send(c);
  running_ = action.generation;
}

void RemoteWorkers::stop() {
  pendingTarget_.reset();
  if (!running_)
    return;
  Command c;
  c.kind = CommandKind::Stop;
  c.generation = *running_;
  send(c);
  running_.reset();
}

std::vector<WorkerExited> RemoteWorkers::poll() {
  return {};
}

std::vector<WorkerExited> RemoteWorkers::readExits() {
  std::vector<WorkerExited> out;
  for (const auto& text : readRecords(store_, "exits", nextExit_)) {
    ++nextExit_;
    const ExitRecord r = decodeExitRecord(text);
    out.push_back(WorkerExited{r.generation, r.nodeId, r.localRank, r.exitCode, r.early});
  }
  return out;
}

std::optional<agent::LiveSituation> RemoteWorkers::liveSituation(
    const StartWorkers& /*next*/) const {
  if (!options_.liveStore)
    return std::nullopt;
  agent::LiveSituation s;
  s.group = members_;
  s.copyDistance = copyDistance_;
  for (const auto& [node, record] : runningWorkers()) {
    for (const auto& [local, pid] : record.workers) {
      const bool joiner =
          std::find(record.joiners.begin(), record.joiners.end(), pid) != record.joiners.end();
      const auto capability = live::liveCapability(*options_.liveStore, node, pid);
      s.running.push_back({{node, local}, pid, capability != live::LiveCapability::None, joiner});
      s.partitionCopies =
          s.partitionCopies || capability == live::LiveCapability::CapableWithCopies;
    }
  }
  return s;
}

void RemoteWorkers::continueLive(const StartWorkers& action, const agent::LivePlan& plan) {
  Command c;
  c.kind = CommandKind::Live;
  c.start = action;
  c.masterAddr = masterAddrFor(action);
  c.reason = action.reason;
  const auto locals = [](const std::vector<std::int64_t>& list) {
    return std::vector<int>(list.begin(), list.end());
  };
  std::int64_t joining = 0;
  for (const auto& [node, list] : plan.keep)
    c.keep[node] = locals(list);
  for (const auto& [node, list] : plan.join) {
    c.join[node] = locals(list);
    joining += static_cast<std::int64_t>(list.size());
  }
  pendingTarget_.reset();
  donorRelease_.reset();
  running_ = action.generation;
  std::uint64_t donorGeneration = 0;
  if (plan.publish) {
    donorGeneration = ++liveGeneration_;
    publishLive(donorGeneration, action, plan.publish->members, plan.publish->batch,
                plan.publish->donors);
    members_ = plan.publish->members;
    c.signal = true;
  }
  c.liveGeneration = liveGeneration_;
  if (plan.awaitJoiners) {
    pendingGeneration_ = ++liveGeneration_;
    pendingTarget_ = action;
    pendingJoiners_ = joining;
    pendingKeep_ = c.keep;
    c.liveGeneration = pendingGeneration_;
  }
  Command sent = c;
  if (plan.publish) {
    for (const agent::WorkerPlace& d : plan.publish->donors)
      addLocal(sent.keep, d);
  }
  send(sent);
  if (!plan.releaseAfterDonating.empty()) {
    Command release = c;
    release.signal = false;
    for (const auto& [node, list] : c.join) {
      for (const int local : list)
        addLocal(release.keep, {node, local});
    }
    release.join.clear();
    donorRelease_ =
        DonorRelease{donorGeneration, static_cast<std::int64_t>(plan.publish->donors.size()),
                     std::move(release), options_.clock()};
  }
}

void RemoteWorkers::pollLive() {
  if (donorRelease_ && (options_.liveStore->add(live::live_keys::donated(donorRelease_->generation),
                                                0) >= donorRelease_->donors ||
                        options_.clock() - donorRelease_->since > kDonorReleaseWait)) {
    const Command release = donorRelease_->command;
    donorRelease_.reset();
    send(release);
  }
  if (!pendingTarget_ ||
      options_.liveStore->add(live::live_keys::ready(pendingGeneration_), 0) < pendingJoiners_)
    return;
  const std::vector<agent::WorkerPlace> all = agent::placesOf(*pendingTarget_);
  publishLive(pendingGeneration_, *pendingTarget_, all, pendingTarget_->batch);
  members_ = all;
  pendingTarget_.reset();
  Command s;
  s.kind = CommandKind::Signal;
  s.keep = pendingKeep_;
  send(s);
}

void RemoteWorkers::exit(int code, const std::string& reason) {
  Command c;
  c.kind = CommandKind::Exit;
  c.exitCode = code;
  c.reason = reason;
  send(c);
}

void RemoteWorkers::send(Command c) {
  c.sequence = ++sequence_;
  store_.set("cmd", encode(c));
  const Time began = options_.clock();
  std::vector<std::string> pending = tracker_.alive();
  while (!pending.empty()) {
    std::vector<std::string> still;
    for (const auto& id : pending) {
      const auto ack = tryGet(store_, "ack/" + id);
      if (ack && std::stoull(*ack) >= c.sequence)
        continue;
      if (tracker_.silent(id, options_.clock())) {
        tracker_.markLost(id);
        continue;
      }
      still.push_back(id);
    }
    pending = std::move(still);
    if (pending.empty())
      break;
    if (options_.clock() - began > options_.commandTimeout) {
      for (const auto& id : pending) {
        spdlog::warn("controller: node {} did not carry out command {} within {}", id, c.sequence,
                     formatDuration(options_.commandTimeout));
        tracker_.markLost(id);
      }
      break;
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
}

void RemoteWorkers::addLocal(std::map<std::string, std::vector<int>>& keep,
                             const agent::WorkerPlace& m) {
  const auto local = static_cast<int>(m.localRank);
  auto& locals = keep[m.nodeId];
  if (std::find(locals.begin(), locals.end(), local) == locals.end())
    locals.insert(std::upper_bound(locals.begin(), locals.end(), local), local);
}

std::string RemoteWorkers::masterAddrFor(const StartWorkers& action) const {
  std::string addr = options_.masterAddr;
  if (addr.empty() && !action.nodes.empty()) {
    if (const NodeRecord* r = tracker_.record(action.nodes.front().nodeId))
      addr = r->address;
  }
  return addr.empty() ? "127.0.0.1" : addr;
}

std::map<std::string, NodeWorkersRecord> RemoteWorkers::runningWorkers() const {
  std::map<std::string, NodeWorkersRecord> out;
  for (const auto& id : tracker_.alive()) {
    if (const auto text = tryGet(store_, "workers/" + id))
      out[id] = decodeNodeWorkersRecord(*text);
  }
  return out;
}

void RemoteWorkers::publishLive(std::uint64_t generation, const StartWorkers& target,
                                const std::vector<agent::WorkerPlace>& members,
                                const config::BatchTriple& batch,
                                const std::vector<agent::WorkerPlace>& donors) {
  const auto pairs = [](const std::vector<agent::WorkerPlace>& list) {
    std::vector<std::pair<std::string, std::int64_t>> out;
    for (const agent::WorkerPlace& m : list)
      out.emplace_back(m.nodeId, m.localRank);
    return out;
  };
  const live::LiveGeneration record =
      live::makeLiveGeneration(generation, target.generation, pairs(members), batch.trainBatchSize,
                               batch.microBatchPerGpu, batch.gradientAccumulation, pairs(donors));
  live::publishLiveGeneration(*options_.liveStore, record);
  spdlog::info(
      "controller: live generation {}: {} worker(s) on {} node(s), batch {} = micro {} x "
      "accumulation {} x {}{}",
      generation, members.size(), record.nodes.size(), batch.trainBatchSize, batch.microBatchPerGpu,
      batch.gradientAccumulation, members.size(),
      donors.empty() ? "" : fmt::format("; {} survivor(s) give it their copies", donors.size()));
}

}  // namespace stretch::launcher
