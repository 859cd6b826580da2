// Live recovery's decision (runtime/agent/live_plan.hpp): when the survivors hold the state,
// who stays, who joins, the interim world and its batch, the donors, and the checkpoint fallback
// with its reason; and the membership policy underneath (interim members, donors).

#include "runtime/agent/live_plan.hpp"

#include <vector>

#include <gtest/gtest.h>

#include "runtime/config/ds_config.hpp"

namespace stretch::agent {
namespace {

// Valid world sizes 1, 2 and 4 (final batch 16, micro batch 4).
elasticity::WorldSizeRules rules124() {
  return elasticity::WorldSizeRules(config::parseConfig(R"({"elasticity": {
        "enabled": true, "max_train_batch_size": 16, "micro_batch_sizes": [4], "min_gpus": 1,
        "max_gpus": 4, "version": 0.1}})")
                                        .config);
}

// Valid world sizes 1, 2, 3 and 6 (final batch 24, micro batch 4).
elasticity::WorldSizeRules rules1236() {
  return elasticity::WorldSizeRules(config::parseConfig(R"({"elasticity": {
        "enabled": true, "max_train_batch_size": 24, "micro_batch_sizes": [4], "min_gpus": 1,
        "max_gpus": 6, "version": 0.1}})")
                                        .config);
}

StartWorkers startOn(const std::vector<std::pair<std::string, std::int64_t>>& nodes,
                     const elasticity::WorldSizeRules& rules, std::uint64_t generation = 2) {
  StartWorkers s;
  s.generation = generation;
  std::vector<NodeAssignment> list;
  std::int64_t first = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    NodeAssignment n;
    n.nodeId = nodes[i].first;
    n.nodeRank = static_cast<std::int64_t>(i);
    n.localWorldSize = nodes[i].second;
    n.firstRank = first;
    n.slots = nodes[i].second;
    first += nodes[i].second;
    list.push_back(n);
  }
  s.nodes = NodeSequence::fromAssignments(list);
  s.worldSize = first;
  s.dataParallelSize = first;
  s.batch = *rules.batchFor(first);
  return s;
}

LiveSituation oneNode(int world, const std::vector<int>& alive, bool copies) {
  LiveSituation s;
  for (int r = 0; r < world; ++r)
    s.group.push_back({"n0", r});
  for (const int r : alive)
    s.running.push_back({{"n0", r}, 100 + r, true, false});
  s.partitionCopies = copies;
  s.copyDistance = world;
  return s;
}

TEST(LivePlan, TheStateIsLostWithEveryWorkerOrAPartitionAndItsCopy) {
  EXPECT_FALSE(whyStateIsLost({4, {}, 4, true}));
  EXPECT_TRUE(whyStateIsLost({4, {0, 1, 2, 3}, 4, false}));
  EXPECT_FALSE(whyStateIsLost({4, {0, 1, 3}, 4, false}));  // ZeRO 0: one survivor holds it all
  // One node of 4: copies on the next rank (distance 4 % 4 = 0 becomes 1).
  EXPECT_EQ(whyStateIsLost({4, {2, 1}, 4, true}),
            "ZeRO partition 1 was lost with its copy (ranks 1 and 2 of 4)");
  EXPECT_FALSE(whyStateIsLost({4, {1, 3}, 4, true}));
  // Two nodes of 4: the copy is on the same slot of the other node.
  EXPECT_FALSE(whyStateIsLost({8, {0, 1, 2, 3}, 4, true}));
  EXPECT_TRUE(whyStateIsLost({8, {1, 5}, 4, true}));
  EXPECT_TRUE(whyStateIsLost({0, {}, 1, false}));
}

// One node of 4, rank 1 died, the replacement starts: the survivors train on in an interim world
// of 2 (the largest valid size of 3 survivors) chosen to hold every partition, then all 4.
TEST(LivePlan, SurvivorsTrainInAnInterimWorldWhileTheReplacementStarts) {
  const auto rules = rules124();
  const auto plan =
      planLiveRecovery(oneNode(4, {0, 2, 3}, true), startOn({{"n0", 4}}, rules), rules);
  ASSERT_TRUE(plan.live) << plan.reason;
  EXPECT_EQ(plan.keep, (std::map<std::string, std::vector<std::int64_t>>{{"n0", {0, 2, 3}}}));
  EXPECT_EQ(plan.join, (std::map<std::string, std::vector<std::int64_t>>{{"n0", {1}}}));
  ASSERT_TRUE(plan.publish);
  EXPECT_EQ(plan.publish->members, (std::vector<WorkerPlace>{{"n0", 0}, {"n0", 2}}));
  EXPECT_EQ(plan.publish->batch, *rules.batchFor(2));
  EXPECT_TRUE(plan.publish->donors.empty());
  EXPECT_TRUE(plan.awaitJoiners);
  EXPECT_FALSE(plan.groupTrainsOn);  // rank 1 is gone: the interim world trains, not the group
  EXPECT_TRUE(plan.stop.empty());
  EXPECT_TRUE(plan.releaseAfterDonating.empty());
  // Without copies (ZeRO 0) the first survivors.
  const auto zero0 =
      planLiveRecovery(oneNode(4, {0, 2, 3}, false), startOn({{"n0", 4}}, rules), rules);
  ASSERT_TRUE(zero0.publish);
  EXPECT_EQ(zero0.publish->members, (std::vector<WorkerPlace>{{"n0", 0}, {"n0", 2}}));
}

