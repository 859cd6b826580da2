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

#include "runtime/comm/live_generation.hpp"
#include "runtime/launcher/job_protocol.hpp"

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
    members_ = membersOf(action);
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

  // Whether `next` can continue with the running workers: every running worker of the live
  // nodes has said it can (live/capable/<node>/<pid>) or is a joiner not ready yet, and one of
  // those that can has a place in `next`.
  bool canContinueLive(const StartWorkers& next) const override {
    if (!options_.liveStore)
      return false;
    bool anyCapable = false;
    for (const auto& [node, record] : runningWorkers()) {
      const NodeAssignment* place = placeOf(next, node);
      for (const auto& [local, pid] : record.workers) {
        if (capable(node, pid)) {
          anyCapable = anyCapable || (place != nullptr && local < place->localWorldSize);
        } else if (std::find(record.joiners.begin(), record.joiners.end(), pid) ==
                   record.joiners.end()) {
          spdlog::info(
              "controller: worker {} of node {} (pid {}) cannot continue live; restarting every "
              "worker",
              local, node, pid);
          return false;
        }
      }
    }
    return anyCapable;
  }

  // Keeps the workers that can continue and have a place in `action`, starts the missing ones
  // as joiners; when workers were lost the survivors first train alone in an interim generation
  // (as many as make a valid world size, chosen to keep every ZeRO partition), and the
  // generation `action` is published once every joiner is ready (pollLive). Survivors the new
  // generation leaves out that hold a partition copy no member holds (a node left out of a
  // smaller world, say) give it over as donors first, and are stopped once they have.
  bool continueLive(const StartWorkers& action) override {
    if (!canContinueLive(action))
      return false;
    const auto records = runningWorkers();
    Command c;
    c.kind = CommandKind::Live;
    c.start = action;
    c.masterAddr = masterAddrFor(action);
    c.reason = action.reason;
    std::vector<Member> survivors;
    std::int64_t joining = 0;
    for (const NodeAssignment& n : action.nodes) {
      std::vector<int> kept;
      if (const auto it = records.find(n.nodeId); it != records.end()) {
        for (const auto& [local, pid] : it->second.workers) {
          if (local < n.localWorldSize && capable(n.nodeId, pid))
            kept.push_back(local);
        }
      }
      std::sort(kept.begin(), kept.end());
      for (int local = 0; local < static_cast<int>(n.localWorldSize); ++local) {
        if (std::binary_search(kept.begin(), kept.end(), local))
          survivors.push_back({n.nodeId, local});
        else
          c.join[n.nodeId].push_back(local);
      }
      if (!kept.empty())
        c.keep[n.nodeId] = kept;
      joining += n.localWorldSize - static_cast<std::int64_t>(kept.size());
    }
    // Survivors without a place in `action` (past a node's share, or on a node it leaves out).
    std::vector<Member> leftOut;
    for (const auto& [node, record] : records) {
      const NodeAssignment* place = placeOf(action, node);
      for (const auto& [local, pid] : record.workers) {
        if (capable(node, pid) && (place == nullptr || local >= place->localWorldSize))
          leftOut.push_back({node, local});
      }
    }
    pendingTarget_.reset();
    donorRelease_.reset();
    running_ = action.generation;
    // Donors only where the workers keep ZeRO 1/2 partition copies (a ZeRO 0 rank holds the
    // whole state: the members need nothing from those left out).
    std::vector<Member> everyone;
    bool copies = false;
    for (const auto& [node, record] : records) {
      for (const auto& [local, pid] : record.workers)
        copies = copies || comm::keepsPartitionCopies(*options_.liveStore, node, pid);
    }
    if (copies) {
      everyone = survivors;
      everyone.insert(everyone.end(), leftOut.begin(), leftOut.end());
    }
    std::vector<Member> donors;
    std::uint64_t donorGeneration = 0;
    if (joining == 0) {
      const auto members = membersOf(action);
      donors = donorsOf(everyone, members, action);  // copies of the running group
      members_ = members;
      donorGeneration = ++liveGeneration_;
      publishLive(donorGeneration, action, members_, action.batch, donors);
      c.liveGeneration = liveGeneration_;
      c.signal = true;
    } else {
      if (!sameMembers(survivors, members_)) {
        // Workers were lost: the survivors go on alone while the joiners start.
        for (auto n = static_cast<std::int64_t>(survivors.size()); n >= 1; --n) {
          if (const auto batch = options_.batchFor(n)) {
            const auto interim = interimOf(survivors, action, static_cast<std::size_t>(n));
            donors = donorsOf(everyone, interim, action);
            donorGeneration = ++liveGeneration_;
            publishLive(donorGeneration, action, interim, *batch, donors);
            members_ = interim;
            c.signal = true;
            break;
          }
        }
      }
      pendingGeneration_ = ++liveGeneration_;
      pendingTarget_ = action;
      pendingJoiners_ = joining;
      pendingKeep_ = c.keep;
      c.liveGeneration = pendingGeneration_;
    }
    // Donors are kept until they gave their copies; those left out of `action` are stopped
    // then, by the same command without them (joiners kept: nothing is started again).
    Command sent = c;
    for (const Member& d : donors)
      addLocal(sent.keep, d);
    send(sent);
    const bool anyLeftOut = std::any_of(donors.begin(), donors.end(), [&](const Member& d) {
      return std::find(leftOut.begin(), leftOut.end(), d) != leftOut.end();
    });
    if (anyLeftOut) {
      Command release = c;
      release.signal = false;
      for (const auto& [node, locals] : c.join) {
        for (const int local : locals)
          addLocal(release.keep, {node, local});
      }
      release.join.clear();
      donorRelease_ = DonorRelease{donorGeneration, static_cast<std::int64_t>(donors.size()),
                                   std::move(release), options_.clock()};
    }
    return true;
  }

  // Publishes the pending generation once every joiner is ready, and signals the survivors;
  // stops the donors left out of the generation once they gave their copies (or after a minute,
  // should one never say so).
  void pollLive() {
    if (donorRelease_ &&
        (options_.liveStore->add(comm::live_keys::donated(donorRelease_->generation), 0) >=
             donorRelease_->donors ||
         options_.clock() - donorRelease_->since > std::chrono::seconds(60))) {
      const Command release = donorRelease_->command;
      donorRelease_.reset();
      send(release);
    }
    if (!pendingTarget_ ||
        options_.liveStore->add(comm::live_keys::ready(pendingGeneration_), 0) < pendingJoiners_)
      return;
    const std::vector<Member> all = membersOf(*pendingTarget_);
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

  struct Member {
    std::string node;
    int local = 0;
    bool operator==(const Member&) const = default;
  };

  static const NodeAssignment* placeOf(const StartWorkers& s, const std::string& node) {
    for (const NodeAssignment& n : s.nodes) {
      if (n.nodeId == node)
        return &n;
    }
    return nullptr;
  }

  // Every worker of `s`, in rank order.
  static std::vector<Member> membersOf(const StartWorkers& s) {
    std::vector<Member> out;
    for (const NodeAssignment& n : s.nodes) {
      for (int local = 0; local < static_cast<int>(n.localWorldSize); ++local)
        out.push_back({n.nodeId, local});
    }
    return out;
  }

  static void addLocal(std::map<std::string, std::vector<int>>& keep, const Member& m) {
    auto& locals = keep[m.node];
    if (std::find(locals.begin(), locals.end(), m.local) == locals.end())
      locals.insert(std::upper_bound(locals.begin(), locals.end(), m.local), m.local);
  }

  static bool sameMembers(std::vector<Member> a, std::vector<Member> b) {
    const auto less = [](const Member& x, const Member& y) {
      return std::tie(x.node, x.local) < std::tie(y.node, y.local);
    };
    std::sort(a.begin(), a.end(), less);
    std::sort(b.begin(), b.end(), less);
    return a == b;
  }

  std::string masterAddrFor(const StartWorkers& action) const {
    std::string addr = options_.masterAddr;
    if (addr.empty() && !action.nodes.empty()) {
      if (const NodeRecord* r = tracker_.record(action.nodes.front().nodeId))
        addr = r->address;
    }
    return addr.empty() ? "127.0.0.1" : addr;
  }

  bool capable(const std::string& node, std::int64_t pid) const {
    return options_.liveStore->check({comm::live_keys::capable(node, pid)});
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

  // Ids for comm::interimMembers / interimDonors: positions in members_ (the running group),
  // then the workers it does not hold, in the order met.
  struct Ids {
    std::vector<Member> known;
    std::vector<int> members;
    int of(const Member& m) {
      auto at = std::find(known.begin(), known.end(), m);
      if (at == known.end())
        at = known.insert(known.end(), m);
      return static_cast<int>(at - known.begin());
    }
    std::vector<int> of(const std::vector<Member>& list) {
      std::vector<int> out;
      for (const Member& m : list)
        out.push_back(of(m));
      return out;
    }
  };
  Ids idsOfRunningGroup() const {
    Ids ids{members_, {}};
    for (std::size_t i = 0; i < members_.size(); ++i)
      ids.members.push_back(static_cast<int>(i));
    return ids;
  }
  // The distance the running workers' copies were made at (their LOCAL_WORLD_SIZE).
  static int copyDistance(const StartWorkers& action) {
    return static_cast<int>(action.nodes.empty() ? 1 : action.nodes.front().localWorldSize);
  }
  // `list` in the order of `action`'s nodes (local ranks ascending), then any on other nodes.
  static std::vector<Member> inRankOrder(std::vector<Member> list, const StartWorkers& action) {
    const auto key = [&](const Member& m) {
      std::size_t node = action.nodes.size();
      for (std::size_t i = 0; i < action.nodes.size(); ++i) {
        if (action.nodes[i].nodeId == m.node)
          node = i;
      }
      return std::tuple(node, m.node, m.local);
    };
    std::sort(list.begin(), list.end(),
              [&](const Member& a, const Member& b) { return key(a) < key(b); });
    return list;
  }

  // `count` survivors for an interim generation, in `action`'s rank order: the first whose
  // partitions and copies hold every partition of the current group (comm::interimMembers).
  std::vector<Member> interimOf(const std::vector<Member>& survivors, const StartWorkers& action,
                                std::size_t count) const {
    Ids ids = idsOfRunningGroup();
    const auto survivorIds = ids.of(survivors);
    std::vector<Member> chosen;
    for (const int id : comm::interimMembers(ids.members, survivorIds, copyDistance(action), count))
      chosen.push_back(ids.known[static_cast<std::size_t>(id)]);
    return inRankOrder(chosen, action);
  }

  // The survivors outside `chosen` that must give the new generation their copies: the current
  // group's partitions that `chosen` do not hold (comm::interimDonors).
  std::vector<Member> donorsOf(const std::vector<Member>& survivors,
                               const std::vector<Member>& chosen,
                               const StartWorkers& action) const {
    Ids ids = idsOfRunningGroup();
    const auto survivorIds = ids.of(survivors);
    const auto chosenIds = ids.of(chosen);
    std::vector<Member> donors;
    for (const int id :
         comm::interimDonors(ids.members, survivorIds, chosenIds, copyDistance(action)))
      donors.push_back(ids.known[static_cast<std::size_t>(id)]);
    return inRankOrder(donors, action);
  }

  void publishLive(std::uint64_t generation, const StartWorkers& target,
                   const std::vector<Member>& members, const config::BatchTriple& batch,
                   const std::vector<Member>& donors = {}) {
    const auto pairs = [](const std::vector<Member>& list) {
      std::vector<std::pair<std::string, std::int64_t>> out;
      for (const Member& m : list)
        out.emplace_back(m.node, m.local);
      return out;
    };
    const comm::LiveGeneration record = comm::makeLiveGeneration(
        generation, target.generation, pairs(members), batch.trainBatchSize, batch.microBatchPerGpu,
        batch.gradientAccumulation, pairs(donors));
    comm::publishLiveGeneration(*options_.liveStore, record);
    spdlog::info(
        "controller: live generation {}: {} worker(s) on {} node(s), batch {} = micro {} x "
        "accumulation {} x {}{}",
        generation, members.size(), record.nodes.size(), batch.trainBatchSize,
        batch.microBatchPerGpu, batch.gradientAccumulation, members.size(),
        donors.empty() ? "" : fmt::format("; {} survivor(s) give it their copies", donors.size()));
  }

  std::vector<Member> members_;  // the running live group, in rank order
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
