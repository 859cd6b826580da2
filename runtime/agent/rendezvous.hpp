#pragma once
// StoreRendezvous: how the agents of a job (one per node) agree, through a comm::Store, on which
// nodes form each generation - torchelastic's c10d rendezvous, reduced to Store operations
// (set, get, add, compareSet, check, wait) so it runs over HashStore (threads in tests), TcpStore
// (real jobs) or any other Store.
//
// Protocol (keys under options.prefix):
//  - Round g of the rendezvous produces generation g. Round 1 is open from the start; round g+1
//    opens when a member of generation g joins again (it restarts: a failure or a scale up), or,
//    with orphanTimeout set, when every member of generation g has been silent that long.
//  - join(nodeId, slots) registers the node in the open round and returns when the round closes:
//    when max_nodes have registered, or when min_nodes have and the last-call window has passed
//    since min_nodes was first seen. The first agent to see the round complete writes the
//    membership with compareSet, so every agent reads the same one: nodes in registration order
//    (duplicates dropped), node rank = position, at most max_nodes. A node registered too late
//    for it moves on to the next round.
//  - A node that joins while a generation runs (its round is closed and the next not open) puts
//    itself on the next round's wait list and blocks until a member opens the round.
//    waitingNodes() shows the running agents who is waiting; they decide when to re-join.
//  - heartbeat(now) writes the node's timestamp; deadNodes(now, timeout) lists members of the
//    latest generation whose timestamp is older than timeout (or who left()).
//  - Time: join() reads the injected Clock (for its timeout, the last call and the min_nodes
//    timestamp); heartbeat and deadNodes take the time as an argument. With a fake clock tests
//    decide when windows pass. Agents on several hosts need synchronised clocks (systemClock).
//  - join() polls the store every pollInterval (real sleeps) and throws RendezvousTimeoutError
//    after joinTimeout, saying what it waited for. An object is used by one agent (one thread);
//    any number of objects may share the store.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/agent/clock.hpp"
#include "runtime/comm/store.hpp"
#include "runtime/common/error.hpp"

namespace stretch::agent {

// The rendezvous failed (bad node id, malformed store contents).
STRETCH_DECLARE_ERROR(RendezvousError, Error);
// join() did not complete within its timeout.
STRETCH_DECLARE_ERROR(RendezvousTimeoutError, RendezvousError);

struct RendezvousOptions {
  std::int64_t minNodes = 1;
  std::int64_t maxNodes = 1;
  // After min_nodes have registered, how long a round stays open for more (torchelastic: 30 s).
  Duration lastCall = std::chrono::seconds(30);
  // join() gives up after this (torchelastic's join timeout: 600 s).
  Duration joinTimeout = std::chrono::seconds(600);
  // When set, a waiting node may open the next round itself once every member of the latest
  // generation has sent no heartbeat for this long (the whole job died).
  std::optional<Duration> orphanTimeout;
  // Real time between two looks at the store while join() waits.
  std::chrono::milliseconds pollInterval{50};
  // Every key lives under "<prefix>/"; one prefix per job (and per run id).
  std::string prefix = "stretch/rdzv";
};

// Throws ConfigError naming the field ("rendezvous.max_nodes = 0: expected ...").
void validate(const RendezvousOptions& options);

struct RendezvousNode {
  std::string nodeId;
  std::int64_t slots = 0;
  bool operator==(const RendezvousNode&) const = default;
};

struct MemberNode {
  std::string nodeId;
  std::int64_t nodeRank = 0;
  std::int64_t slots = 0;
  bool operator==(const MemberNode&) const = default;
};

// The agreed membership of one generation; identical on every agent.
struct Membership {
  std::uint64_t generation = 0;
  std::vector<MemberNode> nodes;  // by node rank

  const MemberNode* find(std::string_view nodeId) const;
  std::int64_t totalSlots() const;
  bool operator==(const Membership&) const = default;
};

class StoreRendezvous {
 public:
  StoreRendezvous(std::shared_ptr<comm::Store> store, RendezvousOptions options,
                  Clock clock = systemClock());

  // Joins the next generation as nodeId with `slots` GPUs and blocks until its membership is
  // agreed (see the protocol above). A member of the latest generation calling it again opens
  // the next round. nodeId: non-empty, no whitespace. Throws RendezvousError for a bad id or
  // slots < 1, RendezvousTimeoutError after joinTimeout.
  Membership join(const std::string& nodeId, std::int64_t slots);

  // Writes this node's keep-alive timestamp (after join(); join writes the first one).
  void heartbeat(Time now);
  // Marks this node as gone for deadNodes() (a clean exit).
  void leave();
  // Members of the latest generation whose heartbeat is older than `timeout` at `now`, or who
  // left; in node-rank order.
  std::vector<std::string> deadNodes(Time now, Duration timeout);
  // Nodes that asked to join the next generation: on its wait list or registered in its round.
  // A member of the latest generation among them has re-joined: it is restarting, and the other
  // members should join too.
  std::vector<RendezvousNode> waitingNodes();

  // The agreed membership of a generation; nullopt while its round is not closed.
  std::optional<Membership> membership(std::uint64_t generation);
  // The newest generation whose membership is agreed; 0 before the first.
  std::uint64_t latestGeneration();

  const std::string& nodeId() const noexcept { return nodeId_; }
  const RendezvousOptions& options() const noexcept { return options_; }

 private:
  std::string key(std::uint64_t generation, std::string_view leaf) const;
  std::optional<std::string> read(const std::string& key);
  bool mayOpen(std::uint64_t generation, Time now);
  void close(std::uint64_t generation, std::int64_t registered);
  std::vector<RendezvousNode> records(std::uint64_t generation, std::string_view list,
                                      std::int64_t count);
  [[noreturn]] void timeout(std::uint64_t generation, bool registered, Time began);

  std::shared_ptr<comm::Store> store_;
  RendezvousOptions options_;
  Clock clock_;
  std::string nodeId_;
  std::int64_t slots_ = 0;
};

}  // namespace stretch::agent