TEST(LivePlan, FallsBackToTheCheckpointAndSaysWhy) {
  const auto rules = rules124();
  const auto next = startOn({{"n0", 4}}, rules);
  auto buddies = planLiveRecovery(oneNode(4, {0, 3}, true), next, rules);
  EXPECT_FALSE(buddies.live);
  EXPECT_EQ(buddies.reason, "ZeRO partition 1 was lost with its copy (ranks 1 and 2 of 4)");
  EXPECT_TRUE(buddies.keep.empty());
  EXPECT_FALSE(buddies.publish);
  // The same deaths without copies: the survivors hold the whole state.
  EXPECT_TRUE(planLiveRecovery(oneNode(4, {0, 3}, false), next, rules).live);

  auto silent = oneNode(4, {0, 2, 3}, false);
  silent.running[1].capable = false;
  const auto plan = planLiveRecovery(silent, next, rules);
  EXPECT_FALSE(plan.live);
  EXPECT_EQ(plan.reason, "worker 2 of node n0 (pid 102) cannot continue live");

  const auto elsewhere =
      planLiveRecovery(oneNode(4, {0, 2, 3}, false), startOn({{"n1", 2}}, rules), rules);
  EXPECT_FALSE(elsewhere.live);
  EXPECT_EQ(elsewhere.reason,
            "no running worker that can continue live has a place in generation 2");
  EXPECT_FALSE(planLiveRecovery(oneNode(4, {}, false), next, rules).live);
}

// A replacement that was not ready when another worker died is started again.
// A scale-up: the group of 2 lost nobody and 2 workers join. It trains on in its own generation
// while they start (nothing to publish yet); after a loss with no valid interim world the
// survivors wait instead.
TEST(LivePlan, AGroupThatLostNobodyTrainsOnWhileJoinersStart) {
  const auto rules = rules124();
  auto s = oneNode(2, {0, 1}, true);
  const auto plan = planLiveRecovery(s, startOn({{"n0", 4}}, rules), rules);
  ASSERT_TRUE(plan.live) << plan.reason;
  EXPECT_EQ(plan.join, (std::map<std::string, std::vector<std::int64_t>>{{"n0", {2, 3}}}));
  EXPECT_FALSE(plan.publish);
  EXPECT_TRUE(plan.awaitJoiners);
  EXPECT_TRUE(plan.groupTrainsOn);
  // With 6 as the only valid size, 5 survivors of 6 have no interim world: they wait.
  const auto only6 = elasticity::WorldSizeRules(config::parseConfig(R"({"elasticity": {
        "enabled": true, "max_train_batch_size": 24, "micro_batch_sizes": [4], "min_gpus": 6,
        "max_gpus": 6, "version": 0.1}})")
                                                    .config);
  const auto waits =
      planLiveRecovery(oneNode(6, {0, 1, 2, 3, 5}, false), startOn({{"n0", 6}}, only6), only6);
  ASSERT_TRUE(waits.live) << waits.reason;
  EXPECT_FALSE(waits.publish);
  EXPECT_TRUE(waits.awaitJoiners);
  EXPECT_FALSE(waits.groupTrainsOn);
}

TEST(LivePlan, AJoinerNotReadyIsStartedAgain) {
  const auto rules = rules124();
  auto s = oneNode(4, {0, 2}, false);
  s.group = {{"n0", 0}, {"n0", 2}, {"n0", 3}};  // the interim group; 3 just died, 1 was joining
  s.running.push_back({{"n0", 1}, 201, false, true});
  const auto plan = planLiveRecovery(s, startOn({{"n0", 4}}, rules), rules);
  ASSERT_TRUE(plan.live) << plan.reason;
  EXPECT_EQ(plan.stop, (std::vector<WorkerPlace>{{"n0", 1}}));
  EXPECT_EQ(plan.join, (std::map<std::string, std::vector<std::int64_t>>{{"n0", {1, 3}}}));
  ASSERT_TRUE(plan.publish);
  EXPECT_EQ(plan.publish->members, (std::vector<WorkerPlace>{{"n0", 0}, {"n0", 2}}));
}

