// interimMembers (runtime/comm/live_generation.hpp) against a brute force over every subset: it
// returns `count` survivors in rank order, and ones that hold every partition whenever any
// choice does; interimDonors adds survivors left out until every partition a survivor holds is
// held.

#include <algorithm>
#include <cstdint>
#include <rapidcheck.h>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "runtime/comm/live_generation.hpp"

namespace stretch::comm {
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
  const int d = liveBuddyDistance(distance, world);
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

}  // namespace
}  // namespace stretch::comm
