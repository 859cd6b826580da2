// planPartitionRecovery (live recovery of ZeRO 1/2): which step a job continues from after a
// failure and where each partition comes from, for histories of copies cut short at any point
// (rapidcheck; the seed is printed), against what the copies guarantee: unless a rank and its
// buddy die together, every partition of the last or the second-to-last step survives.

#include "runtime/engine/partition_plan.hpp"

#include <algorithm>
#include <cstdint>
#include <random>
#include <rapidcheck.h>
#include <set>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "runtime/common/error.hpp"

namespace stretch::engine {
namespace {

// Rank r of a `world`-rank layout after completing step `k` with its copy exchange, its buddy
// `distance` ranks further.
std::vector<HeldCopy> settled(std::int64_t world, std::int64_t r, std::int64_t k,
                              std::int64_t distance = 1) {
  std::vector<HeldCopy> held;
  for (std::int64_t step = std::max<std::int64_t>(0, k - 1); step <= k; ++step) {
    held.push_back({true, step, world, r, 2, step % 2});
    held.push_back({false, step, world, (r + world - distance) % world, 2, step % 2});
  }
  return held;
}

TEST(PartitionPlan, EncodingRoundTrips) {
  const std::vector<HeldCopy> copies = {{true, 7, 4, 2, 2, 1}, {false, 6, 4, 1, 2, 0}};
  const auto one = encodeHeld(copies);
  ASSERT_EQ(one.size(), static_cast<std::size_t>(kHeldSlots * kHeldFields));
  std::vector<std::int64_t> two = one;
  const auto none = encodeHeld({});
  two.insert(two.end(), none.begin(), none.end());
  const auto decoded = decodeHeld(two, 2);
  ASSERT_EQ(decoded.size(), 2u);
  ASSERT_EQ(decoded[0].size(), 2u);
  EXPECT_TRUE(decoded[0][0].own);
  EXPECT_EQ(decoded[0][0].step, 7);
  EXPECT_EQ(decoded[0][1].partition, 1);
  EXPECT_EQ(decoded[0][1].slot, 0);
  EXPECT_TRUE(decoded[1].empty());
  EXPECT_THROW(decodeHeld(two, 3), InternalError);
  EXPECT_THROW(encodeHeld(std::vector<HeldCopy>(5)), InternalError);
}

TEST(PartitionPlan, ADeadRanksPartitionComesFromItsBuddy) {
  // 4 ranks after step 9; rank 2 died. New group: old ranks 3, 0, 1 and a joiner.
  const std::vector<std::vector<HeldCopy>> held = {
      settled(4, 3, 9), settled(4, 0, 9), settled(4, 1, 9), {}};
  const auto plan = planPartitionRecovery(held);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->step, 9);
  EXPECT_EQ(plan->world, 4);
  ASSERT_EQ(plan->partitions.size(), 4u);
  EXPECT_EQ(plan->partitions[0].rank, 1);  // old rank 0 is new rank 1
  EXPECT_TRUE(plan->partitions[0].own);
  EXPECT_EQ(plan->partitions[2].rank, 0);  // old rank 3 holds old rank 2's copy
  EXPECT_FALSE(plan->partitions[2].own);
  EXPECT_TRUE(plan->replicated.own);
  EXPECT_EQ(plan->replicated.rank, 0);
}

TEST(PartitionPlan, ARankDeadWithItsBuddyLosesItsPartition) {
  // Ranks 1 and 2 of 4 died: partition 1's copy was on rank 2.
  const std::vector<std::vector<HeldCopy>> held = {settled(4, 0, 5), settled(4, 3, 5)};
  EXPECT_FALSE(planPartitionRecovery(held).has_value());
  const std::string why = describeLostPartitions(held);
  EXPECT_NE(why.find("partition 1 (held by old ranks 1 and 2)"), std::string::npos) << why;
  EXPECT_EQ(why.find("partition 2"), std::string::npos) << why;
  EXPECT_NE(describeLostPartitions({{}, {}}).find("no rank holds"), std::string::npos);
  // Buddies a node (2 ranks) away: ranks 0 and 2 of 4 dying together lose partition 0.
  const std::vector<std::vector<HeldCopy>> nodes = {settled(4, 1, 5, 2), settled(4, 3, 5, 2)};
  EXPECT_FALSE(planPartitionRecovery(nodes).has_value());
  EXPECT_NE(describeLostPartitions(nodes, 2).find("partition 0 (held by old ranks 0 and 2)"),
            std::string::npos);
}

TEST(PartitionPlan, OnlyWardsCopiesOfAStepAreNotEnough) {
  // 2 ranks: rank 0 alive holds only a ward copy of step 4 (its own copy of 4 was not made):
  // the counters of step 4 are gone, step 3 is complete.
  std::vector<HeldCopy> held = {{true, 3, 2, 0, 2, 1}, {false, 3, 2, 1, 2, 1}};
  held.push_back({false, 4, 2, 1, 2, 0});
  held.push_back({true, 2, 2, 0, 2, 0});
  const auto plan = planPartitionRecovery({held});
  // Step 4 lacks partition 0 altogether; step 3 has both.
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->step, 3);
}

// A history: `world` ranks completed step k (copies of k - 1 and k, or only k when k is 0), then
// during step k + 1's copies each rank had made its own copy or not and received its ward's or
// not (only if the ward had made its own); then the ranks in `dead` died.
struct History {
  std::int64_t world = 2;
  std::int64_t distance = 1;  // from a rank to its buddy
  std::int64_t k = 0;
  std::vector<bool> ownDone;
  std::vector<bool> wardDone;
  std::vector<bool> dead;
  std::vector<std::int64_t> order;  // the survivors' new ranks (a permutation) and joiners
  int joiners = 0;
};

