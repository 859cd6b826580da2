#pragma once
// NodeTracker: the job controller's view of the node agents of a multi-node job, read from the
// job's store (keys and records: job_protocol.hpp): registrations, departures and keep-alive
// counters become the state machine's NodeJoined, NodeLeft and KeepAliveLost events (every node
// lost in one poll in one event, so that they cost one restart). Used by
// runJobController (job_controller.hpp) and by RemoteWorkers (remote_workers.hpp), which asks it
// which agents are alive and marks those that do not answer a command as lost. Not thread-safe.
//
// What it costs the store: the registration and departure lists are read only when the caller
// says they changed (runJobController's RecordWatches); the keep-alives of every node, one request
// per check interval (Store::tryMultiGet of the hb/<group> counters of kKeepAliveGroup nodes each,
// job_protocol.hpp).

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/agent/clock.hpp"
#include "runtime/agent/state_machine.hpp"
#include "runtime/comm/store.hpp"
#include "runtime/launcher/job_protocol.hpp"

namespace stretch::launcher {

// The controller's view of the registered node agents.
class NodeTracker {
 public:
  // launchHosts: the hosts the launcher started agents on, in hostfile order. Their
  // registrations are held (up to `window`) until every one of them has registered or is known
  // to be gone, then announced in that order, so node ranks follow the hostfile (and MASTER_ADDR
  // is the first host's) whatever order the agents come up in.
  // checkInterval: a node's keep-alive group is read at most this often (at most
  // keepAliveTimeout / 4), by poll and silent alike.
  NodeTracker(comm::Store& store, agent::Duration keepAliveTimeout,
              std::vector<std::string> launchHosts, agent::Duration window,
              agent::Duration checkInterval = std::chrono::seconds(1));

  agent::Duration checkInterval() const noexcept { return checkInterval_; }

  // New registrations and departures since the last call (read from the store only with
  // readLists), then the nodes the caller marked lost and (withKeepAlives) the silent nodes, all
  // in one KeepAliveLost event. Exits read
  // before this call that a departure explains are applied after it (see job_protocol.hpp,
  // "Order").
  std::vector<agent::Event> poll(agent::Time now, bool withKeepAlives, bool readLists = true);

  // Reads the keep-alive groups (those not read within checkInterval); true when the node's field
  // has not moved for keepAliveTimeout.
  bool silent(const std::string& id, agent::Time now);

  // Where the reads of the registration and departure lists stand (for RecordWatch).
  std::int64_t nextRegistration() const noexcept { return nextRecord_; }
  std::int64_t nextDeparture() const noexcept { return nextLeave_; }

  // The registration slot (index of its nodes/<i> record) of a registered node; -1 if none.
  std::int64_t slot(const std::string& id) const;

  void markLost(const std::string& id);

  // The registered agents neither gone nor marked lost, sorted by id.
  std::vector<std::string> alive() const;

  const NodeRecord* record(const std::string& id) const;

 private:
  struct Node {
    NodeRecord record;
    bool alive = false;
    std::int64_t slot = -1;  // index of its registration record: its keep-alive field
    agent::Time lastChange{0};
  };
  // A keep-alive group (hb/<group>): the value last read.
  struct Group {
    std::optional<std::int64_t> value;
  };

  bool silent(Node& node, agent::Time now);
  // Unless they were read within checkInterval: reads every keep-alive group of a live node with
  // one request (Store::tryMultiGet) and renews the nodes whose field moved. Cheap between reads
  // (RemoteWorkers asks silent() of each node it waits for).
  void readGroups(agent::Time now);
  void applyGroup(std::int64_t group, std::int64_t value, agent::Time now);

  // A controller that did not look for a while (the launcher stopped by SIGSTOP, a slow
  // checkpoint read) cannot tell a silent node from its own absence: every node's keep-alive
  // clock starts again at `now` when the last look is more than half a keep-alive timeout ago.
  void noticeStall(agent::Time now);

  bool isHeld(const std::string& id) const;

  // Announces the held registrations in hostfile order once every launched host registered or
  // is gone, or the window has passed.
  void maybeRelease(agent::Time now, std::vector<agent::Event>& out);

  comm::Store& store_;
  agent::Duration keepAliveTimeout_;
  std::vector<std::string> launchHosts_;
  agent::Duration window_;
  agent::Duration checkInterval_;
  bool holding_ = false;
  std::optional<agent::Time> holdSince_;
  std::vector<std::string> held_;
  std::set<std::string> gone_;
  std::int64_t nextRecord_ = 0;
  std::int64_t nextLeave_ = 0;
  std::map<std::string, Node> nodes_;
  std::map<std::int64_t, std::string> slots_;  // slot -> node id, for the current registrations
  std::map<std::int64_t, Group> groups_;
  std::optional<agent::Time> lastRead_;  // of the keep-alive groups (readGroups)
  std::set<std::string> pendingLost_;
  std::optional<agent::Time> lastLook_;
};

}  // namespace stretch::launcher
