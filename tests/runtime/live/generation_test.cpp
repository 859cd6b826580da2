// The live-recovery record (runtime/live/generation.hpp): text round trip, ranks of the
// workers that take part (donors too), the copies' distance, errors naming the line, and the
// store helpers.

#include "runtime/live/generation.hpp"

#include <vector>

#include <gtest/gtest.h>

#include "runtime/comm/errors.hpp"
#include "runtime/comm/store.hpp"

namespace {

using namespace stretch::live;
using stretch::comm::CommError;
using stretch::comm::HashStore;

LiveGeneration interim() {
  LiveGeneration g;
  g.generation = 3;
  g.agentGeneration = 2;
  g.worldSize = 5;
  g.trainBatchSize = 48;
  g.microBatch = 16;
  g.gradientAccumulation = 1;
  g.nodes = {{"n0", 0, {0, 1, 3}}, {"n1", 3, {1, 2}}};
  return g;
}

TEST(LiveGeneration, RoundTripsThroughItsText) {
  const auto g = interim();
  const std::string text = formatLiveGeneration(g);
  EXPECT_EQ(text, "3 2 5 48 16 1\nn0 0 0,1,3\nn1 3 1,2\n");
  EXPECT_EQ(parseLiveGeneration(text), g);
}

// A launcher without --config plans no batch: the record says so with zeros, and round-trips.
TEST(LiveGeneration, ARecordWithoutABatchCarriesZeros) {
  const auto g = makeLiveGeneration(4, 2, {{"n0", 0}, {"n0", 1}}, 0, 0, 0);
  const auto parsed = parseLiveGeneration(formatLiveGeneration(g));
  EXPECT_EQ(parsed, g);
  EXPECT_EQ(parsed.trainBatchSize, 0);
  EXPECT_EQ(parsed.worldSize, 2);
}

TEST(LiveGeneration, RanksCountTheWorkersTakingPartInNodeOrder) {
  const auto g = interim();
  EXPECT_EQ(g.rankOf("n0", 0), 0);
  EXPECT_EQ(g.rankOf("n0", 1), 1);
  EXPECT_EQ(g.rankOf("n0", 2), -1);  // a survivor left out of the interim world
  EXPECT_EQ(g.rankOf("n0", 3), 2);
  EXPECT_EQ(g.rankOf("n1", 1), 3);
  EXPECT_EQ(g.rankOf("n1", 2), 4);
  EXPECT_EQ(g.rankOf("n2", 0), -1);
}

// Built from its members in rank order: the world size and each node's first rank follow.
TEST(LiveGeneration, AGenerationMadeFromItsMembersNumbersTheNodesFirstRanks) {
  EXPECT_EQ(
      makeLiveGeneration(3, 2, {{"n0", 0}, {"n0", 1}, {"n0", 3}, {"n1", 1}, {"n1", 2}}, 48, 16, 1),
      interim());
  const auto empty = makeLiveGeneration(1, 1, {}, 48, 4, 3);
  EXPECT_EQ(empty.worldSize, 0);
  EXPECT_TRUE(empty.nodes.empty());
}

TEST(LiveGeneration, ABuddyIsAnotherRankAtTheLocalWorldSizeWhereThatIsOne) {
  EXPECT_EQ(liveBuddyDistance(4, 4), 1);  // one node of 4: the next rank
  EXPECT_EQ(liveBuddyDistance(4, 3), 1);
  EXPECT_EQ(liveBuddyDistance(4, 8), 4);  // two nodes of 4: the same slot on the next node
  EXPECT_EQ(liveBuddyDistance(8, 3), 2);
  EXPECT_EQ(liveBuddyDistance(4, 1), 1);
  EXPECT_EQ(liveBuddyDistance(0, 4), 1);
}

TEST(LiveGeneration, DonorsFollowTheMembersInTheTransferGroup) {
  auto g = makeLiveGeneration(3, 2, {{"n0", 0}, {"n1", 1}}, 48, 24, 1, {{"n0", 2}, {"n1", 0}});
  EXPECT_EQ(g.worldSize, 2);
  EXPECT_EQ(g.transferSize(), 4);
  EXPECT_EQ(g.donors, (std::vector<LiveNode>{{"n0", 2, {2}}, {"n1", 3, {0}}}));
  EXPECT_EQ(g.rankOf("n0", 2), -1);  // a donor trains in no rank
  EXPECT_EQ(g.transferRankOf("n0", 0), 0);
  EXPECT_EQ(g.transferRankOf("n1", 1), 1);
  EXPECT_EQ(g.transferRankOf("n0", 2), 2);
  EXPECT_EQ(g.transferRankOf("n1", 0), 3);
  EXPECT_EQ(g.transferRankOf("n1", 2), -1);
  const std::string text = formatLiveGeneration(g);
  EXPECT_EQ(text, "3 2 2 48 24 1\nn0 0 0\nn1 1 1\ndonor n0 2 2\ndonor n1 3 0\n");
  EXPECT_EQ(parseLiveGeneration(text), g);
  EXPECT_EQ(interim().transferSize(), 5);  // no donors: the members
}

TEST(LiveGeneration, MalformedRecordsNameTheLine) {
  const std::vector<std::string> bad = {
      "",                                               // no header
      "3 2 5 48 16\nn0 0 0,1,2,3,4\n",                  // a header field missing
      "3 2 2 48 16 1\nn0 1 0,1\n",                      // first rank not 0
      "3 2 2 48 16 1\nn0 0 1,0\n",                      // local ranks not ascending
      "3 2 2 48 16 1\nn0 0 0,x\n",                      // not a number
      "3 2 3 48 16 1\nn0 0 0,1\n",                      // 2 workers for a world of 3
      "3 2 0 48 16 1\n",                                // an empty world
      "3 2 2 48 16 1\nn0 0 0\ndonor n0 1 1\n",          // donors before the world is full
      "3 2 1 48 16 1\nn0 0 0\ndonor n0 2 1\n",          // a donor's first rank not 1
      "3 2 1 48 16 1\nn0 0 0\ndonor n0 1 1\nn1 2 0\n",  // a member after a donor
      "3 2 1 48 16 1\nn0 0 0\ndonor n0 1\n",            // a donor line without ranks
      "3 2 1 48 0 1\nn0 0 0\n",                         // part of a batch
      "3 2 1 -4 -4 1\nn0 0 0\n",                        // a negative batch
  };
  for (const auto& text : bad) {
    EXPECT_THROW(parseLiveGeneration(text), CommError) << text;
  }
  try {
    parseLiveGeneration("3 2 2 48 16 1\nn0 1 0,1\n");
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("n0 1 0,1"), std::string::npos) << e.what();
  }
  auto g = interim();
  g.nodes[0].nodeId = "has space";
  EXPECT_THROW(formatLiveGeneration(g), CommError);
}

