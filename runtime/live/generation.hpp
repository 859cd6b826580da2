#pragma once
// Live recovery's store protocol (module runtime/live, namespace stretch::live): how an elastic
// agent tells the workers that keep running which group they now belong to, and how workers tell
// the agent what they can do. The engine's side (runtime/engine/live_recovery.hpp) and the
// launcher's (runtime/launcher) both speak it; which workers go on, in which world and with which
// donors is decided elsewhere, by runtime/agent/live_plan.hpp.
//
// A live generation is one group of workers, numbered by the agent from 1 up (0 is the group a
// launch starts, met through the usual rendezvous). It is the agent state machine's generation
// or, after a failure, an interim one: the survivors alone, training on while replacement
// workers start; the machine's generation follows once they are ready.
//
// Keys, in a store the agent serves (it outlives every worker, rank 0's included):
//   live/generation/<N>        the LiveGeneration record of live generation N (text);
//   live/latest                N of the newest record, set after the record itself;
//   live/capable/<NODE>/<PID>  (PID: the worker's workerProcessId(), the pid the agent spawned)
//                              set by a worker that speaks the protocol once it trains in a
//                              group with the job's state (the agent keeps such workers running
//                              through a failure, and restarts every worker otherwise): "copies"
//                              when it keeps ZeRO 1/2 partition copies (only such workers are
//                              worth naming donors), "1" otherwise;
//   live/ready/<N>             a counter: workers started into a running job add 1 when they are
//                              ready to join; the agent publishes generation N once all are;
//   live/pg/<N>/...            generation N's process-group rendezvous (a PrefixStore);
//   live/xfer/<N>/...          the rendezvous of generation N's transfer group, when it has
//                              donors (below);
//   live/donated/<N>           a counter: donors of generation N add 1 once they gave their
//                              copies (the agent then stops those the job has no place for);
//   live/finished              set by workers that trained the job's last step: workers still
//                              waiting for a generation (a replacement, a survivor left out of
//                              an interim one) have nothing left to do and end.
// A worker keeps its node and local rank across generations; a node's entry lists the local
// ranks taking part, and a worker's rank is the node's first rank plus its position in that list
// (LiveGeneration::rankOf). The record's batch is the elastic solver's for its world size.
//
// Donors: survivors left out of an interim generation whose ZeRO 1/2 partition copies the
// members need (no choice of members held every partition). They train no step; they join a
// transfer group with the members (members first, with their ranks, then the donors), take part
// in the state transfer (Engine::donatePartitions) and wait for the next generation. Without
// them, the job would fall back to its checkpoint although a survivor holds the copy.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/comm/store.hpp"

namespace stretch::live {

struct LiveNode {
  std::string nodeId;
  std::int64_t firstRank = 0;
  std::vector<std::int64_t> localRanks;  // ascending
  bool operator==(const LiveNode&) const = default;
};

struct LiveGeneration {
  std::uint64_t generation = 0;       // the live generation N
  std::uint64_t agentGeneration = 0;  // the state machine's generation it serves (for logs)
  std::int64_t worldSize = 0;
  // The batch triple the launcher planned for this generation (its --config), which every
  // worker checks against its own config's; all three 0 when the launcher has no config (the
  // workers' own configs decide: there is no placeholder to check against).
  std::int64_t trainBatchSize = 0;
  std::int64_t microBatch = 0;
  std::int64_t gradientAccumulation = 0;
  std::vector<LiveNode> nodes;  // by node rank
  // Survivors that only take part in the state transfer; their first ranks go on from
  // worldSize (ranks in the transfer group).
  std::vector<LiveNode> donors;
  bool operator==(const LiveGeneration&) const = default;

  // The rank of the worker with `localRank` on `nodeId`; -1 when it takes no part.
  std::int64_t rankOf(const std::string& nodeId, std::int64_t localRank) const;
  // Its rank in the transfer group (a member's rank, or a donor's from worldSize on); -1 when it
  // is neither.
  std::int64_t transferRankOf(const std::string& nodeId, std::int64_t localRank) const;
  // Members and donors.
  std::int64_t transferSize() const;
};

// The record of live generation `generation` (serving the state machine's `agentGeneration`)
// whose workers are `members`, (node id, local rank) in rank order, with the batch triple
// (train, micro, accumulation): its world size and each node's first rank follow from them.
// `donors` (node id, local rank), in rank order, become the record's donors.
LiveGeneration makeLiveGeneration(
    std::uint64_t generation, std::uint64_t agentGeneration,
    const std::vector<std::pair<std::string, std::int64_t>>& members, std::int64_t trainBatchSize,
    std::int64_t microBatch, std::int64_t gradientAccumulation,
    const std::vector<std::pair<std::string, std::int64_t>>& donors = {});

// A header line "N AGENT_GENERATION WORLD TRAIN MICRO GAS" (TRAIN MICRO GAS all positive, or
// all 0 for no batch), a line "NODE FIRST L0,L1,..." per node, and "donor NODE FIRST
// L0,L1,..." per node with donors.
std::string formatLiveGeneration(const LiveGeneration& generation);
// Throws comm::CommError naming the line when the text is not such a record (or a node id holds
// white space, which formatLiveGeneration refuses too).
LiveGeneration parseLiveGeneration(const std::string& text);

// The pid the agent knows this worker by, for its live/capable key: the id of its process group.
// The launcher starts every worker as the leader of a process group of its own (spawnProcess),
// and a wrapper between them (`sh -c 'python train.py; ...'`) keeps the group, so the program
// behind it still names the process the agent started (its own pid would not: the job would take
// the restart path after every failure). Equal to getpid() for a worker the agent runs directly.
std::int64_t workerProcessId();

namespace live_keys {
std::string generation(std::uint64_t n);
std::string capable(const std::string& nodeId, std::int64_t pid);
std::string ready(std::uint64_t n);
std::string groupPrefix(std::uint64_t n);
std::string transferPrefix(std::uint64_t n);
std::string donated(std::uint64_t n);
inline constexpr const char* kLatest = "live/latest";
inline constexpr const char* kFinished = "live/finished";
inline constexpr const char* kCapableWithCopies = "copies";
}  // namespace live_keys

// ZeRO 1/2 partition copies (Engine::enablePartitionCopies): rank r of a `world`-rank generation
// keeps its own partition and a copy of partition (r - d) mod world, where d is
// liveBuddyDistance(distance, world) and `distance` the worker's LOCAL_WORLD_SIZE (so that on
// several nodes the copy is on the next node). A distance that would make a rank its own buddy
// becomes 1.
int liveBuddyDistance(int distance, int world);

// What the worker `pid` of `nodeId` said through its live/capable key: nothing (no key), that it
// can continue live, or that it can and keeps ZeRO 1/2 partition copies (kCapableWithCopies).
// One key read per worker serves both questions the agent asks.
enum class LiveCapability { None, Capable, CapableWithCopies };
LiveCapability liveCapability(comm::Store& store, const std::string& nodeId, std::int64_t pid);

// Writes the record, then live/latest.
void publishLiveGeneration(comm::Store& store, const LiveGeneration& generation);
// The number in live/latest; 0 before the first record.
std::uint64_t latestLiveGeneration(comm::Store& store);

}  // namespace stretch::live
