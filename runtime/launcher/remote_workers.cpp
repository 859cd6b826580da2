#include "runtime/launcher/remote_workers.hpp"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "runtime/comm/errors.hpp"
#include "runtime/launcher/launch_defaults.hpp"
#include "runtime/live/generation.hpp"

namespace stretch::launcher {

using namespace agent;

using std::chrono::milliseconds;

RemoteWorkers::RemoteWorkers(const JobControllerOptions& options, NodeTracker& tracker)
    : options_(options), store_(*options.store), tracker_(tracker) {
  if (options_.liveStore)
    executor_.emplace(*options_.liveStore, static_cast<LiveTransport&>(*this), options_.clock,
                      "controller", options_.batchContract);
}

void RemoteWorkers::start(const StartWorkers& action) {
  Command c;
  c.kind = CommandKind::Start;
  c.start = action;
  c.reason = action.reason;
  c.masterAddr = masterAddrFor(action);
  c.liveGeneration = executor_ ? executor_->liveGeneration() : 0;
  if (executor_)
    executor_->started(action);
  // Each node's part first, one key per 64 registration slots: an agent reads its own group.
  for (const auto& [key, value] :
       encodeAssignments(action, [&](const std::string& id) { return tracker_.slot(id); }))
    store_.set(key, value);
  send(c);
  running_ = action.generation;
}

void RemoteWorkers::stop() {
  if (executor_)
    executor_->stopped();
  if (!running_)
    return;
  Command c;
  c.kind = CommandKind::Stop;
  c.generation = *running_;
  send(c);
  running_.reset();
}

std::vector<NodeLeft> RemoteWorkers::goneNodes(const StartWorkers& action) const {
  const std::vector<std::string> alive = tracker_.alive();  // sorted (the tracker's map order)
  std::vector<NodeLeft> out;
  for (const NodeAssignment& node : action.nodes) {
    if (!std::binary_search(alive.begin(), alive.end(), node.nodeId))
      out.push_back(NodeLeft{node.nodeId, fmt::format("its agent was gone before generation {} "
                                                      "started",
                                                      action.generation)});
  }
  return out;
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
  if (!executor_)
    return std::nullopt;
  return executor_->situation();
}

void RemoteWorkers::continueLive(const StartWorkers& action, const agent::LivePlan& plan) {
  if (!executor_)
    throw InternalError("RemoteWorkers: a live plan without live recovery");
  running_ = action.generation;
  executor_->carryOut(action, plan);
}

void RemoteWorkers::pollLive() {
  if (executor_)
    executor_->poll();
}

std::vector<RunningWorkerInfo> RemoteWorkers::liveWorkers() const {
  std::vector<RunningWorkerInfo> out;
  for (const auto& [node, record] : runningWorkers()) {
    for (const auto& [local, pid] : record.workers) {
      const bool joiner =
          std::find(record.joiners.begin(), record.joiners.end(), pid) != record.joiners.end();
      out.push_back({{node, local}, pid, joiner});
    }
  }
  return out;
}

void RemoteWorkers::adopt(const StartWorkers& target, const LocalsByNode& keep,
                          const LocalsByNode& join, std::uint64_t liveGeneration, bool signal) {
  Command c;
  c.kind = CommandKind::Live;
  c.start = target;
  c.masterAddr = masterAddrFor(target);
  c.reason = target.reason;
  c.keep = keep;
  c.join = join;
  c.liveGeneration = liveGeneration;
  c.signal = signal;
  send(c);
}

void RemoteWorkers::signal(const LocalsByNode& workers) {
  Command s;
  s.kind = CommandKind::Signal;
  s.keep = workers;
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
  std::vector<std::string> pending = tracker_.alive();
  for (const auto& id : pending)
    c.expect.push_back(tracker_.slot(id));
  std::sort(c.expect.begin(), c.expect.end());
  store_.set("cmd", encode(c));
  store_.set(commandKey(c.sequence), "1");  // wakes the agents waiting for it
  // The keys of two commands back: every agent that command expected finished it or was given
  // up on (one that waits on its key anyway reads `cmd` at the end of its wait).
  if (c.sequence > 2) {
    const std::uint64_t old = c.sequence - 2;
    store_.deleteKey(commandKey(old));
    store_.deleteKey(ackCountKey(old));
    store_.deleteKey(acksDoneKey(old));
  }
  // One wait for the last acknowledgement (acks/<sequence>/all), renewed every keep-alive check
  // to drop the nodes that fell silent meanwhile. Once one has, the count can no longer complete:
  // the acknowledgements of the nodes still waited for are read one by one (ack/<node>).
  const Time began = options_.clock();
  bool byNode = false;
  const std::string done = acksDoneKey(c.sequence);
  while (!pending.empty()) {
    if (byNode) {
      std::vector<std::string> still;
      for (const auto& id : pending) {
        const auto ack = tryGet(store_, "ack/" + id);
        if (!ack || std::stoull(*ack) < c.sequence)
          still.push_back(id);
      }
      pending = std::move(still);
      if (pending.empty())
        break;
      std::this_thread::sleep_for(milliseconds(20));
    } else {
      const Duration left = options_.commandTimeout - (options_.clock() - began);
      try {
        store_.wait({done}, std::clamp<Duration>(std::min(left, tracker_.checkInterval()),
                                                 milliseconds(1), std::chrono::seconds(60)));
        break;
      } catch (const comm::StoreTimeoutError&) {
      }
    }
    std::vector<std::string> still;
    for (const auto& id : pending) {
      if (tracker_.silent(id, options_.clock())) {
        tracker_.markLost(id);
        byNode = true;
        continue;
      }
      still.push_back(id);
    }
    pending = std::move(still);
    if (!pending.empty() && options_.clock() - began > options_.commandTimeout) {
      for (const auto& id : pending) {
        spdlog::warn("controller: node {} did not carry out command {} within {}", id, c.sequence,
                     formatDuration(options_.commandTimeout));
        tracker_.markLost(id);
      }
      break;
    }
  }
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

}  // namespace stretch::launcher
