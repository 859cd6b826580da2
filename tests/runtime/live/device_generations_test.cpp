#include "runtime/live/device_generations.hpp"

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/comm/errors.hpp"
#include "runtime/common/error.hpp"
#include "tests/support/fake_communicator.hpp"

namespace stretch::live {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

// One worker process: where it runs (node, local rank), its name in the fake NCCL and its
// communicators across generations.
struct Worker {
  std::string node;
  std::int64_t localRank = 0;
  std::string process;
  std::unique_ptr<DeviceGenerations> generations;
  std::shared_ptr<comm::Backend> backend;  // of the last generation it entered
};

// What one worker's enter() gave.
struct Entered {
  std::shared_ptr<comm::Backend> backend;
  std::exception_ptr error;
};

class DeviceGenerationsTest : public ::testing::Test {
 protected:
  void useLibrary(const comm::CommunicatorFeatures& features) {
    nccl_ = std::make_unique<test::FakeNccl>(features);
  }
  void useVersion(int minor) { useLibrary(comm::ncclFeatures(2, minor, 0)); }

  // A worker of `node`; `incarnation` > 0 names a replacement process started in its place.
  Worker* worker(const std::string& node, std::int64_t localRank, int incarnation = 0) {
    auto added = std::make_unique<Worker>();
    added->node = node;
    added->localRank = localRank;
    added->process = incarnation == 0 ? fmt::format("{}/{}", node, localRank)
                                      : fmt::format("{}/{}#{}", node, localRank, incarnation);
    added->generations =
        std::make_unique<DeviceGenerations>(nccl_->library(added->process), node, localRank);
    workers_.push_back(std::move(added));
    return workers_.back().get();
  }
  // Nodes A and B with two ranks each, in rank order A0 A1 B0 B1.
  std::vector<Worker*> fourWorkers() {
    return {worker("A", 0), worker("A", 1), worker("B", 0), worker("B", 1)};
  }

  static LiveGeneration recordOf(std::uint64_t n, const std::vector<Worker*>& members) {
    std::vector<std::pair<std::string, std::int64_t>> ranks;
    for (const Worker* member : members)
      ranks.emplace_back(member->node, member->localRank);
    return makeLiveGeneration(n, n, ranks, 0, 0, 0);
  }

  // Publishes generation `n` of `members` (in rank order) and has `entering` (all members by
  // default) enter it, each on a thread of its own.
  std::vector<Entered> enter(std::uint64_t n, const std::vector<Worker*>& members,
                             comm::Duration timeout = 5s, const comm::Interrupt& interrupt = {},
                             std::optional<std::vector<Worker*>> entering = std::nullopt) {
    const LiveGeneration record = recordOf(n, members);
    publishLiveGeneration(*root_, record);
    comm::PrefixStore group(live_keys::groupPrefix(n), root_);
    const std::vector<Worker*>& who = entering ? *entering : members;
    std::vector<Entered> entered(who.size());
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < who.size(); ++i) {
      threads.emplace_back([&, i] {
        try {
          entered[i].backend =
              who[i]->generations->enter(record, group, *root_, timeout, interrupt);
          who[i]->backend = entered[i].backend;
        } catch (...) {
          entered[i].error = std::current_exception();
        }
      });
    }
    for (auto& thread : threads)
      thread.join();
    return entered;
  }
  // As enter(), expecting every member in.
  void enterAll(std::uint64_t n, const std::vector<Worker*>& members) {
    const auto entered = enter(n, members);
    for (std::size_t i = 0; i < entered.size(); ++i) {
      if (entered[i].error) {
        try {
          std::rethrow_exception(entered[i].error);
        } catch (const std::exception& e) {
          ADD_FAILURE() << "rank " << i << " of generation " << n << ": " << e.what();
        }
      }
    }
  }

  // Rank r of each member's backend contributes r + 1 to an allReduce (Sum), issued without
  // waiting; the values the Works write.
  struct Reduction {
    std::vector<float> values;
    std::vector<std::shared_ptr<comm::Work>> works;
  };
  static std::unique_ptr<Reduction> startAllReduce(const std::vector<Worker*>& members) {
    auto reduction = std::make_unique<Reduction>();
    reduction->values.resize(members.size());
    for (std::size_t i = 0; i < members.size(); ++i) {
      const auto& backend = members[i]->backend;
      reduction->values[i] = static_cast<float>(backend->rank() + 1);
      reduction->works.push_back(
          backend->allReduce(comm::BufferView::of(std::span(&reduction->values[i], 1)),
                             comm::ReduceOp::Sum, comm::CollectiveOptions{5s}));
    }
    return reduction;
  }
  static std::vector<float> allReduce(const std::vector<Worker*>& members) {
    const auto reduction = startAllReduce(members);
    for (const auto& work : reduction->works)
      work->wait(5s);
    return reduction->values;
  }

