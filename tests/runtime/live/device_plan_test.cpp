// How a live generation's device communicator comes to be (runtime/live/device_plan.hpp): each
// path and each reason for a new unique id, the ranks a shrink leaves out, the abortive shrink by
// NCCL version, the text a plan travels as; then properties over random parents, generations and
// held communicators. rapidcheck prints its seed; replay with RC_PARAMS="seed=N".

#include "runtime/live/device_plan.hpp"

#include <algorithm>
#include <rapidcheck.h>
#include <set>

#include <fmt/format.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "runtime/comm/errors.hpp"
#include "runtime/common/error.hpp"
#include "tests/support/error_of.hpp"

namespace stretch::live {
namespace {

using comm::CommError;
using comm::ncclFeatures;
using ::testing::HasSubstr;
using Members = std::vector<std::pair<std::string, std::int64_t>>;

LiveGeneration generation(std::uint64_t n, const Members& members) {
  return makeLiveGeneration(n, n, members, 0, 0, 0);
}

// Generation 4: two nodes of two workers, ranks a0 a1 b0 b1.
LiveGeneration parent4() {
  return generation(4, {{"a", 0}, {"a", 1}, {"b", 0}, {"b", 1}});
}

// ---- paths -------------------------------------------------------------------------------

TEST(DevicePlan, SurvivorsInTheParentsOrderShrinkItLeavingOutTheOthers) {
  const auto next = generation(5, {{"a", 0}, {"b", 0}, {"b", 1}});  // a1 died
  const auto plan = planDeviceGeneration(ncclFeatures(2, 28, 9), parent4(), next, {4, 4, 4});
  EXPECT_EQ(plan.path, DevicePath::Shrink);
  EXPECT_EQ(plan.parent, 4u);
  EXPECT_EQ(plan.survivors, 3);
  EXPECT_EQ(plan.excluded, std::vector<int>{1});
  EXPECT_FALSE(plan.abortiveShrink);
  EXPECT_FALSE(plan.abortParent);
  EXPECT_EQ(plan.uniqueId, "");
  EXPECT_EQ(plan.reason,
            "NCCL 2.28.9: 3 survivors shrink generation 4's communicator (ncclCommShrink, leaving "
            "out rank 1)");
}

TEST(DevicePlan, TheWholeParentShrinksToItselfLeavingOutNoRank) {
  const auto plan =
      planDeviceGeneration(ncclFeatures(2, 29, 0), parent4(),
                           generation(5, {{"a", 0}, {"a", 1}, {"b", 0}, {"b", 1}}), {4, 4, 4, 4});
  EXPECT_EQ(plan.path, DevicePath::Shrink);
  EXPECT_EQ(plan.survivors, 4);
  EXPECT_TRUE(plan.excluded.empty());
  EXPECT_THAT(plan.reason, HasSubstr("leaving out no rank"));
}

TEST(DevicePlan, JoinersGrowTheShrunkCommunicatorFrom2_29) {
  // b1 died; c0 replaces it and takes the rank after the survivors'.
  const auto next = generation(5, {{"a", 0}, {"a", 1}, {"b", 0}, {"c", 0}});
  const auto plan = planDeviceGeneration(ncclFeatures(2, 29, 0), parent4(), next, {4, 4, 4, 0});
  EXPECT_EQ(plan.path, DevicePath::ShrinkGrow);
  EXPECT_EQ(plan.parent, 4u);
  EXPECT_EQ(plan.survivors, 3);
  EXPECT_EQ(plan.excluded, std::vector<int>{3});
  EXPECT_FALSE(plan.abortiveShrink);
  EXPECT_EQ(plan.reason,
            "NCCL 2.29.0: 3 survivors shrink generation 4's communicator (ncclCommShrink, leaving "
            "out rank 3); 1 joiner joins it through ncclCommGrow");
}

// A survivor out of the parent's order ends the prefix: it and everyone after it join, and its
// old rank is left out of the shrink with the dead ones.
TEST(DevicePlan, ASurvivorOutOfTheParentsOrderEndsThePrefixAndJoins) {
  const auto next = generation(5, {{"b", 0}, {"a", 0}, {"a", 1}});
  const auto plan = planDeviceGeneration(ncclFeatures(2, 29, 0), parent4(), next, {4, 4, 4});
  EXPECT_EQ(plan.path, DevicePath::ShrinkGrow);
  EXPECT_EQ(plan.survivors, 1);
  EXPECT_EQ(plan.excluded, (std::vector<int>{0, 1, 3}));
  EXPECT_THAT(plan.reason, HasSubstr("1 survivor shrinks generation 4's communicator"));
  EXPECT_THAT(plan.reason, HasSubstr("leaving out ranks 0, 1, 3"));
  EXPECT_THAT(plan.reason, HasSubstr("2 joiners join it"));
  EXPECT_THAT(plan.reason, HasSubstr("out of its order"));
}

// A member holding nothing, or another generation's communicator, ends the prefix too.
TEST(DevicePlan, AMemberWithoutTheParentsCommunicatorEndsThePrefix) {
  // (a1 died; b0 holds nothing or an older one; c0 is new.)
  const auto next = generation(5, {{"a", 0}, {"b", 0}, {"c", 0}});
  for (const std::uint64_t other : {0u, 3u}) {
    const auto plan = planDeviceGeneration(ncclFeatures(2, 29, 0), parent4(), next, {4, other, 4});
    EXPECT_EQ(plan.path, DevicePath::ShrinkGrow);
    EXPECT_EQ(plan.survivors, 1);
    EXPECT_EQ(plan.excluded, (std::vector<int>{1, 2, 3}));
  }
}

// Every rank of a node aborts together: b1 lost the communicator (an NCCL error aborted it), so
// b0, which still holds it, does not shrink with an aborted peer beside it: both join anew.
TEST(DevicePlan, ANodeWithOneRankAbortedGivesNoSurvivor) {
  const auto next = generation(5, {{"a", 0}, {"a", 1}, {"b", 0}, {"b", 1}});
  const auto features = ncclFeatures(2, 29, 0);
  const auto plan =
      planDeviceGeneration(features, parent4(), next, {4, 4, 4, 0}, {false, false, false, true});
  EXPECT_EQ(plan.path, DevicePath::ShrinkGrow);
  EXPECT_EQ(plan.survivors, 2);
  EXPECT_EQ(plan.excluded, (std::vector<int>{2, 3}));
  // On rank 0's node, nobody survives.
  const auto init =
      planDeviceGeneration(features, parent4(), next, {4, 0, 4, 4}, {false, true, false, false});
  EXPECT_EQ(init.path, DevicePath::Init);
  EXPECT_THAT(init.reason, HasSubstr("a node's ranks abort together"));
  EXPECT_THROW(planDeviceGeneration(features, parent4(), next, {4, 4, 4, 4}, {false}),
               InternalError);
}

// A replacement started on the dead worker's node holds nothing but aborted nothing: its
// node-mate still shrinks.
TEST(DevicePlan, AReplacementOnTheNodeLeavesItsNodeMatesSurvivors) {
  const auto next = generation(5, {{"a", 0}, {"a", 1}, {"b", 0}, {"b", 1}});  // b1 is new
  const auto plan = planDeviceGeneration(ncclFeatures(2, 29, 0), parent4(), next, {4, 4, 4, 0},
                                         {false, false, false, false});
  EXPECT_EQ(plan.path, DevicePath::ShrinkGrow);
  EXPECT_EQ(plan.survivors, 3);
  EXPECT_EQ(plan.excluded, std::vector<int>{3});
}

// ---- abortive shrink by version -----------------------------------------------------------

TEST(DevicePlan, WithoutRevokeTheShrinkIsAbortiveAndFrom2_31ItsParentIsAborted) {
  const auto next = generation(5, {{"a", 0}, {"b", 0}, {"b", 1}});
  const std::vector<std::uint64_t> held{4, 4, 4};

  const auto on2_27 = planDeviceGeneration(ncclFeatures(2, 27, 3), parent4(), next, held);
  EXPECT_EQ(on2_27.path, DevicePath::Shrink);
  EXPECT_TRUE(on2_27.abortiveShrink);
  EXPECT_FALSE(on2_27.abortParent);
  EXPECT_THAT(on2_27.reason, HasSubstr("NCCL 2.27.3"));
  EXPECT_THAT(on2_27.reason, HasSubstr("abortively (NCCL_SHRINK_ABORT"));
  EXPECT_THAT(on2_27.reason, HasSubstr("then destroys the parent"));

  // With revoke (2.28 on) the shrink is never abortive, so the 2.31 hang does not apply.
  for (const auto& features : {ncclFeatures(2, 28, 0), ncclFeatures(2, 31, 0)}) {
    const auto plan = planDeviceGeneration(features, parent4(), next, held);
    EXPECT_FALSE(plan.abortiveShrink) << features.version();
    EXPECT_FALSE(plan.abortParent) << features.version();
    EXPECT_THAT(plan.reason, ::testing::Not(HasSubstr("abortively")));
  }

  // A 2.31 library behind 2.27 headers: no revoke, and a parent that must not be destroyed.
  auto capped = ncclFeatures(2, 31, 0);
  capped.revoke = false;
  capped.grow = false;
  const auto plan = planDeviceGeneration(capped, parent4(), next, held);
  EXPECT_TRUE(plan.abortiveShrink);
  EXPECT_TRUE(plan.abortParent);
  EXPECT_THAT(plan.reason, HasSubstr("then aborts the parent (destroying it hangs from 2.31)"));
}

// ---- each cause of a new unique id --------------------------------------------------------

void expectInit(const DevicePlan& plan) {
  EXPECT_EQ(plan.path, DevicePath::Init);
  EXPECT_EQ(plan.parent, 0u);
  EXPECT_EQ(plan.survivors, 0);
  EXPECT_TRUE(plan.excluded.empty());
  EXPECT_FALSE(plan.abortiveShrink);
  EXPECT_FALSE(plan.abortParent);
  EXPECT_EQ(plan.uniqueId, "");
  EXPECT_THAT(plan.reason,
              HasSubstr("every member builds a new communicator from a new unique id"));
}

TEST(DevicePlan, TheFirstGenerationOverNcclInitialises) {
  const auto next = generation(1, {{"a", 0}, {"a", 1}});
  for (const auto& parent : {std::optional<LiveGeneration>{}, std::optional(parent4())}) {
    // Rank 0 holds nothing: a parent, even a wrong one, and what the others hold do not matter.
    const auto plan = planDeviceGeneration(ncclFeatures(2, 29, 0), parent, next, {0, 4});
    expectInit(plan);
    EXPECT_THAT(plan.reason, HasSubstr("NCCL 2.29.0: rank 0 of generation 1 holds no "
                                       "communicator (the first generation over NCCL"));
  }
}

TEST(DevicePlan, ALibraryWithoutShrinkInitialises) {
  const auto next = generation(5, {{"a", 0}, {"b", 0}, {"b", 1}});
  const auto plan = planDeviceGeneration(ncclFeatures(2, 26, 2), parent4(), next, {4, 4, 4});
  expectInit(plan);
  EXPECT_EQ(plan.reason,
            "NCCL 2.26.2 has no ncclCommShrink (2.27): every member builds a new communicator "
            "from a new unique id");
}

TEST(DevicePlan, JoinersWithoutGrowMakeEveryoneInitialise) {
  const auto next = generation(5, {{"a", 0}, {"a", 1}, {"b", 0}, {"c", 0}});
  for (const auto& features : {ncclFeatures(2, 27, 0), ncclFeatures(2, 28, 9)}) {
    const auto plan = planDeviceGeneration(features, parent4(), next, {4, 4, 4, 0});
    expectInit(plan);
    EXPECT_THAT(plan.reason, HasSubstr("NCCL " + features.version() +
                                       ": 1 joiner cannot join generation 4's communicator once 3 "
                                       "survivors shrink it: ncclCommGrow needs NCCL 2.29"));
  }
}

TEST(DevicePlan, ARank0OutsideTheParentLeavesNoSurvivorInOrder) {
  // Rank 0 says it holds generation 4's communicator, but generation 4 never had it.
  const auto next = generation(5, {{"c", 0}, {"a", 0}});
  const auto plan = planDeviceGeneration(ncclFeatures(2, 29, 0), parent4(), next, {4, 4});
  expectInit(plan);
  EXPECT_THAT(plan.reason, HasSubstr("rank 0 of generation 5 holds generation 4's communicator "
                                     "but has no rank in it, so no member keeps the parent's "
                                     "order"));
}

// ---- validation ---------------------------------------------------------------------------

TEST(DevicePlan, HeldMustNameOneCommunicatorPerRank) {
  const auto next = generation(5, {{"a", 0}, {"b", 0}, {"b", 1}});
  const auto message = test::errorOf<InternalError>([&] {
    planDeviceGeneration(ncclFeatures(2, 29, 0), parent4(), next, {4, 4});
  });
  EXPECT_THAT(message, HasSubstr("2 held entries for a world of 3"));
}

TEST(DevicePlan, TheParentMustBeTheGenerationRank0Holds) {
  const auto next = generation(5, {{"a", 0}, {"b", 0}});
  const auto wrong = test::errorOf<InternalError>([&] {
    planDeviceGeneration(ncclFeatures(2, 29, 0), generation(3, {{"a", 0}}), next, {4, 4});
  });
  EXPECT_THAT(wrong, HasSubstr("holds generation 4's communicator"));
  EXPECT_THAT(wrong, HasSubstr("generation 3's"));
  const auto none = test::errorOf<InternalError>([&] {
    planDeviceGeneration(ncclFeatures(2, 29, 0), std::nullopt, next, {4, 4});
  });
  EXPECT_THAT(none, HasSubstr("the parent record given is none"));
}

// ---- the text -----------------------------------------------------------------------------

TEST(DevicePlan, TravelsAsOneLineOfFieldsThenTheReason) {
  DevicePlan shrink;
  shrink.path = DevicePath::ShrinkGrow;
  shrink.parent = 4;
  shrink.survivors = 3;
  shrink.excluded = {1, 5};
  shrink.abortiveShrink = true;
  shrink.abortParent = true;
  shrink.reason = "why";
  EXPECT_EQ(formatDevicePlan(shrink), "shrink+grow 4 3 1 1 1,5 -\nwhy\n");
  EXPECT_EQ(parseDevicePlan(formatDevicePlan(shrink)), shrink);

  DevicePlan init;
  init.uniqueId = "0a1b2c";
  EXPECT_EQ(formatDevicePlan(init), "init 0 0 0 0 - 0a1b2c\n\n");
  EXPECT_EQ(parseDevicePlan(formatDevicePlan(init)), init);

  // A store value without its last newline still reads; a reason of several lines comes back.
  EXPECT_EQ(parseDevicePlan("init 0 0 0 0 - 0a1b2c\n"), init);
  init.reason = "two\nlines\n";
  EXPECT_EQ(parseDevicePlan(formatDevicePlan(init)), init);
}

TEST(DevicePlan, AUniqueIdThatCannotTravelIsRefused) {
  for (const std::string id : {"a b", "-", "a\tb", "ab\n"}) {
    DevicePlan plan;
    plan.uniqueId = id;
    EXPECT_THAT(test::errorOf<CommError>([&] { formatDevicePlan(plan); }),
                HasSubstr("expected printable text without white space"));
  }
}

TEST(DevicePlan, MalformedTextIsRefusedNamingItAndWhatWasExpected) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"", "ended by a newline"},
      {"shrink 4 3 0 0 1 -", "ended by a newline"},
      {"grow 4 3 0 0 1 -\n", "PATH init, shrink or shrink+grow, not 'grow'"},
      {"shrink 4 3 0 0 1\n", "7 fields"},
      {"shrink 4 3 0 0 1 - x\n", "7 fields"},
      {"shrink  4 3 0 0 1 -\n", "7 fields"},
      {"shrink -4 3 0 0 1 -\n", "PARENT and SURVIVORS non-negative numbers"},
      {"shrink 4 +3 0 0 1 -\n", "PARENT and SURVIVORS non-negative numbers"},
      {"shrink 4 x 0 0 1 -\n", "PARENT and SURVIVORS non-negative numbers"},
      {"shrink 99999999999999999999 3 0 0 1 -\n", "PARENT and SURVIVORS"},
      {"shrink 4 3 2 0 1 -\n", "ABORTIVE 0 or 1, not '2'"},
      {"shrink 4 3 1 yes 1 -\n", "ABORT_PARENT 0 or 1, not 'yes'"},
      {"shrink 4 3 0 0 5,1 -\n", "EXCLUDED '-' or ascending"},
      {"shrink 4 3 0 0 1,,5 -\n", "EXCLUDED '-' or ascending"},
      {"shrink 4 3 0 0 -1 -\n", "EXCLUDED '-' or ascending"},
      {"shrink 4 3 0 0 1, -\n", "EXCLUDED '-' or ascending"},
      {"shrink 4 3 0 0 1 \n", "UNIQUE_ID '-' or the id"},
      {"shrink 4 3 0 0 1 a\rb\n", "UNIQUE_ID '-' or the id"},
      {"init 4 0 0 0 - -\n", "an init plan with PARENT 0"},
      {"init 0 0 1 0 - -\n", "an init plan with PARENT 0"},
      {"init 0 0 0 0 3 -\n", "an init plan with PARENT 0"},
      {"shrink 0 3 0 0 1 -\n", "PARENT and SURVIVORS at least 1"},
      {"shrink+grow 4 0 0 0 1 -\n", "PARENT and SURVIVORS at least 1"},
      {"shrink 4 3 0 1 1 -\n", "ABORT_PARENT 1 only with ABORTIVE 1"},
  };
  for (const auto& [text, expected] : cases) {
    const auto message = test::errorOf<CommError>([&] { parseDevicePlan(text); });
    EXPECT_THAT(message, HasSubstr(fmt::format("device plan '{}': expected", text))) << text;
    EXPECT_THAT(message, HasSubstr(expected)) << text;
  }
}

