// interimMembers (runtime/agent/live_plan.hpp) against a brute force over every subset: it
// returns `count` survivors in rank order, and ones that hold every partition whenever any
// choice does; interimDonors adds survivors left out until every partition a survivor holds is
// held.

#include <algorithm>
#include <cstdint>
#include <rapidcheck.h>
#include <vector>

#include <fmt/format.h>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "runtime/agent/live_plan.hpp"
#include "runtime/config/ds_config.hpp"
#include "runtime/live/generation.hpp"

namespace stretch::agent {
namespace {

// Every partition p of a `world`-rank layout has its owner p or its buddy p + d among `ranks`.
bool holdsEveryPartition(std::uint32_t ranks, int world, int d) {
  for (int p = 0; p < world; ++p) {
    if ((ranks >> p & 1U) == 0 && (ranks >> ((p + d) % world) & 1U) == 0)
      return false;
  }
  return true;
}

RC_GTEST_PROP(InterimMembers, HoldEveryPartitionWheneverAnyChoiceDoes, ()) {
  const int world = *rc::gen::inRange(1, 9);
  const int distance = *rc::gen::inRange(1, 10);
  // Members: distinct ids in rank order (local ranks of a node, not necessarily 0..world-1).
  std::vector<int> members =
      *rc::gen::unique<std::vector<int>>(static_cast<std::size_t>(world), rc::gen::inRange(0, 32));
  std::uint32_t alive = *rc::gen::inRange<std::uint32_t>(0, 1U << world);
  std::vector<int> survivors;
  for (int r = 0; r < world; ++r) {
    if (alive >> r & 1U)
      survivors.push_back(members[static_cast<std::size_t>(r)]);
  }
  const auto count = *rc::gen::inRange<std::size_t>(0, survivors.size() + 1);
  auto shuffled = survivors;
  std::reverse(shuffled.begin(), shuffled.end());

  const auto chosen = interimMembers(members, shuffled, distance, count);
  RC_ASSERT(chosen.size() == count);
  std::uint32_t chosenRanks = 0;
  int lastRank = -1;
  for (const int id : chosen) {
    const auto rank =
        static_cast<int>(std::find(members.begin(), members.end(), id) - members.begin());
    RC_ASSERT(rank < world);
    RC_ASSERT((alive >> rank & 1U) != 0);  // a survivor
    RC_ASSERT(rank > lastRank);            // in rank order, once each
    lastRank = rank;
    chosenRanks |= 1U << rank;
  }
  const int d = live::liveBuddyDistance(distance, world);
  bool anyHolds = false;
  for (std::uint32_t subset = 0; subset < (1U << world); ++subset) {
    if ((subset & ~alive) == 0 && static_cast<std::size_t>(__builtin_popcount(subset)) == count &&
        holdsEveryPartition(subset, world, d))
      anyHolds = true;
  }
  if (anyHolds)
    RC_ASSERT(holdsEveryPartition(chosenRanks, world, d));

  // Donors: survivors not chosen, in rank order; with them every partition some survivor holds
  // is held, and there are none when the members hold every partition.
  const auto donors = interimDonors(members, shuffled, chosen, distance);
  std::uint32_t withDonors = chosenRanks;
  lastRank = -1;
  for (const int id : donors) {
    const auto rank =
        static_cast<int>(std::find(members.begin(), members.end(), id) - members.begin());
    RC_ASSERT(rank < world);
    RC_ASSERT((alive >> rank & 1U) != 0);
    RC_ASSERT((chosenRanks >> rank & 1U) == 0);
    RC_ASSERT(rank > lastRank);
    lastRank = rank;
    withDonors |= 1U << rank;
  }
  if (holdsEveryPartition(chosenRanks, world, d))
    RC_ASSERT(donors.empty());
  for (int p = 0; p < world; ++p) {
    const auto held = [&](std::uint32_t ranks) {
      return (ranks >> p & 1U) != 0 || (ranks >> ((p + d) % world) & 1U) != 0;
    };
    if (held(alive))
      RC_ASSERT(held(withDonors));
  }
}

// planLiveRecovery on one node whose workers all speak the protocol: live exactly when some
// survive and they hold the state (whyStateIsLost, the rule the simulator applies to the same
// failure set); then the survivors stay, the dead are replaced, the interim world is the largest
// valid count of survivors with its batch, members and donors hold every partition, and there
// are donors only with partition copies.
RC_GTEST_PROP(LivePlan, LiveExactlyWhenTheSurvivorsHoldTheState, ()) {
  const bool everySize = *rc::gen::arbitrary<bool>();
  // Valid sizes 1..8 (final batch 840), or 1, 2, 3 and 6 (max_train_batch_size 8: the solver's
  // final batch is 6); micro batch 1. The failed generation's world is one of them.
  const elasticity::WorldSizeRules rules(config::parseConfig(fmt::format(R"({{"elasticity": {{
        "enabled": true, "max_train_batch_size": {}, "micro_batch_sizes": [1], "min_gpus": 1,
        "max_gpus": 8, "version": 0.1}}}})",
                                                                         everySize ? 840 : 8))
                                             .config);
  const int world = static_cast<int>(*rc::gen::elementOf(rules.validGpuCounts()));
  RC_ASSERT(rules.validGpuCounts().size() == (everySize ? 8u : 4u));
  const std::uint32_t alive = *rc::gen::inRange<std::uint32_t>(0, 1U << world);
  const bool copies = *rc::gen::arbitrary<bool>();
  LiveSituation s;
  GroupLoss loss{world, {}, world, copies};
  std::vector<std::int64_t> survivors;
  for (int r = 0; r < world; ++r) {
    s.group.push_back({"n0", r});
    if (alive >> r & 1U) {
      s.running.push_back({{"n0", r}, 100 + r, true, false});
      survivors.push_back(r);
    } else {
      loss.lost.push_back(r);
    }
  }
  s.partitionCopies = copies;
  s.copyDistance = world;
  StartWorkers next;
  next.generation = 2;
  next.nodes = NodeSequence::fromAssignments({{"n0", 0, 0, world, world}});
  next.worldSize = world;
  next.dataParallelSize = world;
  next.batch = *rules.batchFor(world);

  const LivePlan plan = planLiveRecovery(s, next, rules);
  RC_ASSERT(plan.live == (!survivors.empty() && !whyStateIsLost(loss)));
  if (!plan.live)
    return;
  RC_ASSERT(plan.stop.empty());
  RC_ASSERT(plan.keep.at("n0") == survivors);
  const std::size_t joining = plan.join.contains("n0") ? plan.join.at("n0").size() : 0;
  RC_ASSERT(survivors.size() + joining == static_cast<std::size_t>(world));
  RC_ASSERT(plan.awaitJoiners == (joining > 0));
  RC_ASSERT(!plan.groupTrainsOn);  // a joiner here takes a lost rank's place
  RC_ASSERT(plan.publish.has_value());
  const auto n = static_cast<std::int64_t>(plan.publish->members.size());
  const std::int64_t expected =
      joining == 0 ? world : rules.largestValidAtMost(static_cast<std::int64_t>(survivors.size()));
  RC_ASSERT(n == expected);
  RC_ASSERT(plan.publish->batch == *rules.batchFor(n));
  std::uint32_t held = 0;
  for (const auto& m : plan.publish->members) {
    RC_ASSERT((alive >> m.localRank & 1U) != 0);
    held |= 1U << m.localRank;
  }
  if (!copies)
    RC_ASSERT(plan.publish->donors.empty());
  for (const auto& d : plan.publish->donors) {
    RC_ASSERT((alive >> d.localRank & 1U) != 0);
    held |= 1U << d.localRank;
  }
  if (copies)
    RC_ASSERT(holdsEveryPartition(held, world, live::liveBuddyDistance(world, world)));
}

}  // namespace
}  // namespace stretch::agent
