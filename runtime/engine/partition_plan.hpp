#pragma once
// Where a ZeRO 1/2 job's state comes from after a failure (live recovery). Every rank keeps, in
// host memory, its own optimizer partition and a copy of its ward's (the rank whose buddy it
// is) at the last two steps it completed (Engine::copyPartitions); after a failure
// the ranks of the new group pool what they hold and every rank runs planPartitionRecovery on
// the same reports, so they agree without a further exchange. Pure logic (no LibTorch, no
// communication): tests/runtime/engine/partition_plan_test.cpp checks it against every history.
//
// The second line of defence: the agent decides whether the survivors hold every partition
// before it keeps them (agent::planLiveRecovery, with the same placement rule,
// live::liveBuddyDistance), so this plan failing means what the agent knew was out of date (a
// rank died during the transfer, a copy was never made); the engine then says so
// (PartitionsLostError) and withdraws its live capability, and the agent restarts from the
// checkpoint.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stretch::engine {

// One copy a rank holds: partition `partition` of a `world`-rank layout, as it was after step
// `step`, with `stateTensors` optimizer tensors beside the fp32 weights. `own`: the rank's own
// partition (it also holds the replicated state of that step: counters, scheduler, scaler,
// data position); otherwise a ward's copy.
struct HeldCopy {
  bool own = false;
  std::int64_t step = -1;
  std::int64_t world = 0;
  std::int64_t partition = -1;
  std::int64_t stateTensors = 0;
  std::int64_t slot = 0;  // which of the holder's buffers
};

// Fixed-size encoding for an all-gather: kHeldSlots copies per rank, kHeldFields values each.
inline constexpr int kHeldSlots = 4;
inline constexpr int kHeldFields = 6;
std::vector<std::int64_t> encodeHeld(const std::vector<HeldCopy>& copies);
// `all` is every rank's encodeHeld, rank after rank; returns each rank's copies.
std::vector<std::vector<HeldCopy>> decodeHeld(const std::vector<std::int64_t>& all, int ranks);

struct PartitionSource {
  int rank = -1;  // in the new group
  std::int64_t slot = 0;
  bool own = false;
};

struct PartitionPlan {
  std::int64_t step = -1;  // the completed step the job continues from
  std::int64_t world = 0;  // the layout the copies were taken in
  std::int64_t stateTensors = 0;
  std::vector<PartitionSource> partitions;  // one per partition of that layout
  PartitionSource replicated;               // an own copy of that step: counters, scheduler, ...
};

// The latest step at which every partition of one layout is held by some rank of the new group
// (its owner's copy first, else its buddy's; the lowest such rank), or nullopt when none is:
// a partition and all its copies died (the job falls back to its last checkpoint).
std::optional<PartitionPlan> planPartitionRecovery(
    const std::vector<std::vector<HeldCopy>>& heldByRank);

// "partition 2 (held by old ranks 2 and 3)" for the newest step any rank holds, each partition
// p's copy having been on old rank p + buddyDistance (mod the layout's size, 1 when a multiple
// of it): what the error says when planPartitionRecovery finds no plan.
std::string describeLostPartitions(const std::vector<std::vector<HeldCopy>>& heldByRank,
                                   int buddyDistance = 1);

}  // namespace stretch::engine
