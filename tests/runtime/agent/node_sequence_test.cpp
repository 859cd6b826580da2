// NodeSequence (runtime/agent/node_sequence.hpp) against a plain vector, planMembers against
// planWorld, and the cost of an agent restart in tree nodes: a failure in a 16,384-node world
// must not cost work per node. rapidcheck prints its seed; replay with RC_PARAMS="seed=N".

#include "runtime/agent/node_sequence.hpp"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <rapidcheck.h>

#include <fmt/format.h>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "runtime/agent/state_machine.hpp"
#include "runtime/agent/world_plan.hpp"
#include "runtime/common/error.hpp"

namespace stretch::agent {
namespace {

using Model = std::vector<NodeEntry>;

NodeEntry entryFor(std::uint64_t key, std::int64_t slots, std::int64_t used) {
  return NodeEntry{fmt::format("n{}", key), slots, used, key};
}

// Every query of the sequence agrees with the vector it stands for.
void expectMatches(const NodeSequence& s, const Model& m) {
  RC_ASSERT(s.size() == m.size());
  RC_ASSERT(s.empty() == m.empty());
  RC_ASSERT(s.entries() == m);
  std::int64_t used = 0;
  std::int64_t slots = 0;
  std::int64_t lo = m.empty() ? 0 : m.front().slots;
  std::int64_t hi = lo;
  for (std::size_t i = 0; i < m.size(); ++i) {
    RC_ASSERT(s.firstRank(i) == used);
    RC_ASSERT(s[i] == (NodeAssignment{m[i].nodeId, static_cast<std::int64_t>(i), used, m[i].used,
                                      m[i].slots}));
    RC_ASSERT(s.indexOfKey(m[i].key) == std::optional<std::size_t>(i));
    for (std::int64_t r = used; r < used + m[i].used; ++r) {
      RC_ASSERT(s.indexOfRank(r) == std::optional<std::size_t>(i));
    }
    used += m[i].used;
    slots += m[i].slots;
    lo = std::min(lo, m[i].slots);
    hi = std::max(hi, m[i].slots);
  }
  RC_ASSERT(s.firstRank(m.size()) == used);
  RC_ASSERT(s.usedSum() == used);
  RC_ASSERT(s.slotSum() == slots);
  RC_ASSERT(s.minSlots() == lo);
  RC_ASSERT(s.maxSlots() == hi);
  RC_ASSERT(!s.indexOfRank(-1).has_value());
  RC_ASSERT(!s.indexOfRank(used).has_value());
  for (std::int64_t want = 0; want <= slots + 1; ++want) {
    std::size_t k = 0;
    for (std::int64_t sum = 0; k < m.size() && sum < want; ++k) {
      sum += m[k].slots;
    }
    RC_ASSERT(s.prefixWithSlots(want) == k);
  }
  const std::vector<NodeAssignment> listed = s.assignments();
  RC_ASSERT(listed.size() == m.size());
  RC_ASSERT(NodeSequence::fromAssignments(listed) == s);
}

RC_GTEST_PROP(NodeSequence, EveryOperationMatchesAVectorAndLeavesTheOldSequenceAlone, ()) {
  const auto keys =
      *rc::gen::unique<std::vector<std::uint64_t>>(rc::gen::inRange<std::uint64_t>(0, 200));
  Model model;
  for (const std::uint64_t k : keys) {
    model.push_back(
        entryFor(k, *rc::gen::inRange<std::int64_t>(1, 9), *rc::gen::inRange<std::int64_t>(0, 9)));
  }
  std::sort(model.begin(), model.end(),
            [](const NodeEntry& a, const NodeEntry& b) { return a.key < b.key; });
  NodeSequence s = NodeSequence::fromSorted(model);
  expectMatches(s, model);
  const int ops = *rc::gen::inRange(0, 30);
  for (int op = 0; op < ops; ++op) {
    const NodeSequence before = s;
    const Model beforeModel = model;
    switch (*rc::gen::inRange(0, 5)) {
      case 0: {  // insert a new key
        const auto key = *rc::gen::inRange<std::uint64_t>(0, 300);
        const auto at =
            std::lower_bound(model.begin(), model.end(), key,
                             [](const NodeEntry& e, std::uint64_t k) { return e.key < k; });
        if (at != model.end() && at->key == key) {
          RC_ASSERT_THROWS_AS(s.inserted(entryFor(key, 1, 1)), InternalError);
          break;
        }
        NodeEntry e = entryFor(key, *rc::gen::inRange<std::int64_t>(1, 9),
                               *rc::gen::inRange<std::int64_t>(0, 9));
        model.insert(at, e);
        s = s.inserted(e);
        break;
      }
      case 1: {  // erase a key (present or not)
        const auto key = *rc::gen::inRange<std::uint64_t>(0, 300);
        std::erase_if(model, [&](const NodeEntry& e) { return e.key == key; });
        s = s.erased(key);
        break;
      }
      case 2: {  // split, keep one side
        const auto count = *rc::gen::inRange<std::size_t>(0, model.size() + 2);
        auto [head, tail] = s.split(count);
        const auto cut = std::min(count, model.size());
        const Model headModel(model.begin(), model.begin() + static_cast<std::ptrdiff_t>(cut));
        const Model tailModel(model.begin() + static_cast<std::ptrdiff_t>(cut), model.end());
        expectMatches(head, headModel);
        expectMatches(tail, tailModel);
        RC_ASSERT(head.concatenated(tail) == s);
        if (*rc::gen::arbitrary<bool>()) {
          s = head;
          model = headModel;
        } else {
          s = tail;
          model = tailModel;
        }
        break;
      }
      case 3: {  // replace one entry's counts
        if (model.empty()) {
          break;
        }
        const auto i = *rc::gen::inRange<std::size_t>(0, model.size());
        model[i].used = *rc::gen::inRange<std::int64_t>(0, 9);
        model[i].slots = *rc::gen::inRange<std::int64_t>(1, 9);
        s = s.replaced(i, model[i]);
        break;
      }
      default: {  // append larger keys
        const std::uint64_t base = model.empty() ? 0 : model.back().key + 1;
        Model more;
        const auto n = *rc::gen::inRange<std::uint64_t>(0, 5);
        for (std::uint64_t k = 0; k < n; ++k) {
          more.push_back(entryFor(base + 2 * k, 4, 4));
        }
        s = s.concatenated(NodeSequence::fromSorted(more));
        model.insert(model.end(), more.begin(), more.end());
        break;
      }
    }
    expectMatches(s, model);
    expectMatches(before, beforeModel);  // persistence: the old version is untouched
  }
}

TEST(NodeSequence, ListsAssignmentsAndRejectsInconsistentRanks) {
  const NodeSequence s{{"a", 0, 0, 4, 4}, {"b", 1, 4, 2, 4}};
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s.usedSum(), 6);
  EXPECT_EQ(s.back(), (NodeAssignment{"b", 1, 4, 2, 4}));
  EXPECT_EQ(s.ids(), (std::vector<std::string>{"a", "b"}));
  // Equality ignores keys: the same nodes built with other keys are equal.
  EXPECT_EQ(s, NodeSequence::fromSorted({{"a", 4, 4, 10}, {"b", 4, 2, 20}}));
  EXPECT_NE(s, NodeSequence::fromSorted({{"a", 4, 4, 10}, {"b", 4, 3, 20}}));
  EXPECT_THROW((NodeSequence{{"a", 0, 0, 4, 4}, {"b", 1, 3, 2, 4}}), InternalError);
  EXPECT_THROW(NodeSequence::fromSorted({{"a", 4, 4, 2}, {"b", 4, 4, 1}}), InternalError);
  EXPECT_THROW(s.entry(2), InternalError);
  EXPECT_TRUE(NodeSequence().begin() == NodeSequence().end());
}

// ---- planMembers is planWorld -------------------------------------------------------------

config::DsConfig layoutTraining(int which) {
  config::DsConfig ds;
  if (which == 0) {  // elastic: batch 16 on 1, 2, 4, 8 GPUs
    ds.elasticity.enabled = true;
    ds.elasticity.version = config::ElasticityVersion::V0_1;
    ds.elasticity.maxTrainBatchSize = 16;
    ds.elasticity.microBatchSizes = {2, 4};
    ds.elasticity.maxGpus = 64;
  } else if (which == 1) {  // any size
    ds.batch.microBatchPerGpu = 1;
  } else {  // fixed batch 24, micro batch 1: the sizes dividing 24
    ds.batch.trainBatchSize = 24;
    ds.batch.microBatchPerGpu = 1;
  }
  return ds;
}

RC_GTEST_PROP(PlanMembers, LaysOutTheSameWorldAsPlanWorld, ()) {
  const int which = *rc::gen::inRange(0, 3);
  const std::int64_t modelParallel = which == 0 ? 1 : *rc::gen::element<std::int64_t>(1, 2);
  const WorldSizeRules rules(layoutTraining(which), modelParallel);
  const bool equal = *rc::gen::arbitrary<bool>();
  const auto selection =
      *rc::gen::arbitrary<bool>() ? NodeSelection::WholeNodes : NodeSelection::PartialNodes;
  const auto n = *rc::gen::inRange<std::size_t>(0, 40);
  const std::int64_t common = *rc::gen::inRange<std::int64_t>(1, 9);
  std::vector<CandidateNode> list;
  std::vector<NodeEntry> entries;
  std::uint64_t key = *rc::gen::inRange<std::uint64_t>(0, 5);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t slots = equal ? common : *rc::gen::inRange<std::int64_t>(1, 9);
    key += *rc::gen::inRange<std::uint64_t>(1, 4);
    list.push_back({fmt::format("n{}", key), slots, key});
    entries.push_back({fmt::format("n{}", key), slots, slots, key});
  }
  const std::optional<WorldPlan> expected = planWorld(list, rules, selection);
  const std::optional<MemberPlan> got =
      planMembers(NodeSequence::fromSorted(entries), rules, selection);
  RC_ASSERT(expected.has_value() == got.has_value());
  if (!expected) {
    return;
  }
  RC_ASSERT(got->worldSize == expected->worldSize);
  RC_ASSERT(got->used.size() == expected->used.size());
  for (std::size_t i = 0; i < expected->used.size(); ++i) {
    const NodeEntry& e = got->used.entry(i);
    RC_ASSERT(e.nodeId == expected->used[i].nodeId);
    RC_ASSERT(e.used == expected->used[i].used);
    RC_ASSERT(e.slots == expected->used[i].slots);
    RC_ASSERT(e.key == expected->used[i].key);
  }
  RC_ASSERT(got->spare.ids() == expected->spare);
}