  // `worker` alone issues an allReduce, which times out: the watchdog aborts its communicator.
  static void timeOut(Worker* worker) {
    float value = 1.0f;
    const auto work =
        worker->backend->allReduce(comm::BufferView::of(std::span(&value, 1)), comm::ReduceOp::Sum,
                                   comm::CollectiveOptions{50ms});
    EXPECT_THROW(work->wait(5s), comm::CommTimeoutError);
  }

  // Generation 1 over `members`; then `dead` dies while the others wait in an allReduce it
  // never joins, and the supersession watch (another thread) revokes the survivors'.
  void failDuringAllReduce(const std::vector<Worker*>& members, Worker* dead) {
    enterAll(1, members);
    std::vector<Worker*> survivors;
    for (Worker* member : members) {
      if (member != dead)
        survivors.push_back(member);
    }
    const auto reduction = startAllReduce(survivors);
    nccl_->kill(dead->process);
    const auto start = Clock::now();
    std::thread([&] {
      for (Worker* survivor : survivors)
        survivor->generations->supersede("live generation 2 was published");
    }).join();
    for (const auto& work : reduction->works)
      EXPECT_THROW(work->wait(5s), comm::CommPeerError);
    EXPECT_LT(Clock::now() - start, 1s);
  }

  // Generation 1 of fourWorkers(); B1 dies during an allReduce; generation 2 of A0 A1 B0 or,
  // with a `replacement` worker for B1, of A0 A1 B0 and it. Checks that the generation's
  // allReduce works (every member in, each holding generation 2) and that the fake NCCL caught
  // no misuse; returns the plan.
  DevicePlan recoverFromB1(const std::function<Worker*()>& replacement = {}) {
    auto members = fourWorkers();
    failDuringAllReduce(members, members[3]);
    if (replacement)
      members[3] = replacement();
    else
      members.pop_back();
    enterAll(2, members);
    const float sum = replacement ? 10.0f : 6.0f;
    EXPECT_THAT(allReduce(members), ::testing::Each(sum));
    for (const Worker* member : members) {
      EXPECT_EQ(member->generations->held(), 2u) << member->process;
      EXPECT_EQ(planOf(member), planOf(members[0])) << member->process;
    }
    EXPECT_THAT(nccl_->traps(), ::testing::IsEmpty());
    return planOf(members[0]);
  }

  // What the fake NCCL counted: {init, shrink, grow, join, destroy}.
  std::vector<int> counts() const {
    const auto counted = nccl_->counts();
    return {counted.init, counted.shrink, counted.grow, counted.join, counted.destroy};
  }

  static DevicePlan planOf(const Worker* worker) {
    const auto plan = worker->generations->lastPlan();
    EXPECT_TRUE(plan.has_value()) << worker->process << " has no plan";
    return plan.value_or(DevicePlan{});
  }

  std::shared_ptr<comm::HashStore> root_ = std::make_shared<comm::HashStore>(5s);
  std::unique_ptr<test::FakeNccl> nccl_;
  // Declared after the library: workers abort what they hold before the fake NCCL goes.
  std::vector<std::unique_ptr<Worker>> workers_;
};

TEST(DeviceAbortKey, NamesTheGenerationAndTheNode) {
  EXPECT_EQ(live_keys::deviceAbort(7, "node-3"), "live/device_abort/7/node-3");
}

TEST_F(DeviceGenerationsTest, TheFirstGenerationInitialisesAndItsBackendsReduce) {
  useVersion(29);
  const auto members = fourWorkers();
  enterAll(1, members);
  for (const Worker* member : members) {
    EXPECT_EQ(member->generations->held(), 1u) << member->process;
    EXPECT_EQ(planOf(member).path, DevicePath::Init) << member->process;
  }
  EXPECT_THAT(allReduce(members), ElementsAre(10.0f, 10.0f, 10.0f, 10.0f));
  EXPECT_EQ(nccl_->counts().init, 4);
  EXPECT_EQ(nccl_->liveCommunicators(), 4);
}

TEST_F(DeviceGenerationsTest, AWorkerThatIsNoMemberIsABug) {
  useVersion(29);
  const auto members = fourWorkers();
  Worker* stranger = worker("C", 0);
  comm::PrefixStore group(live_keys::groupPrefix(1), root_);
  EXPECT_THROW(stranger->generations->enter(recordOf(1, members), group, *root_, 1s, {}),
               InternalError);
}

