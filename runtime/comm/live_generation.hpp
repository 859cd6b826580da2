#pragma once
// Live recovery's store protocol: how an elastic agent tells the workers that keep running which
// group they now belong to, and how workers tell the agent what they can do.
//
// A live generation is one group of workers, numbered by the agent from 1 up (0 is the group a
// launch starts, met through the usual rendezvous). It is the agent state machine's generation
// or, after a failure, an interim one: the survivors alone, training on while replacement
// workers start; the machine's generation follows once they are ready.
//
// Keys, in a store the agent serves (it outlives every worker, rank 0's included):
//   live/generation/<N>        the LiveGeneration record of live generation N (text);
//   live/latest                N of the newest record, set after the record itself;
//   live/capable/<NODE>/<PID>  set by a worker that speaks the protocol once it trains in a
//                              group with the job's state (the agent keeps such workers running
//                              through a failure, and restarts every worker otherwise);
//   live/ready/<N>             a counter: workers started into a running job add 1 when they are
//                              ready to join; the agent publishes generation N once all are;
//   live/pg/<N>/...            generation N's process-group rendezvous (a PrefixStore);
//   live/finished              set by workers that trained the job's last step: workers still
//                              waiting for a generation (a replacement, a survivor left out of
//                              an interim one) have nothing left to do and end.
// A worker keeps its node and local rank across generations; a node's entry lists the local
// ranks taking part, and a worker's rank is the node's first rank plus its position in that list
// (LiveGeneration::rankOf). The record's batch is the elastic solver's for its world size.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/comm/store.hpp"

namespace stretch::comm {

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
  std::int64_t trainBatchSize = 0;
  std::int64_t microBatch = 0;
  std::int64_t gradientAccumulation = 0;
  std::vector<LiveNode> nodes;  // by node rank
  bool operator==(const LiveGeneration&) const = default;

  // The rank of the worker with `localRank` on `nodeId`; -1 when it takes no part.
  std::int64_t rankOf(const std::string& nodeId, std::int64_t localRank) const;
};

// The record of live generation `generation` (serving the state machine's `agentGeneration`)
// whose workers are `members`, (node id, local rank) in rank order, with the batch triple
// (train, micro, accumulation): its world size and each node's first rank follow from them.
LiveGeneration makeLiveGeneration(std::uint64_t generation, std::uint64_t agentGeneration,
                                  const std::vector<std::pair<std::string, std::int64_t>>& members,
                                  std::int64_t trainBatchSize, std::int64_t microBatch,
                                  std::int64_t gradientAccumulation);

// A header line "N AGENT_GENERATION WORLD TRAIN MICRO GAS" and a line "NODE FIRST L0,L1,..." per
// node.
std::string formatLiveGeneration(const LiveGeneration& generation);
// Throws CommError naming the line when the text is not such a record (or a node id holds white
// space, which formatLiveGeneration refuses too).
LiveGeneration parseLiveGeneration(const std::string& text);

namespace live_keys {
std::string generation(std::uint64_t n);
std::string capable(const std::string& nodeId, std::int64_t pid);
std::string ready(std::uint64_t n);
std::string groupPrefix(std::uint64_t n);
inline constexpr const char* kLatest = "live/latest";
inline constexpr const char* kFinished = "live/finished";
}  // namespace live_keys

// ZeRO 1/2 partition copies (Engine::enablePartitionCopies): rank r of a `world`-rank generation
// keeps its own partition and a copy of partition (r - d) mod world, where d is
// liveBuddyDistance(distance, world) and `distance` the worker's LOCAL_WORLD_SIZE (so that on
// several nodes the copy is on the next node). A distance that would make a rank its own buddy
// becomes 1.
int liveBuddyDistance(int distance, int world);

// The `count` survivors that train in an interim generation (a failure left more survivors than
// the largest valid world size): the first, in rank order, whose own partitions and copies
// together hold every partition of the generation that lost workers, so that no survivor left
// out takes a partition's last copy with it; the first `count` survivors when no choice does.
// `members` are that generation's workers in rank order, `survivors` those still alive (ids as
// in `members`, any order), `distance` as for liveBuddyDistance. Returns ids in rank order.
std::vector<int> interimMembers(const std::vector<int>& members, std::vector<int> survivors,
                                int distance, std::size_t count);

// Writes the record, then live/latest.
void publishLiveGeneration(Store& store, const LiveGeneration& generation);
// The number in live/latest; 0 before the first record.
std::uint64_t latestLiveGeneration(Store& store);

}  // namespace stretch::comm
