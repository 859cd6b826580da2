// ProcessGroup: routing by device, sub-groups, Megatron-style layouts, pipeline broadcast and
// the comms logger hook.

#include "runtime/comm/process_group.hpp"

#include <chrono>

#include <gtest/gtest.h>

#include "runtime/comm/errors.hpp"
#include "runtime/comm/in_process_backend.hpp"

namespace stretch::comm {
namespace {

using namespace std::chrono_literals;

std::shared_ptr<ProcessGroup> groupOf(InProcessWorld& world, int rank) {
  auto group = std::make_shared<ProcessGroup>(rank, world.size());
  group->setBackend(DeviceType::Cpu, world.backend(rank));
  return group;
}

TEST(ProcessGroup, RoutesByDeviceAndNamesWhatIsMissing) {
  InProcessWorld world(1);
  auto group = groupOf(world, 0);
  EXPECT_TRUE(group->hasBackend(DeviceType::Cpu));
  EXPECT_FALSE(group->hasBackend(DeviceType::Cuda));
  std::vector<float> v(3, 2.0f);
  group->allReduce(BufferView::of(std::span(v)))->wait();
  EXPECT_FLOAT_EQ(v[0], 2.0f);
  BufferView gpu = BufferView::of(std::span(v));
  gpu.device = Device::cuda(0);
  try {
    group->allReduce(gpu);
    FAIL() << "cuda buffer accepted";
  } catch (const CommUnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("no backend for cuda"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("in_process (cpu)"), std::string::npos) << e.what();
  }
}

TEST(ProcessGroup, RejectsABackendOfAnotherShape) {
  InProcessWorld world(2);
  ProcessGroup group(0, 3);
  EXPECT_THROW(group.setBackend(DeviceType::Cpu, world.backend(0)), CommError);
  EXPECT_THROW(ProcessGroup(3, 3), CommError);
}

TEST(ProcessGroup, NewGroupGivesMembersTheirOwnRanksAndNonMembersNull) {
  InProcessWorld world(4, 5s);
  runRankThreads(4, [&](int rank) {
    auto world0 = groupOf(world, rank);
    auto odd = world0->newGroup({3, 1});
    auto all = world0->newGroup({0, 1, 2, 3});
    if (rank % 2 == 1) {
      ASSERT_NE(odd, nullptr);
      EXPECT_EQ(odd->size(), 2);
      EXPECT_EQ(odd->rank(), rank / 2);
      EXPECT_EQ(odd->globalRanks(), (std::vector<int>{1, 3}));
      EXPECT_EQ(odd->groupRankOf(3), 1);
      EXPECT_EQ(odd->groupRankOf(0), -1);
      std::vector<std::int32_t> v = {rank};
      odd->allReduce(BufferView::of(std::span(v)))->wait();
      EXPECT_EQ(v[0], 4);  // 1 + 3: only members took part
    } else {
      EXPECT_EQ(odd, nullptr);
    }
    ASSERT_NE(all, nullptr);
    std::vector<std::int32_t> v = {rank};
    all->allReduce(BufferView::of(std::span(v)), ReduceOp::Max)->wait();
    EXPECT_EQ(v[0], 3);
  });
}

TEST(ProcessGroup, NewGroupRejectsBadRankLists) {
  InProcessWorld world(1);
  auto group = groupOf(world, 0);
  EXPECT_THROW(group->newGroup({}), CommError);
  EXPECT_THROW(group->newGroup({0, 0}), CommError);
  EXPECT_THROW(group->newGroup({0, 4}), CommError);
}

TEST(ProcessGroup, ParallelGroupsFollowMegatronsOrder) {
  // 8 ranks, 2 pipeline stages: data-parallel groups {0..3}, {4..7}; pipelines {i, i+4}.
  InProcessWorld world(8, 5s);
  runRankThreads(8, [&](int rank) {
    auto world0 = groupOf(world, rank);
    const ParallelGroups groups = makeParallelGroups(*world0, 2);
    EXPECT_EQ(groups.stage, rank / 4);
    ASSERT_NE(groups.dataParallel, nullptr);
    ASSERT_NE(groups.pipeline, nullptr);
    EXPECT_EQ(groups.dataParallel->size(), 4);
    EXPECT_EQ(groups.pipeline->size(), 2);
    EXPECT_EQ(groups.pipeline->globalRanks(), (std::vector<int>{rank % 4, rank % 4 + 4}));

    // The last stage's loss reaches the first stage.
    std::vector<float> loss = {groups.stage == 1 ? 0.25f * static_cast<float>(rank) : -1.0f};
    broadcastFromLastPipelineStage(*groups.pipeline, BufferView::of(std::span(loss)))->wait();
    EXPECT_FLOAT_EQ(loss[0], 0.25f * static_cast<float>(rank % 4 + 4));

    // Data-parallel sums stay within a stage.
    std::vector<std::int64_t> one = {1};
    groups.dataParallel->allReduce(BufferView::of(std::span(one)))->wait();
    EXPECT_EQ(one[0], 4);
  });
  InProcessWorld three(3);
  auto g = groupOf(three, 0);
  EXPECT_THROW(makeParallelGroups(*g, 2), CommError);
}

TEST(ProcessGroup, CommsLoggerRecordsWhatTheGroupRuns) {
  InProcessWorld world(2, 5s);
  CommsLoggerOptions options;
  options.enabled = true;
  auto logger = std::make_shared<CommsLogger>(options);
  runRankThreads(2, [&](int rank) {
    auto group = groupOf(world, rank);
    if (rank == 0)
      group->setCommsLogger(logger);
    std::vector<float> v(256, 1.0f);
    std::vector<float> gathered(512);
    for (int i = 0; i < 3; ++i)
      group->allReduce(BufferView::of(std::span(v)))->wait();
    group->allGather(BufferView::of(std::span(v)), BufferView::of(std::span(gathered)))->wait();
    group->barrier()->wait();
  });
  const auto rows = logger->summary();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].op, OpType::AllReduce);
  EXPECT_EQ(rows[0].count, 3);
  EXPECT_EQ(rows[0].messageBytes, 1024u);
  EXPECT_EQ(rows[0].ranks, 2);
  EXPECT_EQ(rows[1].op, OpType::AllGather);
  EXPECT_EQ(rows[1].messageBytes, 2048u);  // the gathered output, as nccl-tests counts it
  EXPECT_EQ(rows[2].op, OpType::Barrier);
}

}  // namespace
}  // namespace stretch::comm