// A launch's own group has no live record: it is held under a number above every generation's.
TEST(DevicePlan, TheLaunchsCommunicatorIsNamedByItsStart) {
  EXPECT_EQ(communicatorName(4), "generation 4's communicator");
  EXPECT_EQ(communicatorName(launchGroupGeneration(3)), "the launch's communicator (start 3)");
  EXPECT_NE(launchGroupGeneration(0), 0u);
  const auto launch = makeLiveGeneration(launchGroupGeneration(0), 0,
                                         {{"a", 0}, {"a", 1}, {"b", 0}, {"b", 1}}, 0, 0, 0);
  const auto next = generation(1, {{"a", 0}, {"b", 0}, {"b", 1}});
  const auto h = launchGroupGeneration(0);
  const auto plan = planDeviceGeneration(ncclFeatures(2, 28, 9), launch, next, {h, h, h});
  EXPECT_EQ(plan.path, DevicePath::Shrink);
  EXPECT_EQ(plan.parent, h);
  EXPECT_THAT(plan.reason, HasSubstr("3 survivors shrink the launch's communicator (start 0)"));
  EXPECT_EQ(parseDevicePlan(formatDevicePlan(plan)), plan);
}

TEST(DevicePlan, PathsHaveTheirTextNames) {
  EXPECT_EQ(toString(DevicePath::Init), "init");
  EXPECT_EQ(toString(DevicePath::Shrink), "shrink");
  EXPECT_EQ(toString(DevicePath::ShrinkGrow), "shrink+grow");
}

