#include "runtime/launcher/job_controller.hpp"

#include <algorithm>
#include <csignal>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "runtime/launcher/job_protocol.hpp"
#include "runtime/live/generation.hpp"

namespace stretch::launcher {

using namespace agent;

namespace {

using std::chrono::milliseconds;

// The controller's view of the registered node agents.
class NodeTracker {
 public:
  // launchHosts: the hosts the launcher started agents on, in hostfile order. Their
  // registrations are held (up to `window`) until every one of them has registered or is known
  // to be gone, then announced in that order, so node ranks follow the hostfile (and MASTER_ADDR
  // is the first host's) whatever order the agents come up in.
  NodeTracker(comm::Store& store, Duration heartbeatTimeout, std::vector<std::string> launchHosts,
              Duration window)
      : store_(store),
        heartbeatTimeout_(heartbeatTimeout),
        launchHosts_(std::move(launchHosts)),
        window_(window),
        holding_(!launchHosts_.empty()) {}

  // New registrations and departures since the last call, and (withHeartbeats) silent nodes.
  // Exits read before this call that a departure explains are applied after it (see
  // job_protocol.hpp, "Order").
  std::vector<Event> poll(Time now, bool withHeartbeats) {
    std::vector<Event> out;
    for (const auto& text : readRecords(store_, "nodes", nextRecord_)) {
      ++nextRecord_;
      const NodeRecord record = decodeNodeRecord(text);
      auto& node = nodes_[record.nodeId];
      if (node.alive)
        out.emplace_back(NodeLeft{record.nodeId, "its agent registered again"});
      node.record = record;
      node.alive = true;
      node.counter = -1;
      node.lastChange = now;
      spdlog::info("controller: node {} registered ({} slot(s), address {})", record.nodeId,
                   record.slots, record.address);
      if (holding_) {
        held_.push_back(record.nodeId);
        holdSince_ = holdSince_.value_or(now);
      } else {
        out.emplace_back(NodeJoined{record.nodeId, record.slots});
      }
    }
    for (auto& id : pendingLost_) {
      auto it = nodes_.find(id);
      if (it != nodes_.end() && it->second.alive) {
        it->second.alive = false;
        out.emplace_back(HeartbeatLost{id});
      }
    }
    pendingLost_.clear();
    for (const auto& text : readRecords(store_, "leaves", nextLeave_)) {
      ++nextLeave_;
      const auto tab = text.find('\t');
      const std::string id = text.substr(0, tab);
      const std::string why = tab == std::string::npos ? "its agent left" : text.substr(tab + 1);
      auto it = nodes_.find(id);
      if (it != nodes_.end() && it->second.alive) {
        it->second.alive = false;
        if (!isHeld(id))
          out.emplace_back(NodeLeft{id, why});
      } else if (holding_) {
        gone_.insert(id);  // its agent never registered (a runner that failed)
      }
    }
    if (holding_)
      maybeRelease(now, out);
    if (!withHeartbeats)
      return out;
    for (auto& [id, node] : nodes_) {
      if (!node.alive)
        continue;
      if (silent(id, node, now)) {
        node.alive = false;
        spdlog::warn("controller: node {} sent no keep-alive for {}", id,
                     formatDuration(heartbeatTimeout_));
        if (!isHeld(id))
          out.emplace_back(HeartbeatLost{id});
      }
    }
    return out;
  }

  // Reads the node's keep-alive counter; true when it has not moved for heartbeatTimeout.
  bool silent(const std::string& id, Time now) {
    auto it = nodes_.find(id);
    return it == nodes_.end() || !it->second.alive || silent(id, it->second, now);
  }

  void markLost(const std::string& id) { pendingLost_.insert(id); }

  std::vector<std::string> alive() const {
    std::vector<std::string> out;
    for (const auto& [id, node] : nodes_) {
      if (node.alive && !pendingLost_.count(id))
        out.push_back(id);
    }
    return out;
  }

  const NodeRecord* record(const std::string& id) const {
    auto it = nodes_.find(id);
    return it == nodes_.end() ? nullptr : &it->second.record;
  }

 private:
  struct Node {
    NodeRecord record;
    bool alive = false;
    std::int64_t counter = -1;
    Time lastChange{0};
  };

  bool silent(const std::string& id, Node& node, Time now) {
    const std::int64_t counter = store_.add("hb/" + id, 0);
    if (counter != node.counter) {
      node.counter = counter;
      node.lastChange = now;
      return false;
    }
    return now - node.lastChange > heartbeatTimeout_;
  }

  bool isHeld(const std::string& id) const {
    return holding_ && std::find(held_.begin(), held_.end(), id) != held_.end();
  }