TEST_F(DeviceGenerationsTest, SurvivorsOfAKilledPeerAreRevokedThenShrinkWithoutIt) {
  useVersion(28);
  const DevicePlan plan = recoverFromB1();
  EXPECT_EQ(plan.path, DevicePath::Shrink);
  EXPECT_EQ(plan.parent, 1u);
  EXPECT_THAT(plan.excluded, ElementsAre(3));
  EXPECT_FALSE(plan.abortiveShrink);
  // No init but the first generation's; the revoked parents destroyed.
  EXPECT_THAT(counts(), ElementsAre(4, 3, 0, 0, 3));
}

TEST_F(DeviceGenerationsTest, TheBackendsAbortRevokesSoTheCommunicatorStaysAParent) {
  useVersion(28);
  const auto members = fourWorkers();
  enterAll(1, members);
  // The engine abandons the step (ProcessGroup::abort) on every rank.
  for (Worker* member : members)
    member->backend->abort("step abandoned");
  for (const Worker* member : members)
    EXPECT_EQ(member->generations->held(), 1u) << member->process << " still holds a parent";
  std::vector<std::shared_ptr<comm::Backend>> firsts;
  for (const Worker* member : members)
    firsts.push_back(member->backend);
  enterAll(2, members);
  EXPECT_EQ(planOf(members[0]).path, DevicePath::Shrink);
  EXPECT_TRUE(planOf(members[0]).excluded.empty());
  EXPECT_THAT(allReduce(members), ElementsAre(10.0f, 10.0f, 10.0f, 10.0f));
  EXPECT_EQ(nccl_->counts().init, 4);
  // A late abort of the first generation's backend never reaches its destroyed communicator.
  const int revoked = nccl_->counts().revoke;
  for (const auto& first : firsts)
    first->abort("a late supersession watch");
  EXPECT_EQ(nccl_->counts().revoke, revoked);
  EXPECT_THAT(nccl_->traps(), ::testing::IsEmpty());
}

TEST_F(DeviceGenerationsTest, AReplacementGrowsTheShrunkCommunicatorFrom229) {
  useVersion(29);
  // The replacement runs on a spare node (on B, B0 would join too: a node whose ranks do not
  // all hold the parent gives no survivor).
  const DevicePlan plan = recoverFromB1([&] { return worker("C", 0); });
  EXPECT_EQ(plan.path, DevicePath::ShrinkGrow);
  EXPECT_EQ(plan.survivors, 3);
  EXPECT_THAT(plan.excluded, ElementsAre(3));
  EXPECT_THAT(counts(), ElementsAre(4, 3, ::testing::Ge(1), 1, ::testing::_));
}

TEST_F(DeviceGenerationsTest, AReplacementOn228ReinitialisesEveryone) {
  useVersion(28);
  const DevicePlan plan = recoverFromB1([&] { return worker("B", 1, 1); });
  EXPECT_EQ(plan.path, DevicePath::Init);
  EXPECT_THAT(plan.reason, HasSubstr("ncclCommGrow"));
  EXPECT_THAT(plan.reason, HasSubstr("2.29"));
  // The survivors' old communicators were aborted, never destroyed: B1 died.
  EXPECT_THAT(counts(), ElementsAre(8, 0, 0, 0, 0));
}

TEST_F(DeviceGenerationsTest, Without227RevokeTheShrinkIsAbortive) {
  useVersion(27);
  const DevicePlan plan = recoverFromB1();
  EXPECT_EQ(plan.path, DevicePath::Shrink);
  EXPECT_TRUE(plan.abortiveShrink);
  EXPECT_FALSE(plan.abortParent);
}

TEST_F(DeviceGenerationsTest, On231TheRevokedParentIsDestroyed) {
  useVersion(31);
  EXPECT_FALSE(recoverFromB1().abortiveShrink);
  EXPECT_EQ(nccl_->counts().destroy, 3);
}

TEST_F(DeviceGenerationsTest, TheParentOfAnAbortiveShrinkOn231IsAbortedNotDestroyed) {
  // A 2.31 library whose revoke this build cannot reach (headers before 2.28): the shrink is
  // abortive, and destroying its parent would hang.
  auto features = comm::ncclFeatures(2, 31, 0);
  features.revoke = false;
  useLibrary(features);
  const DevicePlan plan = recoverFromB1();
  EXPECT_TRUE(plan.abortiveShrink);
  EXPECT_TRUE(plan.abortParent);
  EXPECT_EQ(nccl_->counts().destroy, 0);
}