// Three nodes of 2 (valid sizes 1, 2, 3, 6), node n1 lost: the job goes on with n0's 2 workers
// and nobody joins; n1's partitions have their copies on n2 (distance 2), so n2's workers give
// them as donors and are stopped once they have.
TEST(LivePlan, ANodeLeftOutOfASmallerWorldGivesItsCopies) {
  const auto rules = rules1236();
  LiveSituation s;
  for (const char* node : {"n0", "n1", "n2"}) {
    for (int local = 0; local < 2; ++local)
      s.group.push_back({node, local});
  }
  for (const char* node : {"n0", "n2"}) {
    for (int local = 0; local < 2; ++local)
      s.running.push_back({{node, local}, 7, true, false});
  }
  s.partitionCopies = true;
  s.copyDistance = 2;
  const auto plan = planLiveRecovery(s, startOn({{"n0", 2}}, rules), rules);
  ASSERT_TRUE(plan.live) << plan.reason;
  EXPECT_TRUE(plan.join.empty());
  EXPECT_FALSE(plan.awaitJoiners);
  ASSERT_TRUE(plan.publish);
  EXPECT_EQ(plan.publish->members, (std::vector<WorkerPlace>{{"n0", 0}, {"n0", 1}}));
  const std::vector<WorkerPlace> n2 = {{"n2", 0}, {"n2", 1}};
  EXPECT_EQ(plan.publish->donors, n2);
  EXPECT_EQ(plan.releaseAfterDonating, n2);
  EXPECT_TRUE(plan.stop.empty());
  // ZeRO 0: nobody donates, n2's workers stop at once.
  s.partitionCopies = false;
  const auto zero0 = planLiveRecovery(s, startOn({{"n0", 2}}, rules), rules);
  ASSERT_TRUE(zero0.publish);
  EXPECT_TRUE(zero0.publish->donors.empty());
  EXPECT_EQ(zero0.stop, n2);
}

// One node of 4 workers, one dead, room for 2 (a job whose valid world sizes are 1, 2 and 4):
// the first 2 survivors would leave out the dead rank's buddy or the owner of the partition the
// dead rank held a copy of in 3 of the 4 cases.
TEST(InterimMembers, AnInterimWorldKeepsTheSurvivorsThatHoldEveryPartition) {
  const std::vector<int> members = {0, 1, 2, 3};
  EXPECT_EQ(interimMembers(members, {1, 2, 3}, 4, 2), (std::vector<int>{1, 3}));
  EXPECT_EQ(interimMembers(members, {0, 2, 3}, 4, 2), (std::vector<int>{0, 2}));
  EXPECT_EQ(interimMembers(members, {0, 1, 3}, 4, 2), (std::vector<int>{1, 3}));
  EXPECT_EQ(interimMembers(members, {0, 1, 2}, 4, 2), (std::vector<int>{0, 2}));
  // Ids are the members' (local ranks of a node where not every slot takes part), in rank order.
  EXPECT_EQ(interimMembers({5, 2, 7, 9}, {9, 7, 2}, 4, 2), (std::vector<int>{2, 9}));
  // No choice holds partition 0 (its owner and its buddy are dead): the first survivors.
  EXPECT_EQ(interimMembers(members, {3, 2}, 1, 1), (std::vector<int>{2}));
  // Room for every survivor, or for none.
  EXPECT_EQ(interimMembers(members, {3, 0, 1}, 1, 3), (std::vector<int>{0, 1, 3}));
  EXPECT_TRUE(interimMembers(members, {0, 1}, 1, 0).empty());
}

// Eight workers with copies on the next rank, ranks 1 and 4 dead and room for 4: no 4 of the 6
// survivors hold every partition (1 needs rank 2, 4 needs 5, 0 needs 0, 3 needs 3; then 6 has
// neither its owner nor its buddy 7), so a survivor left out gives partition 6 as a donor.
TEST(InterimMembers, SurvivorsLeftOutThatHoldAMissingPartitionAreDonors) {
  const std::vector<int> members = {0, 1, 2, 3, 4, 5, 6, 7};
  const std::vector<int> survivors = {0, 2, 3, 5, 6, 7};
  const auto chosen = interimMembers(members, survivors, 8, 4);
  EXPECT_EQ(chosen, (std::vector<int>{0, 2, 3, 5}));
  EXPECT_EQ(interimDonors(members, survivors, chosen, 8), (std::vector<int>{6}));
  // Members that hold every partition need none.
  EXPECT_TRUE(interimDonors({0, 1, 2, 3}, {0, 2, 3}, {0, 2}, 4).empty());
  // Ranks 1 and 2 dead: partition 1 is lost whatever happens; rank 3 gives partition 2.
  EXPECT_EQ(interimDonors({0, 1, 2, 3}, {0, 3}, {0}, 4), (std::vector<int>{3}));
  // Ids are the members' (local ranks of a node): the same case, ranks held by ids 5, 2, 7, 9.
  EXPECT_EQ(interimDonors({5, 2, 7, 9}, {9, 5}, {5}, 1), (std::vector<int>{9}));
}

}  // namespace
}  // namespace stretch::agent