// ---- the agent's restart cost -------------------------------------------------------------

struct RestartCost {
  double treeNodesPerRestart = 0;
  std::int64_t lastWorld = 0;
};

// `nodes` nodes of 8 GPUs start; then, `failures` times, a spare joins and a member leaves (the
// simulator's replacement policy): each is a counted restart on a world of the same size.
RestartCost restartCost(std::int64_t nodes, int failures) {
  AgentConfig c;
  c.minNodes = 1;
  c.maxNodes = nodes;  // the spare waits until a member leaves
  c.maxRestarts = failures;
  c.training.batch.microBatchPerGpu = 1;
  c.lastCall = std::chrono::seconds(0);
  AgentStateMachine m(c);
  Time now{0};
  for (std::int64_t i = 0; i < nodes; ++i) {
    m.handle(now, NodeJoined{fmt::format("n{}", i), 8});
  }
  m.tick(now);
  EXPECT_EQ(m.phase(), Phase::Running);
  const std::uint64_t before = NodeSequence::treeNodesMadeOnThisThread();
  RestartCost cost;
  for (int f = 0; f < failures; ++f) {
    now += std::chrono::seconds(60);
    m.handle(now, NodeJoined{fmt::format("spare{}", f), 8});
    // The member in the middle of the world fails.
    const std::string victim = m.current()->nodes[m.current()->nodes.size() / 2].nodeId;
    const auto actions = m.handle(now, NodeLeft{victim, "failed"});
    const auto* start = std::get_if<StartWorkers>(&actions.back());
    EXPECT_NE(start, nullptr) << "failure " << f;
    if (start == nullptr) {
      return cost;
    }
    EXPECT_EQ(start->worldSize, nodes * 8);
    EXPECT_FALSE(start->nodes.indexOfKey(*m.nodeKey(fmt::format("spare{}", f))) == std::nullopt);
    cost.lastWorld = start->worldSize;
  }
  cost.treeNodesPerRestart =
      static_cast<double>(NodeSequence::treeNodesMadeOnThisThread() - before) / failures;
  return cost;
}

TEST(AgentRestartCost, GrowsWithTheLogarithmOfTheNodesNotWithTheNodes) {
  const RestartCost small = restartCost(256, 100);
  const RestartCost large = restartCost(16384, 100);
  std::cout << fmt::format(
      "tree nodes made per failure + replacement + restart: {:.1f} at 256 nodes, {:.1f} at "
      "16,384 nodes\n",
      small.treeNodesPerRestart, large.treeNodesPerRestart);
  EXPECT_EQ(large.lastWorld, 16384 * 8);
  // 64x the nodes: a cost per node would be 64x; a logarithmic one grows by about 14/8.
  EXPECT_LT(large.treeNodesPerRestart, 3.0 * small.treeNodesPerRestart);
  EXPECT_LT(large.treeNodesPerRestart, 40.0 * std::log2(16384.0));
}

}  // namespace
}  // namespace stretch::agent