rc::Gen<History> histories() {
  return rc::gen::exec([] {
    History h;
    h.world = *rc::gen::inRange<std::int64_t>(2, 9);
    h.k = *rc::gen::inRange<std::int64_t>(0, 5);
    h.distance = *rc::gen::inRange<std::int64_t>(1, h.world);
    const auto w = static_cast<std::size_t>(h.world);
    const auto d = static_cast<std::size_t>(h.distance);
    h.ownDone = *rc::gen::container<std::vector<bool>>(w, rc::gen::arbitrary<bool>());
    h.wardDone = *rc::gen::container<std::vector<bool>>(w, rc::gen::arbitrary<bool>());
    for (std::size_t r = 0; r < w; ++r)
      h.wardDone[r] = h.wardDone[r] && h.ownDone[(r + w - d) % w];
    h.dead = *rc::gen::container<std::vector<bool>>(w, rc::gen::arbitrary<bool>());
    h.dead[static_cast<std::size_t>(*rc::gen::inRange<std::int64_t>(0, h.world))] = false;
    h.joiners = *rc::gen::inRange(0, 3);
    return h;
  });
}

RC_GTEST_PROP(PartitionPlanProperty,
              EveryPartitionOfTheLatestCompleteStepUnlessARankDiedWithItsBuddy, ()) {
  const History h = *histories();
  const std::int64_t w = h.world;
  const auto u = [](std::int64_t i) { return static_cast<std::size_t>(i); };
  // What each survivor holds; its place in the new group is shuffled, joiners hold nothing.
  std::vector<std::vector<HeldCopy>> held;
  std::vector<std::int64_t> oldRankOf;
  for (std::int64_t r = 0; r < w; ++r) {
    if (h.dead[u(r)])
      continue;
    const auto copies = settled(w, r, h.k, h.distance);  // at step 0, only that step's
    // Step k + 1's copies go into the slot of step k - 1.
    const std::int64_t slot = (h.k + 1) % 2;
    std::vector<HeldCopy> kept;
    for (const auto& c : copies) {
      const bool replaced =
          c.slot == slot && ((c.own && h.ownDone[u(r)]) || (!c.own && h.wardDone[u(r)]));
      if (!replaced && c.step >= 0)
        kept.push_back(c);
    }
    if (h.ownDone[u(r)])
      kept.push_back({true, h.k + 1, w, r, 2, slot});
    if (h.wardDone[u(r)])
      kept.push_back({false, h.k + 1, w, (r + w - h.distance) % w, 2, slot});
    held.push_back(kept);
    oldRankOf.push_back(r);
  }
  std::vector<std::size_t> order(held.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::mt19937 shuffler(*rc::gen::arbitrary<std::uint32_t>());
  std::shuffle(order.begin(), order.end(), shuffler);
  std::vector<std::vector<HeldCopy>> group;
  std::vector<std::int64_t> oldRankInGroup;
  for (const auto i : order) {
    group.push_back(held[i]);
    oldRankInGroup.push_back(oldRankOf[i]);
  }
  for (int j = 0; j < h.joiners; ++j) {
    group.push_back({});
    oldRankInGroup.push_back(-1);
  }
  // Encoding for the all-gather loses nothing.
  std::vector<std::int64_t> pooled;
  for (const auto& copies : group) {
    const auto e = encodeHeld(copies);
    pooled.insert(pooled.end(), e.begin(), e.end());
  }
  const auto decoded = decodeHeld(pooled, static_cast<int>(group.size()));
  const auto plan = planPartitionRecovery(decoded);

  bool adjacentDead = false;
  for (std::int64_t r = 0; r < w; ++r)
    adjacentDead = adjacentDead || (h.dead[u(r)] && h.dead[u((r + h.distance) % w)]);
  // Partition p of step k + 1 survives when its owner made its copy and lives, or its buddy
  // received it and lives.
  bool nextComplete = true;
  for (std::int64_t p = 0; p < w; ++p) {
    const std::int64_t buddy = (p + h.distance) % w;
    nextComplete = nextComplete && ((!h.dead[u(p)] && h.ownDone[u(p)]) ||
                                    (!h.dead[u(buddy)] && h.wardDone[u(buddy)]));
  }
  bool anyOwnNext = false;
  for (std::int64_t r = 0; r < w; ++r)
    anyOwnNext = anyOwnNext || (!h.dead[u(r)] && h.ownDone[u(r)]);

  // Step k survives unless a rank died with its buddy (then step k + 1 cannot survive either).
  RC_ASSERT(plan.has_value() == !adjacentDead);
  if (!plan)
    return;
  RC_ASSERT(plan->world == w);
  RC_ASSERT(plan->step == ((nextComplete && anyOwnNext) ? h.k + 1 : h.k));
  // Every source holds what it is named for, and the replicated state is an owner's.
  RC_ASSERT(plan->partitions.size() == u(w));
  for (std::int64_t p = 0; p < w; ++p) {
    const auto& s = plan->partitions[u(p)];
    RC_ASSERT(s.rank >= 0 && s.rank < static_cast<int>(group.size()));
    const std::int64_t holder = oldRankInGroup[u(s.rank)];
    RC_ASSERT(holder == (s.own ? p : (p + h.distance) % w));
    const bool found =
        std::any_of(decoded[u(s.rank)].begin(), decoded[u(s.rank)].end(), [&](const HeldCopy& c) {
          return c.own == s.own && c.slot == s.slot && c.step == plan->step && c.partition == p;
        });
    RC_ASSERT(found);
  }
  RC_ASSERT(plan->replicated.own);
}

}  // namespace
}  // namespace stretch::engine