// ---- properties ---------------------------------------------------------------------------

// Workers of up to 4 nodes ("n0".."n3") with local ranks 0..3, grouped by node (in a random
// node order) and ascending on each node, as the agent numbers them.
// A random subset of 0..3, ascending.
std::vector<int> genSubset() {
  std::vector<int> subset;
  for (int i = 0; i < 4; ++i) {
    if (*rc::gen::arbitrary<bool>())
      subset.push_back(i);
  }
  return subset;
}

Members genMembers() {
  auto nodes = genSubset();
  for (std::size_t i = 1; i < nodes.size(); ++i)
    std::swap(nodes[i], nodes[*rc::gen::inRange<std::size_t>(0, i + 1)]);
  Members members;
  for (const int node : nodes) {
    for (const int local : genSubset())
      members.emplace_back(fmt::format("n{}", node), local);
  }
  return members;
}

comm::CommunicatorFeatures genFeatures() {
  auto features =
      ncclFeatures(*rc::gen::inRange(2, 4), *rc::gen::inRange(24, 33), *rc::gen::inRange(0, 10));
  if (*rc::gen::inRange(0, 4) == 0) {
    // A library capped by older headers: any combination of calls.
    features.shrink = *rc::gen::arbitrary<bool>();
    features.revoke = *rc::gen::arbitrary<bool>();
    features.grow = *rc::gen::arbitrary<bool>();
    features.abortParentAfterAbortiveShrink = *rc::gen::arbitrary<bool>();
  }
  return features;
}

