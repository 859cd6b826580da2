#pragma once
// Live recovery's decision, in one place: after a failure (or a scale event) the agent's state
// machine asks for the next generation; whether the workers still running carry the job's state
// into it, or every worker restarts from the checkpoint, and if they go on, who stays, who joins,
// in which interim world and with which batch, and which survivors left out give their ZeRO 1/2
// partition copies (donors), is decided here, by pure functions. The launcher's worker groups
// (NodeWorkers on one host, RemoteWorkers across hosts) only carry a LivePlan out through the
// store protocol (runtime/live/generation.hpp). The launcher's agent loop and the simulator reach
// this decision only through AgentDriver (runtime/agent/driver.hpp), each with its worker group's
// LiveSituation, so a failure set decides the same way in both
// (tests/sim/driver_agreement_property_test.cpp).
//
// The partition layout both sides assume (the engine places its copies so,
// Engine::enablePartitionCopies): in a group of W ranks, rank r holds ZeRO partition r and a copy
// of partition (r - d) mod W, d = live::liveBuddyDistance(copy distance, W). A partition is lost
// when its owner and the rank holding its copy are both gone.
//
// No I/O, no clock; deterministic in its inputs. Thread-safe (no shared state).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/agent/state_machine.hpp"
#include "runtime/config/batch.hpp"
#include "runtime/elasticity/world_size_rules.hpp"

namespace stretch::agent {

// What a failure took from the group that trained the last completed step.
struct GroupLoss {
  std::int64_t world = 0;          // ranks in that group
  std::vector<std::int64_t> lost;  // its ranks that are gone (any order; duplicates allowed)
  std::int64_t copyDistance = 1;   // the workers' LOCAL_WORLD_SIZE (liveBuddyDistance applies)
  bool partitionCopies = false;    // ZeRO 1/2 workers keeping one copy of a peer's partition
};

// Why the survivors cannot carry the job's state on, or nullopt when they can: every rank of the
// group is gone, or (with partition copies) some partition lost its owner and its copy
// ("ZeRO partition 1 was lost with its copy (ranks 1 and 2)"). O(lost log lost).
std::optional<std::string> whyStateIsLost(GroupLoss loss);

// A worker by its place in the job.
struct WorkerPlace {
  std::string nodeId;
  std::int64_t localRank = 0;
  auto operator<=>(const WorkerPlace&) const = default;
};

// A worker process running when the decision is taken.
struct RunningWorker {
  WorkerPlace place;
  std::int64_t pid = 0;  // for messages
  bool capable = false;  // it said it can continue live (live/capable)
  bool joiner = false;   // started into the running job and not ready yet: started again
  bool operator==(const RunningWorker&) const = default;
};

// What the launcher knows when the state machine asks for the next generation.
struct LiveSituation {
  // The live group that trained the last completed step, in rank order.
  std::vector<WorkerPlace> group;
  std::vector<RunningWorker> running;
  bool partitionCopies = false;  // the workers keep ZeRO 1/2 partition copies
  // The workers' LOCAL_WORLD_SIZE, the distance their copies were placed at.
  std::int64_t copyDistance = 1;
};

// A live generation to publish: its members in rank order, their batch, and the donors (also in
// rank order) that give the members the partitions only they hold.
struct LiveMembers {
  std::vector<WorkerPlace> members;
  config::BatchTriple batch;
  std::vector<WorkerPlace> donors;
  bool operator==(const LiveMembers&) const = default;
};

struct LivePlan {
  // The running workers carry the state on; false: stop every worker and start the next
  // generation from the checkpoint.
  bool live = false;
  // Why not (live false), or what happens (live true), for the agent's log.
  std::string reason;
  // Running workers that have a place in the next generation and stay, by node (local ranks
  // ascending), and the next generation's places that start a new worker (a joiner).
  std::map<std::string, std::vector<std::int64_t>> keep;
  std::map<std::string, std::vector<std::int64_t>> join;
  // Running workers stopped now: neither kept nor donors (joiners not ready are started again).
  std::vector<WorkerPlace> stop;
  // Donors without a place in the next generation: stopped once they gave their copies.
  std::vector<WorkerPlace> releaseAfterDonating;
  // The live generation published at once: the next generation itself when nobody joins, or an
  // interim one (survivors training alone, a valid world of them) while joiners start; nullopt
  // when no interim world is valid (the survivors wait for the joiners).
  std::optional<LiveMembers> publish;
  // The next generation is published once every joiner is ready (join is not empty).
  bool awaitJoiners = false;
  // With awaitJoiners and no `publish`: the group that trained the last completed step lost
  // nobody, so it trains on in its own generation while the joiners start (a scale-up); false
  // there: no interim world is valid and the survivors wait.
  bool groupTrainsOn = false;
  bool operator==(const LivePlan&) const = default;
};

// The decision for `next` (the StartWorkers the state machine returned after its StopWorkers),
// given what runs and what the group held. Live needs every running worker to be capable or a
// joiner, a capable one with a place in `next`, and the state held (whyStateIsLost on the
// group's ranks without a capable running worker). Donors only with partition copies. `rules`
// give the interim world's batch (the largest valid count of survivors).
LivePlan planLiveRecovery(const LiveSituation& situation, const StartWorkers& next,
                          const elasticity::WorldSizeRules& rules);

// Every worker of `start` in rank order.
std::vector<WorkerPlace> placesOf(const StartWorkers& start);

// ---- The membership policy, on ids (positions in the caller's numbering) ------------------

// The `count` survivors that train in an interim generation (a failure left more survivors than
// the largest valid world size): the first, in rank order, whose own partitions and copies
// together hold every partition of the generation that lost workers, so that no survivor left
// out takes a partition's last copy with it; the first `count` survivors when no choice does.
// `members` are that generation's workers in rank order, `survivors` those still alive (ids as
// in `members`, any order), `distance` as for liveBuddyDistance. Returns ids in rank order
// (survivors that are not members last, in the order given). O(members + survivors) for the
// first choice, then O(picks changed) for each further one.
std::vector<int> interimMembers(const std::vector<int>& members, std::vector<int> survivors,
                                int distance, std::size_t count);

// The donors of an interim generation whose members are `chosen` (interimMembers): survivors
// not chosen that hold a partition (own or copy) no member holds, few of them (a greedy cover,
// partition by partition), in rank order; empty when the members hold every partition. Ids and
// `distance` as for interimMembers.
std::vector<int> interimDonors(const std::vector<int>& members, const std::vector<int>& survivors,
                               const std::vector<int>& chosen, int distance);

}  // namespace stretch::agent