  // Announces the held registrations in hostfile order once every launched host registered or
  // is gone, or the window has passed.
  void maybeRelease(Time now, std::vector<Event>& out) {
    const bool allIn = std::all_of(launchHosts_.begin(), launchHosts_.end(), [&](const auto& h) {
      return gone_.contains(h) || std::find(held_.begin(), held_.end(), h) != held_.end();
    });
    if (!allIn && !(holdSince_ && now - *holdSince_ >= window_))
      return;
    auto rank = [&](const std::string& id) {
      const auto it = std::find(launchHosts_.begin(), launchHosts_.end(), id);
      return static_cast<std::size_t>(it - launchHosts_.begin());  // others after, in arrival order
    };
    std::stable_sort(held_.begin(), held_.end(),
                     [&](const auto& a, const auto& b) { return rank(a) < rank(b); });
    holding_ = false;
    for (const auto& id : held_) {
      const auto it = nodes_.find(id);
      if (it != nodes_.end() && it->second.alive)
        out.emplace_back(NodeJoined{id, it->second.record.slots});
    }
    held_.clear();
  }

  comm::Store& store_;
  Duration heartbeatTimeout_;
  std::vector<std::string> launchHosts_;
  Duration window_;
  bool holding_ = false;
  std::optional<Time> holdSince_;
  std::vector<std::string> held_;
  std::set<std::string> gone_;
  std::int64_t nextRecord_ = 0;
  std::int64_t nextLeave_ = 0;
  std::map<std::string, Node> nodes_;
  std::set<std::string> pendingLost_;
};

// The workers of every node, run by their agents through commands.
class RemoteWorkers final : public WorkerGroup {
 public:
  RemoteWorkers(const JobControllerOptions& options, NodeTracker& tracker)
      : options_(options), store_(*options.store), tracker_(tracker) {}