// A parent, a next generation and what each of next's members holds: mostly the parent's
// communicator when the worker was in it, else nothing or an older one; now and then the parent's
// generation for a worker it never had (a confused member must not break the plan).
struct Scenario {
  std::optional<LiveGeneration> parent;
  LiveGeneration next;
  std::vector<std::uint64_t> held;
  std::vector<bool> aborted;  // some of those holding nothing lost it to an abort
};

Scenario genScenario() {
  Scenario s;
  const std::uint64_t parentGen = *rc::gen::inRange<std::uint64_t>(2, 9);
  const auto parentMembers = genMembers();
  // Mostly the parent's workers that survived (now and then two swapped), then joiners on new
  // nodes; sometimes any workers at all.
  Members nextMembers;
  if (*rc::gen::inRange(0, 4) == 0) {
    nextMembers = genMembers();
  } else {
    for (const auto& member : parentMembers) {
      if (*rc::gen::inRange(0, 4) != 0)
        nextMembers.push_back(member);
    }
    if (nextMembers.size() > 1 && *rc::gen::inRange(0, 4) == 0)
      std::swap(nextMembers[*rc::gen::inRange<std::size_t>(0, nextMembers.size())],
                nextMembers[*rc::gen::inRange<std::size_t>(0, nextMembers.size())]);
    if (*rc::gen::arbitrary<bool>()) {
      for (const int local : genSubset())
        nextMembers.emplace_back("n4", local);
    }
  }
  RC_PRE(!parentMembers.empty() && !nextMembers.empty());
  s.parent = generation(parentGen, parentMembers);
  s.next = generation(parentGen + 1, nextMembers);
  for (const auto& [node, local] : nextMembers) {
    const bool wasIn = s.parent->rankOf(node, local) >= 0;
    const int roll = *rc::gen::inRange(0, 10);
    s.held.push_back(roll < (wasIn ? 8 : 1) ? parentGen : (roll % 2 ? 0 : parentGen - 1));
  }
  // The caller reads the record of the generation rank 0 holds: that is the parent.
  if (s.held[0] != 0)
    s.held[0] = parentGen;
  for (const std::uint64_t h : s.held)
    s.aborted.push_back(h == 0 && *rc::gen::inRange(0, 3) == 0);
  if (s.held[0] == 0 && *rc::gen::arbitrary<bool>())
    s.parent.reset();  // with rank 0 holding nothing the parent may or may not be given
  return s;
}

