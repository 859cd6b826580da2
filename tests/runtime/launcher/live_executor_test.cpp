// LiveExecutor (runtime/launcher/live_executor.hpp), the one executor of live plans for one host
// and for many, with a recording transport, an in-process store and an injected clock: what it
// publishes, what it asks the transport to do, when it releases donors and publishes the
// generation its joiners wait for, and the situation it reports.

#include "runtime/launcher/live_executor.hpp"

#include <gtest/gtest.h>

#include "runtime/comm/store.hpp"
#include "runtime/launcher/launch_defaults.hpp"
#include "runtime/live/generation.hpp"

namespace stretch::launcher {
namespace {

using namespace std::chrono_literals;

struct Adopt {
  std::uint64_t target = 0;
  LocalsByNode keep;
  LocalsByNode join;
  std::uint64_t liveGeneration = 0;
  bool signal = false;
};

class RecordingTransport final : public LiveTransport {
 public:
  std::vector<RunningWorkerInfo> liveWorkers() const override { return running; }
  void adopt(const agent::StartWorkers& target, const LocalsByNode& keep, const LocalsByNode& join,
             std::uint64_t liveGeneration, bool signal) override {
    adopts.push_back({target.generation, keep, join, liveGeneration, signal});
  }
  void signal(const LocalsByNode& workers) override { signals.push_back(workers); }