TEST(LiveGeneration, PublishingSetsTheRecordThenLatest) {
  HashStore store;
  EXPECT_EQ(latestLiveGeneration(store), 0u);
  const auto g = interim();
  publishLiveGeneration(store, g);
  EXPECT_EQ(latestLiveGeneration(store), 3u);
  EXPECT_EQ(parseLiveGeneration(store.get(live_keys::generation(3))), g);
  EXPECT_EQ(live_keys::capable("n0", 42), "live/capable/n0/42");
  EXPECT_EQ(live_keys::ready(4), "live/ready/4");
  EXPECT_EQ(live_keys::groupPrefix(4), "live/pg/4");
  EXPECT_EQ(live_keys::transferPrefix(4), "live/xfer/4");
  EXPECT_EQ(live_keys::donated(4), "live/donated/4");
}

TEST(LiveGeneration, AWorkersCapabilityIsItsCapableKey) {
  HashStore store;
  EXPECT_EQ(liveCapability(store, "n0", 7), LiveCapability::None);
  store.set(live_keys::capable("n0", 7), "1");
  EXPECT_EQ(liveCapability(store, "n0", 7), LiveCapability::Capable);
  store.set(live_keys::capable("n0", 8), live_keys::kCapableWithCopies);
  EXPECT_EQ(liveCapability(store, "n0", 8), LiveCapability::CapableWithCopies);
  EXPECT_EQ(liveCapability(store, "n1", 8), LiveCapability::None);
}

}  // namespace