TEST_F(DeviceGenerationsTest, ANodesRanksAbortTogether) {
  useVersion(29);
  const auto members = fourWorkers();
  enterAll(1, members);
  Worker* a0 = members[0];
  Worker* a1 = members[1];
  timeOut(a0);
  EXPECT_EQ(a0->generations->held(), 0u);
  // Nothing published yet: A1 keeps its communicator until A0's watch says so.
  a1->generations->poll(*root_);
  EXPECT_EQ(a1->generations->held(), 1u);

  a0->generations->poll(*root_);
  EXPECT_TRUE(root_->check({live_keys::deviceAbort(1, "A")}));
  a1->generations->poll(*root_);
  EXPECT_EQ(a1->generations->held(), 0u);
  for (Worker* b : {members[2], members[3]}) {
    b->generations->poll(*root_);
    EXPECT_EQ(b->generations->held(), 1u) << b->process;
  }
  EXPECT_EQ(nccl_->liveCommunicators("A/0"), 0);
  EXPECT_EQ(nccl_->liveCommunicators("A/1"), 0);

  // B's ranks hold the parent (ranks 2 and 3 of generation 1, in order): they shrink it
  // without A's and A's ranks join.
  const std::vector<Worker*> next = {members[2], members[3], a0, a1};
  enterAll(2, next);
  const DevicePlan plan = planOf(next[0]);
  EXPECT_EQ(plan.path, DevicePath::ShrinkGrow);
  EXPECT_EQ(plan.survivors, 2);
  EXPECT_THAT(plan.excluded, ElementsAre(0, 1));
  EXPECT_THAT(allReduce(next), ElementsAre(10.0f, 10.0f, 10.0f, 10.0f));
  EXPECT_THAT(nccl_->traps(), ::testing::IsEmpty());
}

TEST_F(DeviceGenerationsTest, ANodeAbortPublishedBeforeAGenerationIsSeenOnEntering) {
  useVersion(29);
  const auto members = fourWorkers();
  enterAll(1, members);
  timeOut(members[1]);
  members[1]->generations->poll(*root_);
  // A1 is gone; A0's watch never polled. Entering, A0 still learns that its node aborted and
  // holds nothing, rather than shrinking beside its aborted intra-node peer.
  const std::vector<Worker*> next = {members[0], members[2], members[3]};
  enterAll(2, next);
  EXPECT_EQ(planOf(members[0]).path, DevicePath::Init);
  EXPECT_EQ(nccl_->counts().shrink, 0);
  EXPECT_THAT(allReduce(next), ElementsAre(6.0f, 6.0f, 6.0f));
}

TEST_F(DeviceGenerationsTest, TheWatchPollsWhileWorkersShrinkAndDestroyTheirParents) {
  useVersion(28);
  const auto members = fourWorkers();
  std::atomic<bool> done = false;
  // Each worker's supersession watch, polling far more often than the engine's through two
  // generations.
  std::vector<std::thread> watches;
  for (Worker* member : members) {
    watches.emplace_back([&, member] {
      while (!done) {
        member->generations->poll(*root_);
        std::this_thread::sleep_for(100us);
      }
    });
  }
  failDuringAllReduce(members, members[3]);
  const std::vector<Worker*> survivors(members.begin(), members.begin() + 3);
  enterAll(2, survivors);
  done = true;
  for (auto& watch : watches)
    watch.join();
  EXPECT_EQ(planOf(survivors[0]).path, DevicePath::Shrink);
  EXPECT_THAT(allReduce(survivors), ElementsAre(6.0f, 6.0f, 6.0f));
  EXPECT_THAT(nccl_->traps(), ::testing::IsEmpty());
}

TEST_F(DeviceGenerationsTest, ThePathIsLoggedOnceUntilItChanges) {
  std::ostringstream log;
  const auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "device_generations_test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  useVersion(28);
  const auto members = fourWorkers();
  failDuringAllReduce(members, members[3]);           // Init, logged
  enterAll(2, {members[0], members[1], members[2]});  // Shrink, logged
  enterAll(3, {members[0], members[1], members[2]});  // Shrink again
  enterAll(4, {members[0], members[1]});              // and again
  spdlog::set_default_logger(previous);
  const std::string text = log.str();
  std::vector<std::string> lines;
  for (std::size_t at = text.find("device communicator by"); at != std::string::npos;
       at = text.find("device communicator by", at + 1)) {
    lines.push_back(text.substr(at, text.find('\n', at) - at));
  }
  ASSERT_EQ(lines.size(), 2u) << text;
  EXPECT_THAT(lines[0], HasSubstr(fmt::format("by {}:", toString(DevicePath::Init))));
  EXPECT_THAT(lines[1], HasSubstr(fmt::format("by {}:", toString(DevicePath::Shrink))));
  EXPECT_EQ(planOf(members[0]).path, DevicePath::Shrink);
  EXPECT_EQ(members[0]->generations->held(), 4u);
}