  std::vector<RunningWorkerInfo> running;
  std::vector<Adopt> adopts;
  std::vector<LocalsByNode> signals;
};

agent::StartWorkers generation(std::uint64_t n, std::int64_t workers) {
  agent::StartWorkers s;
  s.generation = n;
  s.worldSize = workers;
  s.dataParallelSize = workers;
  s.batch = config::BatchTriple{4 * workers, 2, 2};
  s.nodes = agent::NodeSequence{agent::NodeAssignment{"a", 0, 0, workers, 4}};
  return s;
}

// Rank 1 of 4 died: ranks 0 and 2 train in an interim world of 2, rank 3 gives them the
// partition only it holds and is stopped afterwards; rank 1's replacement joins generation 2.
agent::LivePlan interimPlan() {
  agent::LivePlan plan;
  plan.live = true;
  plan.keep = {{"a", {0, 2}}};
  plan.join = {{"a", {1}}};
  plan.publish = agent::LiveMembers{{{"a", 0}, {"a", 2}}, {8, 2, 2}, {{"a", 3}}};
  plan.releaseAfterDonating = {{"a", 3}};
  plan.awaitJoiners = true;
  return plan;
}

struct Fixture {
  explicit Fixture(bool batchContract = true)
      : executor(
            store, transport, [this] { return now; }, "test", batchContract) {}
  comm::HashStore store;
  RecordingTransport transport;
  agent::Time now{0};
  LiveExecutor executor;
};

TEST(LiveExecutor, PublishesTheInterimWorldKeepsItsDonorsAndStartsTheJoiners) {
  Fixture f;
  f.executor.started(generation(1, 4));
  f.executor.carryOut(generation(2, 3), interimPlan());

  ASSERT_EQ(f.transport.adopts.size(), 1u);
  const Adopt& a = f.transport.adopts[0];
  EXPECT_EQ(a.target, 2u);
  EXPECT_EQ(a.keep, (LocalsByNode{{"a", {0, 2, 3}}}));  // the donor stays until it gave
  EXPECT_EQ(a.join, (LocalsByNode{{"a", {1}}}));
  EXPECT_EQ(a.liveGeneration, 2u);  // the joiners join the generation reserved for them
  EXPECT_TRUE(a.signal);
  ASSERT_EQ(live::latestLiveGeneration(f.store), 1u);
  const auto interim = live::parseLiveGeneration(f.store.get(live::live_keys::generation(1)));
  EXPECT_EQ(interim.worldSize, 2);
  EXPECT_EQ(interim.trainBatchSize, 8);
  ASSERT_EQ(interim.donors.size(), 1u);
  EXPECT_TRUE(f.executor.awaitingJoiners());
  EXPECT_EQ(f.executor.situation().group, (std::vector<agent::WorkerPlace>{{"a", 0}, {"a", 2}}));

  f.executor.poll();  // nobody donated, nobody is ready
  EXPECT_EQ(f.transport.adopts.size(), 1u);
  EXPECT_TRUE(f.transport.signals.empty());

  f.store.add(live::live_keys::donated(1), 1);
  f.executor.poll();  // the donor gave its copy: everyone but it stays
  ASSERT_EQ(f.transport.adopts.size(), 2u);
  EXPECT_EQ(f.transport.adopts[1].keep, (LocalsByNode{{"a", {0, 1, 2}}}));
  EXPECT_TRUE(f.transport.adopts[1].join.empty());
  EXPECT_FALSE(f.transport.adopts[1].signal);

  f.store.add(live::live_keys::ready(2), 1);
  f.executor.poll();  // the joiner is ready: generation 2 of 3 workers, the survivors told
  ASSERT_EQ(f.transport.signals.size(), 1u);
  EXPECT_EQ(f.transport.signals[0], (LocalsByNode{{"a", {0, 2}}}));
  EXPECT_EQ(live::latestLiveGeneration(f.store), 2u);
  EXPECT_EQ(live::parseLiveGeneration(f.store.get(live::live_keys::generation(2))).worldSize, 3);
  EXPECT_FALSE(f.executor.awaitingJoiners());
  EXPECT_EQ(f.executor.situation().group.size(), 3u);
  f.executor.poll();
  EXPECT_EQ(f.transport.signals.size(), 1u);  // once
}

TEST(LiveExecutor, ReleasesDonorsThatNeverSayAfterTheWaitOnItsClock) {
  Fixture f;
  f.executor.started(generation(1, 4));
  f.executor.carryOut(generation(2, 3), interimPlan());
  f.now = kDonorReleaseWait;
  f.executor.poll();
  EXPECT_EQ(f.transport.adopts.size(), 1u);
  f.now = kDonorReleaseWait + 1ns;
  f.executor.poll();
  ASSERT_EQ(f.transport.adopts.size(), 2u);
  EXPECT_EQ(f.transport.adopts[1].keep, (LocalsByNode{{"a", {0, 1, 2}}}));
}

TEST(LiveExecutor, AStopForgetsWhatWasPending) {
  Fixture f;
  f.executor.started(generation(1, 4));
  f.executor.carryOut(generation(2, 3), interimPlan());
  f.executor.stopped();
  f.store.add(live::live_keys::donated(1), 1);
  f.store.add(live::live_keys::ready(2), 1);
  f.executor.poll();
  EXPECT_EQ(f.transport.adopts.size(), 1u);
  EXPECT_TRUE(f.transport.signals.empty());
  EXPECT_EQ(live::latestLiveGeneration(f.store), 1u);
}

// Without the launcher's --config the agent's batch is a stand-in: the records carry none, and
// each worker's own config decides (Engine::rejoin).
TEST(LiveExecutor, WithoutABatchContractTheRecordsCarryNoBatch) {
  Fixture f(false);
  f.executor.started(generation(1, 4));
  f.executor.carryOut(generation(2, 3), interimPlan());
  f.store.add(live::live_keys::ready(2), 1);
  f.executor.poll();
  for (const std::uint64_t n : {1u, 2u}) {
    const auto record = live::parseLiveGeneration(f.store.get(live::live_keys::generation(n)));
    EXPECT_EQ(record.trainBatchSize, 0) << n;
    EXPECT_EQ(record.microBatch, 0) << n;
    EXPECT_EQ(record.gradientAccumulation, 0) << n;
  }
}

TEST(LiveExecutor, SituationReadsWhatEachWorkerSaid) {
  Fixture f;
  f.executor.started(generation(1, 2));
  f.transport.running = {{{"a", 0}, 10, false}, {{"a", 1}, 11, true}};
  f.store.set(live::live_keys::capable("a", 10), live::live_keys::kCapableWithCopies);
  const agent::LiveSituation s = f.executor.situation();
  EXPECT_EQ(s.group, (std::vector<agent::WorkerPlace>{{"a", 0}, {"a", 1}}));
  EXPECT_EQ(s.copyDistance, 2);
  EXPECT_TRUE(s.partitionCopies);
  ASSERT_EQ(s.running.size(), 2u);
  EXPECT_TRUE(s.running[0].capable);
  EXPECT_FALSE(s.running[0].joiner);
  EXPECT_FALSE(s.running[1].capable);  // no live/capable key yet
  EXPECT_TRUE(s.running[1].joiner);
}

}  // namespace
}  // namespace stretch::launcher