// The survivors by the definition, for the property to compare against.
int referenceSurvivors(const Scenario& s) {
  int k = 0;
  std::int64_t last = -1;
  for (const auto& node : s.next.nodes) {
    // A node one of whose ranks lost its communicator to an abort gives no survivor.
    bool whole = true;
    for (std::size_t i = 0; i < node.localRanks.size(); ++i)
      whole = whole && !s.aborted[static_cast<std::size_t>(node.firstRank) + i];
    for (std::size_t i = 0; i < node.localRanks.size(); ++i) {
      const auto rank = node.firstRank + static_cast<std::int64_t>(i);
      const auto inParent = s.parent->rankOf(node.nodeId, node.localRanks[i]);
      if (!whole || rank != k || s.held[static_cast<std::size_t>(rank)] != s.held[0] ||
          inParent <= last)
        return k;
      last = inParent;
      ++k;
    }
  }
  return k;
}

RC_GTEST_PROP(DevicePlan, PlansFollowTheRulesAndRoundTrip, ()) {
  const auto s = genScenario();
  const auto features = genFeatures();
  auto plan = planDeviceGeneration(features, s.parent, s.next, s.held, s.aborted);

  RC_TAG(std::string(toString(plan.path)));  // printed: how often each path was tried
  RC_ASSERT(plan.reason.starts_with("NCCL " + features.version()));
  const int k = s.held[0] == 0 ? 0 : referenceSurvivors(s);
  const bool joiners = k < s.next.worldSize;
  const bool init = !features.shrink || s.held[0] == 0 || k == 0 || (joiners && !features.grow);
  RC_ASSERT((plan.path == DevicePath::Init) == init);
  if (init) {
    RC_ASSERT(plan.parent == 0u && plan.survivors == 0 && plan.excluded.empty());
    RC_ASSERT(!plan.abortiveShrink && !plan.abortParent);
  } else {
    RC_ASSERT(plan.path == (joiners ? DevicePath::ShrinkGrow : DevicePath::Shrink));
    RC_ASSERT(plan.parent == s.held[0]);
    RC_ASSERT(plan.survivors == k);
    RC_ASSERT(plan.abortiveShrink == !features.revoke);
    RC_ASSERT(plan.abortParent == (!features.revoke && features.abortParentAfterAbortiveShrink));
    // Survivors hold the parent's communicator and keep its order.
    std::vector<int> survivorRanks;
    for (const auto& node : s.next.nodes) {
      for (std::size_t i = 0; i < node.localRanks.size(); ++i) {
        const auto rank = node.firstRank + static_cast<std::int64_t>(i);
        if (rank < plan.survivors) {
          RC_ASSERT(s.held[static_cast<std::size_t>(rank)] == plan.parent);
          survivorRanks.push_back(
              static_cast<int>(s.parent->rankOf(node.nodeId, node.localRanks[i])));
        }
      }
    }
    RC_ASSERT(static_cast<int>(survivorRanks.size()) == plan.survivors);
    RC_ASSERT(std::is_sorted(survivorRanks.begin(), survivorRanks.end()));
    RC_ASSERT(std::adjacent_find(survivorRanks.begin(), survivorRanks.end()) ==
              survivorRanks.end());
    RC_ASSERT(survivorRanks.front() >= 0);
    // Excluded and survivors split the parent's ranks.
    RC_ASSERT(std::is_sorted(plan.excluded.begin(), plan.excluded.end()));
    std::set<int> all(plan.excluded.begin(), plan.excluded.end());
    RC_ASSERT(all.size() == plan.excluded.size());
    for (const int r : survivorRanks)
      RC_ASSERT(all.insert(r).second);
    RC_ASSERT(static_cast<std::int64_t>(all.size()) == s.parent->worldSize);
    RC_ASSERT(*all.begin() == 0 && *all.rbegin() == s.parent->worldSize - 1);
  }

  if (plan.path == DevicePath::Init && *rc::gen::arbitrary<bool>())
    plan.uniqueId = *rc::gen::nonEmpty(
        rc::gen::container<std::string>(rc::gen::elementOf(std::string_view("0123456789abcdef"))));
  RC_ASSERT(parseDevicePlan(formatDevicePlan(plan)) == plan);
}

