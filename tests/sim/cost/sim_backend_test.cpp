// SimBackend and SimWorld (sim/sim_backend.hpp): functional mode really moves the data (64 ranks
// as threads) while every clock follows the cost model; cost-only mode needs no data and no
// threads and scales to 131,072 ranks; clocks, overlap, sub-groups, send/recv, timeouts and
// mismatches behave as the header says.

#include "sim/sim_backend.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/comm/errors.hpp"
#include "runtime/comm/in_process_backend.hpp"
#include "runtime/common/error.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/sim_cluster.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::sim {
namespace {

using comm::runRankThreads;

using namespace std::chrono_literals;
using comm::BufferView;
using comm::DataType;
using comm::OpType;
using comm::ReduceOp;

// 2 nodes x 2 GPUs with round figures.
ClusterSpec smallCluster() {
  return test::handCluster("small", 2, 2, 10, 1, 2, 20, 5);
}

SimDuration costOf(const ClusterSpec& c, OpType op, std::uint64_t bytes, std::int64_t ranks) {
  return toSimDuration(collectiveCost(c, op, bytes, ranks).seconds);
}

TEST(SimBackendFunctional, SixtyFourRanksReduceCorrectlyAndClocksFollowTheCostModel) {
  const ClusterSpec c = test::clusterPreset("dgx-h100", 8);
  auto world = SimWorld::create(c, 64, SimBackendMode::Functional);
  constexpr std::size_t kCount = 1000;
  std::vector<std::vector<float>> data(64, std::vector<float>(kCount));
  const SimDuration first = costOf(c, OpType::AllReduce, kCount * sizeof(float), 64);
  ASSERT_GT(first.count(), 0);
  runRankThreads(64, [&](int r) {
    auto backend = world->backend(r);
    EXPECT_EQ(backend->name(), "sim");
    auto& v = data[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < kCount; ++i)
      v[i] = static_cast<float>(r) + static_cast<float>(i);
    backend->allReduce(BufferView::of(std::span(v)), ReduceOp::Sum)->wait();
    EXPECT_EQ(backend->simulatedTime(), first);
    // Compute of r microseconds, then another all_reduce: everyone waits for rank 63.
    backend->advance(std::chrono::microseconds(r));
    backend->allReduce(BufferView::of(std::span(v)), ReduceOp::Max)->wait();
    EXPECT_EQ(backend->simulatedTime(), first + 63us + first);
    EXPECT_EQ(backend->lastCost().algorithm,
              collectiveCost(c, OpType::AllReduce, 4000, 64).algorithm);
  });
  for (std::size_t i = 0; i < kCount; ++i)
    ASSERT_EQ(data[0][i], 2016.0f + 64.0f * static_cast<float>(i)) << i;
  for (int r = 1; r < 64; ++r)
    ASSERT_EQ(std::memcmp(data[0].data(), data[static_cast<std::size_t>(r)].data(),
                          kCount * sizeof(float)),
              0)
        << r;
  for (int r = 0; r < 64; ++r)
    EXPECT_EQ(world->time(r), first + 63us + first);
  EXPECT_EQ(world->maxTime(), first + 63us + first);
  EXPECT_EQ(world->operations(), 2u);
  EXPECT_EQ(world->communicationTime(), 2 * first);
}

TEST(SimBackendFunctional, EveryOperationMovesTheDataAndAdvancesTheClock) {
  const ClusterSpec c = smallCluster();
  auto world = SimWorld::create(c, 4, SimBackendMode::Functional);
  const SimDuration bcast = costOf(c, OpType::Broadcast, 8 * 8, 4);
  const SimDuration gather = costOf(c, OpType::AllGather, 4 * 3 * 4, 4);
  const SimDuration scatter = costOf(c, OpType::ReduceScatter, 8 * 4, 4);
  const SimDuration a2a = costOf(c, OpType::AllToAll, 4, 4);
  const SimDuration barrier = costOf(c, OpType::Barrier, 0, 4);
  const SimDuration crossNode = toSimDuration(pointToPointCost(c, 16 * 8, false).seconds);
  runRankThreads(4, [&](int r) {
    auto b = world->backend(r);
    SimDuration expected{0};

    std::vector<std::int64_t> buf(8, r == 1 ? 7 : 0);
    b->broadcast(BufferView::of(std::span(buf)), 1)->wait();
    EXPECT_EQ(buf, std::vector<std::int64_t>(8, 7));
    expected += bcast;
    EXPECT_EQ(b->simulatedTime(), expected);

    std::vector<std::int32_t> in = {r, r * 10, r * 100};
    std::vector<std::int32_t> out(12, -1);
    b->allGather(BufferView::of(std::span(in)), BufferView::of(std::span(out)))->wait();
    EXPECT_EQ(out, (std::vector<std::int32_t>{0, 0, 0, 1, 10, 100, 2, 20, 200, 3, 30, 300}));
    expected += gather;
    EXPECT_EQ(b->simulatedTime(), expected);

    std::vector<float> full(8);
    std::iota(full.begin(), full.end(), static_cast<float>(r));
    std::vector<float> mine(2);
    b->reduceScatter(BufferView::of(std::span(full)), BufferView::of(std::span(mine)),
                     ReduceOp::Sum)
        ->wait();
    // Element i summed over ranks: 4i + 6.
    const auto first = static_cast<float>(2 * r);
    EXPECT_EQ(mine, (std::vector<float>{4.0f * first + 6, 4.0f * (first + 1) + 6}));
    expected += scatter;
    EXPECT_EQ(b->simulatedTime(), expected);

    std::vector<std::uint8_t> send = {
        static_cast<std::uint8_t>(r * 4 + 0), static_cast<std::uint8_t>(r * 4 + 1),
        static_cast<std::uint8_t>(r * 4 + 2), static_cast<std::uint8_t>(r * 4 + 3)};
    std::vector<std::uint8_t> recv(4);
    b->allToAll(BufferView::of(std::span(send)), BufferView::of(std::span(recv)))->wait();
    for (int s = 0; s < 4; ++s)
      EXPECT_EQ(recv[static_cast<std::size_t>(s)], s * 4 + r);
    expected += a2a;
    EXPECT_EQ(b->simulatedTime(), expected);

    b->barrier()->wait();
    expected += barrier;
    EXPECT_EQ(b->simulatedTime(), expected);

    // A ring of messages: 1->2 and 3->0 cross nodes; everyone ends at the slower link.
    std::vector<double> msg(16, r + 0.5);
    std::vector<double> got(16, -1);
    b->send(BufferView::of(std::span(msg)), (r + 1) % 4)->wait();
    b->recv(BufferView::of(std::span(got)), (r + 3) % 4)->wait();
    EXPECT_EQ(got, std::vector<double>(16, (r + 3) % 4 + 0.5));
    EXPECT_EQ(b->simulatedTime(), expected + crossNode);
  });
}

TEST(SimBackendFunctional, SubGroupsShareClocksAndAreCostedWhereTheirMembersAre) {
  const ClusterSpec c = test::clusterPreset("dgx-h100", 2);
  auto world = SimWorld::create(c, 16, SimBackendMode::Functional);
  constexpr std::size_t kCount = 1 << 18;  // 1 MiB of fp32
  const SimDuration rail =
      toSimDuration(collectiveCost(c, OpType::AllReduce, kCount * 4, Placement{2, 2, 1}).seconds);
  const SimDuration all = costOf(c, OpType::AllReduce, kCount * 4, 16);
  runRankThreads(16, [&](int r) {
    auto b = world->backend(r);
    // Rail r % 8: one GPU on each node, so every byte crosses a NIC.
    auto group = b->createSubgroup({r % 8, r % 8 + 8}, "rail" + std::to_string(r % 8));
    auto* sim = dynamic_cast<SimBackend*>(group.get());
    ASSERT_NE(sim, nullptr);
    EXPECT_EQ(sim->placement().nodes, 2);
    EXPECT_EQ(sim->placement().ranksPerNode, 1);
    EXPECT_EQ(sim->worldRank(), r);
    std::vector<float> v(kCount, static_cast<float>(r));
    group->allReduce(BufferView::of(std::span(v)), ReduceOp::Sum)->wait();
    EXPECT_EQ(v[kCount - 1], static_cast<float>(2 * (r % 8) + 8));
    EXPECT_EQ(b->simulatedTime(), rail);  // the group's clock is the rank's clock
    b->allReduce(BufferView::of(std::span(v)), ReduceOp::Sum)->wait();
    EXPECT_EQ(sim->simulatedTime(), rail + all);
  });
  EXPECT_GT(rail, costOf(c, OpType::AllReduce, kCount * 4, 2));  // two GPUs of one node
}

TEST(SimBackendFunctional, AMissingPeerTimesOutAndBreaksTheGroup) {
  auto world = SimWorld::create(smallCluster(), 2, SimBackendMode::Functional);
  auto b = world->backend(0);
  std::vector<float> v(16, 1.0f);
  const auto start = std::chrono::steady_clock::now();
  const std::string message = test::errorOf<std::exception>([&] {
    b->allReduce(BufferView::of(std::span(v)), ReduceOp::Sum, comm::CollectiveOptions{200ms})
        ->wait();
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  EXPECT_NE(message.find("sim all_reduce"), std::string::npos) << message;
  try {
    b->barrier()->wait();
    ADD_FAILURE() << "a broken group accepted another operation";
  } catch (const comm::CommError& e) {
    EXPECT_NE(std::string(e.what()).find("timed out"), std::string::npos) << e.what();
  }
}

TEST(SimBackendFunctional, MismatchedCollectivesFailNamingBoth) {
  auto world = SimWorld::create(smallCluster(), 2, SimBackendMode::Functional,
                                {CollectiveAlgorithm::Auto, 5s});
  std::vector<std::string> messages(2);
  runRankThreads(2, [&](int r) {
    auto b = world->backend(r);
    std::vector<float> v(4, 1.0f);
    try {
      if (r == 0)
        b->allReduce(BufferView::of(std::span(v)), ReduceOp::Sum)->wait();
      else
        b->barrier()->wait();
    } catch (const comm::CommError& e) {
      messages[static_cast<std::size_t>(r)] = e.what();
    }
  });
  for (const auto& m : messages) {
    EXPECT_NE(m.find("all_reduce"), std::string::npos) << m;
    EXPECT_NE(m.find("barrier"), std::string::npos) << m;
  }
}

TEST(SimBackendFunctional, ARejectedMessageDoesNotLeaveItsArrivalTimeBehind) {
  const ClusterSpec c = smallCluster();
  auto world = SimWorld::create(c, 2, SimBackendMode::Functional);
  const SimDuration hop = toSimDuration(pointToPointCost(c, 16, true).seconds);
  runRankThreads(2, [&](int r) {
    auto b = world->backend(r);
    std::vector<float> four(4, 1.0f);
    std::vector<float> five(5);
    if (r == 0) {
      b->send(BufferView::of(std::span(four)), 1, 3)->wait();
      b->barrier()->wait();
      b->advance(1ms);
      b->send(BufferView::of(std::span(four)), 1, 3)->wait();
    } else {
      EXPECT_THROW(b->recv(BufferView::of(std::span(five)), 0, 3)->wait(), comm::CommError);
      b->barrier()->wait();
      b->recv(BufferView::of(std::span(four)), 0, 3)->wait();
      // The second message's arrival, not the rejected first one's.
      EXPECT_EQ(b->simulatedTime(), world->time(0));
    }
  });
  EXPECT_EQ(world->time(1), hop + costOf(c, OpType::Barrier, 0, 2) + 1ms + hop);
}

TEST(SimBackend, DevicesAndNullBuffersByMode) {
  std::vector<float> v(4);
  BufferView cuda{v.data(), v.size(), DataType::Float32, comm::Device::cuda(0)};
  auto functional = SimWorld::create(smallCluster(), 1, SimBackendMode::Functional)->backend(0);
  EXPECT_FALSE(functional->supportsDevice(comm::DeviceType::Cuda));
  const std::string message =
      test::errorOf<std::exception>([&] { functional->allReduce(cuda, ReduceOp::Sum); });
  EXPECT_NE(message.find("sim"), std::string::npos) << message;
  EXPECT_NE(message.find("all_reduce"), std::string::npos) << message;
  EXPECT_THROW(functional->allReduce(BufferView{nullptr, 4, DataType::Float32}, ReduceOp::Sum),
               comm::CommError);

  auto costWorld = SimWorld::create(smallCluster(), 1, SimBackendMode::CostOnly);
  auto costOnly = costWorld->backend(0);
  EXPECT_TRUE(costOnly->supportsDevice(comm::DeviceType::Cuda));
  costOnly->allReduce(cuda, ReduceOp::Sum)->wait();
  costOnly->allReduce(BufferView{nullptr, 1000, DataType::BFloat16}, ReduceOp::Sum)->wait();
  // Argument checks still apply.
  EXPECT_THROW(costOnly->allGather(BufferView{nullptr, 4, DataType::Float32},
                                   BufferView{nullptr, 5, DataType::Float32}),
               comm::CommError);
}

TEST(SimBackendCostOnly, OneThreadDrives131072RanksThroughAnAllReduce) {
  const ClusterSpec c = test::clusterPreset("dgx-h100", 16384);
  const auto start = std::chrono::steady_clock::now();
  auto world = SimWorld::create(c, c.gpus(), SimBackendMode::CostOnly);
  const int n = static_cast<int>(world->size());
  std::vector<std::shared_ptr<SimBackend>> ranks(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r)
    ranks[static_cast<std::size_t>(r)] = world->backend(r);
  // 1 GiB of fp32 gradients that exist nowhere.
  const BufferView gradients{nullptr, std::size_t{1} << 28, DataType::Float32};
  std::vector<std::shared_ptr<comm::Work>> works(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    ranks[static_cast<std::size_t>(r)]->advance(std::chrono::milliseconds(r % 100));
    works[static_cast<std::size_t>(r)] =
        ranks[static_cast<std::size_t>(r)]->allReduce(gradients, ReduceOp::Avg);
  }
  for (auto& w : works)
    w->wait();
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  const SimDuration expected = 99ms + costOf(c, OpType::AllReduce, std::uint64_t{1} << 30, n);
  for (int r = 0; r < n; r += 997)
    ASSERT_EQ(ranks[static_cast<std::size_t>(r)]->simulatedTime(), expected) << r;
  EXPECT_EQ(world->maxTime(), expected);
  EXPECT_EQ(world->operations(), 1u);
  RecordProperty("seconds_131072_ranks", std::to_string(took.count()));
  EXPECT_LT(took.count(), 20.0);  // ~1 s on the 2-core development machine
}

TEST(SimBackendCostOnly, LockstepWorldStepsAreConstantTimeAtScale) {
  const ClusterSpec c = test::clusterPreset("dgx-h100", 16384);
  auto world = SimWorld::create(c, c.gpus(), SimBackendMode::CostOnly);
  const std::uint64_t bucket = 100'000'000;
  const SimDuration cost = costOf(c, OpType::AllReduce, bucket, c.gpus());
  constexpr int kSteps = 100000;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kSteps; ++i) {
    world->advanceAll(1ms);
    world->collective(OpType::AllReduce, bucket);
  }
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  const SimDuration expected = kSteps * (1ms + cost);
  EXPECT_EQ(world->maxTime(), expected);
  EXPECT_EQ(world->time(0), expected);
  EXPECT_EQ(world->time(c.gpus() - 1), expected);
  EXPECT_EQ(world->operations(), static_cast<std::uint64_t>(kSteps));
  EXPECT_EQ(world->communicationTime(), kSteps * cost);
  RecordProperty("seconds_100000_lockstep_steps", std::to_string(took.count()));
  EXPECT_LT(took.count(), 2.0);
  // A straggler: every rank leaves the next collective after the slowest one.
  world->advance(12345, 7ms);
  world->collective(OpType::AllReduce, bucket);
  EXPECT_EQ(world->time(0), expected + 7ms + cost);
  EXPECT_EQ(world->time(12345), expected + 7ms + cost);
}

TEST(SimBackendCostOnly, ComputeBetweenIssueAndWaitOverlapsTheCollective) {
  const ClusterSpec c = smallCluster();
  auto world = SimWorld::create(c, 2, SimBackendMode::CostOnly);
  auto a = world->backend(0);
  auto b = world->backend(1);
  const BufferView bucket{nullptr, 1 << 20, DataType::Float32};
  const SimDuration cost = costOf(c, OpType::AllReduce, 4 << 20, 2);
  ASSERT_GT(cost, 100us);  // longer than rank 1's compute below, shorter than rank 0's
  auto wa = a->allReduce(bucket, ReduceOp::Sum);
  EXPECT_FALSE(wa->isCompleted());  // rank 1 has not issued it yet
  auto wb = b->allReduce(bucket, ReduceOp::Sum);
  EXPECT_TRUE(wa->isCompleted());
  a->advance(1s);   // backward goes on longer than the all_reduce
  b->advance(1us);  // or shorter
  wa->wait();
  wb->wait();
  EXPECT_EQ(a->simulatedTime(), 1s);
  EXPECT_EQ(b->simulatedTime(), cost);
  // Two collectives issued back to back run one after the other.
  auto x0 = a->allReduce(bucket, ReduceOp::Sum);
  auto y0 = a->allReduce(bucket, ReduceOp::Sum);
  auto x1 = b->allReduce(bucket, ReduceOp::Sum);
  auto y1 = b->allReduce(bucket, ReduceOp::Sum);
  y1->wait();
  EXPECT_EQ(b->simulatedTime(), 1s + 2 * cost);
  x0->wait();
  EXPECT_EQ(a->simulatedTime(), 1s + cost);
  y0->wait();
  EXPECT_EQ(a->simulatedTime(), 1s + 2 * cost);
}

TEST(SimBackendCostOnly, WaitingBeforeThePeersIssueTimesOutThenCompletes) {
  auto world = SimWorld::create(smallCluster(), 2, SimBackendMode::CostOnly,
                                {CollectiveAlgorithm::Auto, std::chrono::milliseconds(100)});
  auto work = world->backend(0)->barrier();
  const std::string message = test::errorOf<std::exception>([&] { work->wait(); });
  EXPECT_NE(message.find("sim barrier on rank 0 of 2"), std::string::npos) << message;
  world->backend(1)->barrier()->wait();
  work->wait();  // completes once the peer has issued it
  EXPECT_EQ(world->time(0), costOf(smallCluster(), OpType::Barrier, 0, 2));
}

TEST(SimBackendCostOnly, MessagesArriveAfterThePointToPointCost) {
  const ClusterSpec c = smallCluster();
  auto world = SimWorld::create(c, 4, SimBackendMode::CostOnly);
  auto sender = world->backend(0);
  auto receiver = world->backend(3);  // on the other node
  const BufferView message{nullptr, 1000, DataType::Float64};
  auto pending = receiver->recv(message, 0, 5);
  EXPECT_FALSE(pending->isCompleted());
  sender->advance(5us);
  sender->send(message, 3, 5)->wait();
  const SimDuration arrival = 5us + toSimDuration(pointToPointCost(c, 8000, false).seconds);
  EXPECT_EQ(sender->simulatedTime(), arrival);
  pending->wait();
  EXPECT_EQ(receiver->simulatedTime(), arrival);
  // A receive of the wrong size fails naming both sizes.
  sender->send(message, 3, 6)->wait();
  const std::string error = test::errorOf<std::exception>([&] {
    receiver->recv(BufferView{nullptr, 10, DataType::Float64}, 0, 6)->wait();
  });
  EXPECT_NE(error.find("8000"), std::string::npos) << error;
  EXPECT_NE(error.find("80"), std::string::npos) << error;
}

TEST(SimBackendCostOnly, MismatchedSizesPoisonTheGroup) {
  auto world = SimWorld::create(smallCluster(), 2, SimBackendMode::CostOnly);
  auto w0 = world->backend(0)->allReduce(BufferView{nullptr, 8, DataType::Float32}, ReduceOp::Sum);
  auto w1 = world->backend(1)->allReduce(BufferView{nullptr, 9, DataType::Float32}, ReduceOp::Sum);
  EXPECT_THROW(w0->wait(), comm::CommError);
  EXPECT_THROW(w1->wait(), comm::CommError);
  const std::string message =
      test::errorOf<std::exception>([&] { world->backend(0)->barrier()->wait(); });
  EXPECT_NE(message.find("32 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("36 bytes"), std::string::npos) << message;
}

TEST(SimBackend, ResultsAreBitIdenticalRunToRun) {
  auto run = [] {
    const ClusterSpec c = test::clusterPreset("dgx-a100", 2);
    auto world = SimWorld::create(c, 16, SimBackendMode::Functional);
    runRankThreads(16, [&](int r) {
      auto b = world->backend(r);
      std::vector<double> v(333, r * 0.1);
      for (int step = 0; step < 5; ++step) {
        b->advance(std::chrono::nanoseconds(1000 * ((r * 7 + step * 13) % 17)));
        b->allReduce(BufferView::of(std::span(v)), ReduceOp::Avg)->wait();
      }
    });
    std::vector<std::int64_t> clocks;
    for (int r = 0; r < 16; ++r)
      clocks.push_back(world->time(r).count());
    return clocks;
  };
  EXPECT_EQ(run(), run());
}

TEST(SimWorld, RejectsBadSizesAndRanks) {
  const ClusterSpec c = smallCluster();
  for (std::int64_t ranks : {std::int64_t{0}, std::int64_t{5}}) {
    const std::string message = test::errorOf<std::exception>(
        [&] { SimWorld::create(c, ranks, SimBackendMode::CostOnly); });
    EXPECT_NE(message.find("ranks = " + std::to_string(ranks)), std::string::npos) << message;
  }
  ClusterSpec broken = c;
  broken.intraNodeGBps = -1;
  EXPECT_THROW(SimWorld::create(broken, 2, SimBackendMode::CostOnly), ConfigError);
  auto world = SimWorld::create(c, 4, SimBackendMode::CostOnly);
  EXPECT_THROW(world->backend(4), comm::CommError);
  EXPECT_THROW(world->time(-1), comm::CommError);
  EXPECT_THROW(world->advance(0, -1ns), comm::CommError);
  EXPECT_EQ(world->backend(2), world->backend(2));
  EXPECT_EQ(toString(SimBackendMode::CostOnly), "cost_only");
}

}  // namespace
}  // namespace stretch::sim