TEST_F(DeviceGenerationsTest, AnInterruptEndsAWaitForAMemberThatNeverArrives) {
  useVersion(29);
  Worker* a0 = worker("A", 0);
  Worker* a1 = worker("A", 1);
  enterAll(1, {a0});
  ASSERT_EQ(a0->generations->held(), 1u);
  const auto start = Clock::now();
  const comm::Interrupt interrupt = [start] { return Clock::now() - start > 100ms; };
  const auto entered = enter(2, {a0, a1}, 5s, interrupt, std::vector<Worker*>{a0});
  const auto took = Clock::now() - start;
  ASSERT_TRUE(entered[0].error);
  EXPECT_THROW(std::rethrow_exception(entered[0].error), comm::CommAbortedError);
  EXPECT_GE(took, 100ms);
  EXPECT_LT(took, 1s);
  EXPECT_EQ(a0->generations->held(), 0u);
  EXPECT_EQ(nccl_->liveCommunicators("A/0"), 0);
}

TEST_F(DeviceGenerationsTest, AFailedShrinkLeavesNothingHeld) {
  useVersion(28);
  const auto members = fourWorkers();
  enterAll(1, members);
  // B0 dies after saying what it holds: its shrink fails at once, the others' waits for it
  // until the generation is superseded.
  nccl_->kill(members[2]->process);
  const auto start = Clock::now();
  const comm::Interrupt interrupt = [start] { return Clock::now() - start > 100ms; };
  const std::vector<Worker*> survivors(members.begin(), members.begin() + 3);
  const auto entered = enter(2, survivors, 5s, interrupt);
  EXPECT_LT(Clock::now() - start, 1s);
  for (std::size_t i = 0; i < entered.size(); ++i) {
    ASSERT_TRUE(entered[i].error) << survivors[i]->process;
    EXPECT_THROW(std::rethrow_exception(entered[i].error), comm::CommError);
    EXPECT_EQ(survivors[i]->generations->held(), 0u) << survivors[i]->process;
  }
  EXPECT_EQ(planOf(survivors[0]).path, DevicePath::Shrink);
  EXPECT_EQ(nccl_->liveCommunicators("A/0"), 0);
  EXPECT_EQ(nccl_->liveCommunicators("A/1"), 0);
  // The next generation starts over.
  const std::vector<Worker*> next = {members[0], members[1]};
  enterAll(3, next);
  EXPECT_EQ(planOf(next[0]).path, DevicePath::Init);
  EXPECT_THAT(allReduce(next), ElementsAre(3.0f, 3.0f));
}

TEST_F(DeviceGenerationsTest, AMemberWaitingForThePlanTimesOutNamingIt) {
  useVersion(29);
  Worker* a0 = worker("A", 0);
  Worker* a1 = worker("A", 1);
  const auto start = Clock::now();
  const auto entered = enter(1, {a0, a1}, 200ms, {}, std::vector<Worker*>{a1});
  EXPECT_LT(Clock::now() - start, 1s);
  ASSERT_TRUE(entered[0].error);
  try {
    std::rethrow_exception(entered[0].error);
  } catch (const comm::CommTimeoutError& e) {
    EXPECT_THAT(e.what(), HasSubstr("device/plan"));
  }
  EXPECT_EQ(a1->generations->held(), 0u);
}

TEST_F(DeviceGenerationsTest, AdoptsOnlyACommunicatorItsLibraryMade) {
  useVersion(29);
  const auto library = nccl_->library("A/0");
  std::shared_ptr<comm::Communicator> first = library->init(library->uniqueId(), 0, 1, 1s, {});
  DeviceGenerations generations(library, "A", 0);
  const auto adopted = generations.adopt(3, first->backend());
  ASSERT_NE(adopted, nullptr);
  EXPECT_EQ(generations.held(), 3u);
  // Leaving the launch's group through the backend adopt() gave revokes: the communicator
  // stays the parent of the first live generation.
  adopted->abort("test: the launch's group left");
  EXPECT_FALSE(first->aborted());
  EXPECT_EQ(nccl_->counts().revoke, 1);
  EXPECT_EQ(generations.held(), 3u);

  Worker* b0 = worker("B", 0);
  enterAll(1, {b0});
  EXPECT_EQ(generations.adopt(4, b0->backend), nullptr)
      << "the generation's wrapper is not the library's";
  EXPECT_EQ(generations.held(), 3u);
}

}  // namespace
}  // namespace stretch::live