// Any text near a plan's: it reads as a plan (which then round-trips) or is refused with a
// CommError; nothing else escapes and nothing crashes.
RC_GTEST_PROP(DevicePlan, MutilatedTextParsesOrIsRefused, ()) {
  const auto s = genScenario();
  auto plan = planDeviceGeneration(genFeatures(), s.parent, s.next, s.held, s.aborted);
  if (plan.path == DevicePath::Init)
    plan.uniqueId = "0a1b2c3d";
  std::string text = formatDevicePlan(plan);
  const std::string alphabet = "0123456789 ,-\n+\rinitshrkgow\t";
  const int edits = *rc::gen::inRange(1, 6);
  for (int e = 0; e < edits; ++e) {
    const auto at = *rc::gen::inRange<std::size_t>(0, text.size() + 1);
    const char c = *rc::gen::elementOf(alphabet);
    switch (*rc::gen::inRange(0, 5)) {
      case 0:
        if (at < text.size())
          text.erase(at, 1);
        break;
      case 1:
        text.insert(at, 1, c);
        break;
      case 2:
        if (at < text.size())
          text[at] = c;
        break;
      case 3:
        text.resize(at);
        break;
      default:
        text.insert(at, text.substr(0, at));  // a repeated stretch
        break;
    }
  }
  try {
    const auto parsed = parseDevicePlan(text);
    RC_ASSERT(parseDevicePlan(formatDevicePlan(parsed)) == parsed);
  } catch (const CommError& e) {
    RC_ASSERT(std::string(e.what()).find("device plan '") != std::string::npos);
  }
}

}  // namespace
}  // namespace stretch::live
