// Node layouts of a valid world (runtime/agent/world_plan.hpp). The valid sizes themselves:
// tests/runtime/elasticity/world_size_rules_test.cpp.

#include "runtime/agent/world_plan.hpp"

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "runtime/common/error.hpp"
#include "tests/runtime/agent/agent_test_util.hpp"

namespace stretch::agent {
namespace {

TEST(PlanWorld, WholeNodesOfEqualSizeUseThePrefix) {
  const WorldSizeRules rules(test::elasticTraining());
  const auto plan = planWorld({{"a", 4}, {"b", 4}, {"c", 4}}, rules, NodeSelection::WholeNodes);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->worldSize, 8);
  EXPECT_EQ(plan->used, (std::vector<NodeShare>{{"a", 4, 4}, {"b", 4, 4}}));
  EXPECT_EQ(plan->spare, (std::vector<std::string>{"c"}));
}

TEST(PlanWorld, WholeNodesOfMixedSizesFindTheLargestValidSubset) {
  const WorldSizeRules rules(test::elasticTraining());
  // Sums: 3, 5, 4, 8 (3 + 5), 7, 9, 12: the largest valid is 8.
  auto plan = planWorld({{"a", 3}, {"b", 5}, {"c", 4}}, rules, NodeSelection::WholeNodes);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->worldSize, 8);
  EXPECT_EQ(plan->used, (std::vector<NodeShare>{{"a", 3, 3}, {"b", 5, 5}}));
  EXPECT_EQ(plan->spare, (std::vector<std::string>{"c"}));
  // 8 = a + b + c; d stays spare.
  plan = planWorld({{"a", 2}, {"b", 2}, {"c", 4}, {"d", 1}}, rules, NodeSelection::WholeNodes);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->worldSize, 8);
  EXPECT_EQ(plan->spare, (std::vector<std::string>{"d"}));
  // 4 = a + b, the subset that ends earliest.
  plan = planWorld({{"a", 2}, {"b", 2}, {"c", 3}}, rules, NodeSelection::WholeNodes);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->worldSize, 4);
  EXPECT_EQ(plan->used, (std::vector<NodeShare>{{"a", 2, 2}, {"b", 2, 2}}));
}

TEST(PlanWorld, NothingFitsGivesNullopt) {
  const WorldSizeRules rules(test::elasticTraining());
  EXPECT_FALSE(planWorld({{"a", 3}, {"b", 3}}, rules, NodeSelection::WholeNodes).has_value());
  EXPECT_FALSE(planWorld({}, rules, NodeSelection::WholeNodes).has_value());
  EXPECT_FALSE(planWorld({}, rules, NodeSelection::PartialNodes).has_value());
}

TEST(PlanWorld, PartialNodesFillInOrder) {
  const WorldSizeRules rules(test::elasticTraining());
  const auto plan = planWorld({{"a", 3}, {"b", 3}, {"c", 3}}, rules, NodeSelection::PartialNodes);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->worldSize, 8);
  EXPECT_EQ(plan->used, (std::vector<NodeShare>{{"a", 3, 3}, {"b", 3, 3}, {"c", 3, 2}}));
  EXPECT_TRUE(plan->spare.empty());
}

TEST(PlanWorld, LargeHomogeneousAndMixedJobsPlanQuickly) {
  // 2,000 nodes: the equal-slot path, then the subset-sum path over 16,000 slots.
  config::DsConfig ds;
  ds.batch.microBatchPerGpu = 1;
  const WorldSizeRules rules(ds);
  std::vector<CandidateNode> nodes;
  for (int i = 0; i < 2000; ++i) {
    nodes.push_back({fmt::format("n{}", i), 8});
  }
  auto plan = planWorld(nodes, rules, NodeSelection::WholeNodes);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->worldSize, 16000);
  nodes.back().slots = 7;
  plan = planWorld(nodes, rules, NodeSelection::WholeNodes);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->worldSize, 15999);
}

}  // namespace
}  // namespace stretch::agent