  void start(const StartWorkers& action) override {
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

  void stop() override {
    pendingTarget_.reset();
    if (!running_)
      return;
    Command c;
    c.kind = CommandKind::Stop;
    c.generation = *running_;
    send(c);
    running_.reset();
  }

  // Exits are delivered with the node events (runJobController), so that a departure read in the
  // same poll comes first.
  std::vector<WorkerExited> poll() override { return {}; }

  std::vector<WorkerExited> readExits() {
    std::vector<WorkerExited> out;
    for (const auto& text : readRecords(store_, "exits", nextExit_)) {
      ++nextExit_;
      const ExitRecord r = decodeExitRecord(text);
      out.push_back(WorkerExited{r.generation, r.nodeId, r.localRank, r.exitCode});
    }
    return out;
  }

  // ---- Live recovery (options.liveStore set) -------------------------------------------------

  // What the live nodes run (their workers/<node> records) and what the workers said
  // (live/capable), for agent::planLiveRecovery.
  std::optional<agent::LiveSituation> liveSituation(const StartWorkers& /*next*/) const override {
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

  // Carries out `plan` through one Live command: keeps its workers (and the donors until they
  // gave their copies), starts the joiners, publishes the generation the plan publishes at once;
  // the generation `action` follows once every joiner is ready (pollLive). Donors left out of
  // `action` are stopped, by the same command without them, once they gave their copies.
  void continueLive(const StartWorkers& action, const agent::LivePlan& plan) override {
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

  // Publishes the pending generation once every joiner is ready, and signals the survivors;
  // stops the donors left out of the generation once they gave their copies (or after a minute,
  // should one never say so).
  void pollLive() {
    if (donorRelease_ &&
        (options_.liveStore->add(live::live_keys::donated(donorRelease_->generation), 0) >=
             donorRelease_->donors ||
         options_.clock() - donorRelease_->since > std::chrono::seconds(60))) {
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

  // Tells every agent the job ended, and waits (bounded) for them to stop.
  void exit(int code, const std::string& reason) {
    Command c;
    c.kind = CommandKind::Exit;
    c.exitCode = code;
    c.reason = reason;
    send(c);
  }

 private:
  // Publishes the command and waits until every live agent acknowledged it, at most
  // commandTimeout; agents that fall silent meanwhile are marked lost instead of waited for.
  void send(Command c) {
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

  static void addLocal(std::map<std::string, std::vector<int>>& keep, const agent::WorkerPlace& m) {
    const auto local = static_cast<int>(m.localRank);
    auto& locals = keep[m.nodeId];
    if (std::find(locals.begin(), locals.end(), local) == locals.end())
      locals.insert(std::upper_bound(locals.begin(), locals.end(), local), local);
  }

  std::string masterAddrFor(const StartWorkers& action) const {
    std::string addr = options_.masterAddr;
    if (addr.empty() && !action.nodes.empty()) {
      if (const NodeRecord* r = tracker_.record(action.nodes.front().nodeId))
        addr = r->address;
    }
    return addr.empty() ? "127.0.0.1" : addr;
  }

  // What every live node runs (its workers/<node> record), by node id.
  std::map<std::string, NodeWorkersRecord> runningWorkers() const {
    std::map<std::string, NodeWorkersRecord> out;
    for (const auto& id : tracker_.alive()) {
      if (const auto text = tryGet(store_, "workers/" + id))
        out[id] = decodeNodeWorkersRecord(*text);
    }
    return out;
  }

  void publishLive(std::uint64_t generation, const StartWorkers& target,
                   const std::vector<agent::WorkerPlace>& members, const config::BatchTriple& batch,
                   const std::vector<agent::WorkerPlace>& donors = {}) {
    const auto pairs = [](const std::vector<agent::WorkerPlace>& list) {
      std::vector<std::pair<std::string, std::int64_t>> out;
      for (const agent::WorkerPlace& m : list)
        out.emplace_back(m.nodeId, m.localRank);
      return out;
    };
    const live::LiveGeneration record = live::makeLiveGeneration(
        generation, target.generation, pairs(members), batch.trainBatchSize, batch.microBatchPerGpu,
        batch.gradientAccumulation, pairs(donors));
    live::publishLiveGeneration(*options_.liveStore, record);
    spdlog::info(
        "controller: live generation {}: {} worker(s) on {} node(s), batch {} = micro {} x "
        "accumulation {} x {}{}",
        generation, members.size(), record.nodes.size(), batch.trainBatchSize,
        batch.microBatchPerGpu, batch.gradientAccumulation, members.size(),
        donors.empty() ? "" : fmt::format("; {} survivor(s) give it their copies", donors.size()));
  }

  std::vector<agent::WorkerPlace> members_;  // the running live group, in rank order
  // The workers' LOCAL_WORLD_SIZE at their start: the distance of their partition copies.
  std::int64_t copyDistance_ = 1;
  std::uint64_t liveGeneration_ = 0;
  std::optional<StartWorkers> pendingTarget_;  // published once every joiner is ready
  std::uint64_t pendingGeneration_ = 0;
  std::int64_t pendingJoiners_ = 0;
  std::map<std::string, std::vector<int>> pendingKeep_;
  // Donors left out of the generation they gave their copies to: `command` (the generation's,
  // without them) stops them once `donors` said so (live/donated) or a minute passed.
  struct DonorRelease {
    std::uint64_t generation = 0;
    std::int64_t donors = 0;
    Command command;
    Time since{0};
  };
  std::optional<DonorRelease> donorRelease_;

  const JobControllerOptions& options_;
  comm::Store& store_;
  NodeTracker& tracker_;
  std::uint64_t sequence_ = 0;
  std::int64_t nextExit_ = 0;
  std::optional<std::uint64_t> running_;
};

}  // namespace

AgentResult runJobController(const JobControllerOptions& options) {
  if (!options.store)
    throw InternalError("runJobController: no store");
  comm::Store& store = *options.store;
  // A command left from an earlier job on the same store would confuse the agents.
  if (auto old = tryGet(store, "cmd"))
    throw ConfigError(fmt::format(
        "the job's store already holds a command ('{}'): another job uses this rendezvous port",
        old->substr(0, old->find('\n'))));
  NodeTracker tracker(store, options.heartbeatTimeout, options.launchHosts,
                      options.registrationWindow);
  RemoteWorkers workers(options, tracker);

  AgentLoopOptions loop;
  loop.config = options.config;
  loop.eventLog = options.eventLog;
  loop.checkpointDir = options.checkpointDir;
  loop.monitorInterval = options.monitorInterval;
  loop.clock = options.clock;
  loop.liveRecovery = options.liveStore != nullptr;
  std::string abandonedWhy;
  // The agent loop stops on a signal; an abandoned job stops it the same way, with SIGTERM's
  // number, and the result is rewritten below.
  std::atomic<int> combined{0};
  loop.stopSignal = &combined;
  Time lastNodePoll{0};
  loop.nodeEvents = [&](Time now) -> std::vector<Event> {
    if (options.stopSignal != nullptr && options.stopSignal->load() != 0)
      combined.store(options.stopSignal->load());
    if (options.pollLaunchers && abandonedWhy.empty()) {
      abandonedWhy = options.pollLaunchers();
      if (!abandonedWhy.empty())
        combined.store(SIGTERM);
    }
    // Exits first, then departures (job_protocol.hpp, "Order"); keep-alives, a store round trip
    // per node, every 50 ms (plenty next to second-scale timeouts).
    const std::vector<WorkerExited> exits = workers.readExits();
    if (options.liveStore)
      workers.pollLive();
    const bool heartbeats = now - lastNodePoll >= milliseconds(50);
    if (heartbeats)
      lastNodePoll = now;
    std::vector<Event> events = tracker.poll(now, heartbeats);
    events.insert(events.end(), exits.begin(), exits.end());
    return events;
  };
  AgentResult result = runAgentLoop(loop, workers);
  if (!abandonedWhy.empty()) {
    result.exitCode = 1;
    result.message = abandonedWhy;
  }
  workers.exit(result.exitCode, result.message);
  return result;
}

}  // namespace stretch::launcher
