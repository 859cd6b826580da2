// The collective cost model (sim/collective_cost.hpp) on the presets: the figures it must
// reproduce (busbw near the NVLink line rate inside a DGX node, near the node's NIC total across
// nodes, latency for tiny messages), each algorithm's formula on hand-computed cases, Auto's
// choices, the busbw definition shared with the comm benchmark, and O(1) cost per call.

#include "sim/collective_cost.hpp"

#include <chrono>
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "runtime/comm/bandwidth.hpp"
#include "runtime/common/error.hpp"
#include "tests/support/sim_cluster.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::sim {
namespace {

using comm::OpType;
using A = CollectiveAlgorithm;

constexpr std::uint64_t kGiB = 1ull << 30;

// A cluster with round figures for hand computation.
ClusterSpec roundCluster(std::int64_t nodes) {
  return test::handCluster("round", nodes, 4, 100, 10, 1, 5, 2);
}

TEST(CollectiveCost, OneRankAndEmptyBuffersCostNothing) {
  const ClusterSpec c = test::clusterPreset("dgx-h100", 4);
  for (OpType op : comm::kAllOpTypes) {
    SCOPED_TRACE(toString(op));
    for (A a : {A::Ring, A::Tree, A::Hierarchical, A::Auto}) {
      EXPECT_EQ(collectiveCost(c, op, kGiB, 1, a).seconds, 0);
      if (op != OpType::Barrier) {
        EXPECT_EQ(collectiveCost(c, op, 0, 32, a).seconds, 0);
      }
    }
  }
  EXPECT_GT(collectiveCost(c, OpType::Barrier, 0, 32).seconds, 0);
}

TEST(CollectiveCost, LargeAllReduceInsideADgxH100ReachesTheNvlinkRate) {
  const ClusterSpec c = test::clusterPreset("dgx-h100", 1);
  const CollectiveCost cost = collectiveCost(c, OpType::AllReduce, 4 * kGiB, 8);
  EXPECT_EQ(cost.algorithm, A::Ring);
  EXPECT_NEAR(cost.busbwGBps, c.intraNodeGBps, 0.01 * c.intraNodeGBps);
  EXPECT_LE(cost.busbwGBps, c.intraNodeGBps);
  EXPECT_DOUBLE_EQ(cost.busbwGBps, cost.algbwGBps * 2.0 * 7 / 8);
}

TEST(CollectiveCost, RingAcrossDgxNodesReachesTheNodesNicTotal) {
  // One ring per rail: the 8 NICs of a node carry a ring link together (NVIDIA/nccl#812: 192 GB/s
  // all_reduce busbw across DGX-A100 with 8 x 200 Gb/s; nccl-tests#290: ~370-400 on DGX-H100).
  for (const char* name : {"dgx-h100", "dgx-a100"}) {
    SCOPED_TRACE(name);
    const ClusterSpec c = test::clusterPreset(name, 2);
    const double nicTotal = static_cast<double>(c.gpusPerNode) * c.interNodeGBps;
    const CollectiveCost ring = collectiveCost(c, OpType::AllReduce, 4 * kGiB, 16, A::Ring);
    EXPECT_NEAR(ring.busbwGBps, nicTotal, 0.01 * nicTotal);
    EXPECT_LE(ring.busbwGBps, nicTotal);
    EXPECT_EQ(collectiveCost(c, OpType::AllReduce, 4 * kGiB, 16).algorithm, A::Ring);
  }
  // One GPU per node: the ring runs at one NIC's rate.
  ClusterSpec single = test::clusterPreset("dgx-h100", 64);
  single.gpusPerNode = 1;
  const auto cost = collectiveCost(single, OpType::AllReduce, 4 * kGiB, 64, A::Ring);
  EXPECT_NEAR(cost.busbwGBps, single.interNodeGBps, 0.01 * single.interNodeGBps);
}

TEST(CollectiveCost, LatencyDominatesTinyMessages) {
  const ClusterSpec c = test::clusterPreset("dgx-h100", 1);
  const CollectiveCost cost = collectiveCost(c, OpType::AllReduce, 8, 8, A::Ring);
  const double latency = (c.opLatencyUs + 2 * 7 * c.intraLatencyUs) * 1e-6;
  EXPECT_NEAR(cost.seconds, latency, 0.001 * latency);
  EXPECT_LT(cost.busbwGBps, 0.01);
  // Doubling a tiny message changes almost nothing; doubling a huge one doubles the time.
  const double t8 = collectiveCost(c, OpType::AllReduce, 8, 8).seconds;
  const double t16 = collectiveCost(c, OpType::AllReduce, 16, 8).seconds;
  EXPECT_LT(t16 / t8, 1.001);
  const double tBig = collectiveCost(c, OpType::AllReduce, 8 * kGiB, 8).seconds;
  const double tBig2 = collectiveCost(c, OpType::AllReduce, 16 * kGiB, 8).seconds;
  EXPECT_NEAR(tBig2 / tBig, 2.0, 0.001);
}

TEST(CollectiveCost, RingFormulaByHand) {
  // 3 nodes x 4 GPUs = 12 ranks, 1.2e9 bytes. Bring = min(100 x 4/3, 4 x 10) = 40 GB/s.
  const ClusterSpec c = roundCluster(3);
  const double s = 1.2e9;
  const auto bytes = static_cast<std::uint64_t>(s);
  // all_reduce: 22 steps, 4 of them inter-node.
  double expected = 2e-6 + 18 * 1e-6 + 4 * 5e-6 + 2.0 * 11 / 12 * s / 40e9;
  EXPECT_NEAR(collectiveCost(c, OpType::AllReduce, bytes, 12, A::Ring).seconds, expected, 1e-12);
  // all_gather / reduce_scatter: 11 steps, 2 inter-node.
  expected = 2e-6 + 9 * 1e-6 + 2 * 5e-6 + 11.0 / 12 * s / 40e9;
  EXPECT_NEAR(collectiveCost(c, OpType::AllGather, bytes, 12, A::Ring).seconds, expected, 1e-12);
  EXPECT_NEAR(collectiveCost(c, OpType::ReduceScatter, bytes, 12, A::Ring).seconds, expected,
              1e-12);
  // broadcast: pipelined chain, 11 hops, the whole buffer through each link.
  expected = 2e-6 + 9 * 1e-6 + 2 * 5e-6 + s / 40e9;
  EXPECT_NEAR(collectiveCost(c, OpType::Broadcast, bytes, 12, A::Ring).seconds, expected, 1e-12);
  // On one node the ring runs at the intra-node rate.
  expected = 2e-6 + 6 * 1e-6 + 2.0 * 3 / 4 * s / 100e9;
  EXPECT_NEAR(collectiveCost(c, OpType::AllReduce, bytes, 4, A::Ring).seconds, expected, 1e-12);
}

TEST(CollectiveCost, TreeAndHierarchicalFormulasByHand) {
  // 5 nodes x 4 GPUs: ceil(log2 5) = 3 tree levels across nodes.
  const ClusterSpec c = roundCluster(5);
  const double s = 1e9;
  const auto bytes = static_cast<std::uint64_t>(s);
  double expected = 2e-6 + 2 * (3 * 1e-6 + 3 * 5e-6) + 2 * s / std::min(100e9, 4 * 10e9);
  EXPECT_NEAR(collectiveCost(c, OpType::AllReduce, bytes, 20, A::Tree).seconds, expected, 1e-12);
  expected = 2e-6 + (3 * 1e-6 + 3 * 5e-6) + s / 40e9;
  EXPECT_NEAR(collectiveCost(c, OpType::Broadcast, bytes, 20, A::Tree).seconds, expected, 1e-12);
  // Hierarchical all_reduce: RS + AG inside (3/4 S at 100 GB/s each), all_reduce of S/4 per
  // rail across 5 nodes (2 x 4/5 x S/4 at 10 GB/s).
  expected = 2e-6 + 2 * 3 * 1e-6 + 2 * 0.75 * s / 100e9 + 2 * 4 * 5e-6 + 2 * 0.8 * s / 40e9;
  EXPECT_NEAR(collectiveCost(c, OpType::AllReduce, bytes, 20, A::Hierarchical).seconds, expected,
              1e-12);
  expected = 2e-6 + 3 * 1e-6 + 0.75 * s / 100e9 + 4 * 5e-6 + 0.8 * s / 40e9;
  EXPECT_NEAR(collectiveCost(c, OpType::AllGather, bytes, 20, A::Hierarchical).seconds, expected,
              1e-12);
  // No tree all_gather (as in NCCL): the ring's figures, reported as ring.
  const auto treeAg = collectiveCost(c, OpType::AllGather, bytes, 20, A::Tree);
  EXPECT_EQ(treeAg.algorithm, A::Ring);
  EXPECT_EQ(treeAg.seconds, collectiveCost(c, OpType::AllGather, bytes, 20, A::Ring).seconds);
  // Barrier: the latency of an all_reduce of nothing.
  expected = 2e-6 + 2 * (3 * 1e-6 + 3 * 5e-6);
  EXPECT_NEAR(collectiveCost(c, OpType::Barrier, 0, 20, A::Tree).seconds, expected, 1e-12);
}

TEST(CollectiveCost, AllToAllAndPointToPoint) {
  const ClusterSpec c = roundCluster(3);
  const double s = 1.2e9;
  const auto bytes = static_cast<std::uint64_t>(s);
  // 12 ranks: 3 peers on the node, 8 on other nodes; the NIC share dominates.
  double expected =
      2e-6 + 3 * 1e-6 + 8 * 5e-6 + std::max(3.0 / 12 * s / 100e9, 8.0 / 12 * s / 10e9);
  EXPECT_NEAR(collectiveCost(c, OpType::AllToAll, bytes, 12).seconds, expected, 1e-12);
  // Inside a node all_to_all busbw reaches the intra-node rate.
  const auto node = collectiveCost(c, OpType::AllToAll, 100 * kGiB, 4);
  EXPECT_NEAR(node.busbwGBps, c.intraNodeGBps, 0.001 * c.intraNodeGBps);
  EXPECT_NEAR(pointToPointCost(c, bytes, true).seconds, 2e-6 + 1e-6 + s / 100e9, 1e-12);
  EXPECT_NEAR(pointToPointCost(c, bytes, false).seconds, 2e-6 + 5e-6 + s / 10e9, 1e-12);
  EXPECT_EQ(pointToPointCost(c, 0, false).seconds, 0);
  // send over the placement: rank 0 to rank n-1.
  EXPECT_EQ(collectiveCost(c, OpType::Send, bytes, 4).seconds,
            pointToPointCost(c, bytes, true).seconds);
  EXPECT_EQ(collectiveCost(c, OpType::Send, bytes, 8).seconds,
            pointToPointCost(c, bytes, false).seconds);
}

TEST(CollectiveCost, AutoPicksTreeForSmallMessagesAtScaleAndRingForLargeOnFewNodes) {
  const ClusterSpec big = test::clusterPreset("dgx-h100", 2048);  // 16,384 GPUs, as Llama 3
  const auto small = collectiveCost(big, OpType::AllReduce, 1 << 20, big.gpus());
  EXPECT_EQ(small.algorithm, A::Tree);
  EXPECT_LT(small.seconds,
            collectiveCost(big, OpType::AllReduce, 1 << 20, big.gpus(), A::Ring).seconds / 10);
  const ClusterSpec two = test::clusterPreset("dgx-h100", 2);
  EXPECT_EQ(collectiveCost(two, OpType::AllReduce, 4 * kGiB, 16).algorithm, A::Ring);
  // Auto is the cheapest of the three and equals one of them.
  for (std::uint64_t bytes : {std::uint64_t{8}, std::uint64_t{1} << 20, 4 * kGiB}) {
    for (std::int64_t ranks : {std::int64_t{8}, std::int64_t{16}, std::int64_t{1024}}) {
      const double best = collectiveCost(big, OpType::AllReduce, bytes, ranks).seconds;
      double min = std::numeric_limits<double>::infinity();
      for (A a : {A::Ring, A::Tree, A::Hierarchical})
        min = std::min(min, collectiveCost(big, OpType::AllReduce, bytes, ranks, a).seconds);
      EXPECT_GE(best, min) << bytes << " bytes on " << ranks;
      EXPECT_LE(best, min * (1 + 2e-9)) << bytes << " bytes on " << ranks;
    }
  }
}

TEST(CollectiveCost, HierarchicalBeatsTheRingOnPcieEthernetNodesButNotOnDgx) {
  // cloud-a10g-4x, 2 nodes: Bi = 31.5 > N g Be = 2 x 4 x 1.25 = 10.
  const ClusterSpec cloud = test::clusterPreset("cloud-a10g-4x", 2);
  const auto hier = collectiveCost(cloud, OpType::AllReduce, kGiB, 8, A::Hierarchical);
  const auto ring = collectiveCost(cloud, OpType::AllReduce, kGiB, 8, A::Ring);
  EXPECT_LT(hier.seconds, ring.seconds);
  EXPECT_EQ(collectiveCost(cloud, OpType::AllReduce, kGiB, 8).algorithm, A::Hierarchical);
  // DGX-H100, 2 nodes: Bi = 450 < 2 x 8 x 50 = 800: the rails make the ring faster.
  const ClusterSpec dgx = test::clusterPreset("dgx-h100", 2);
  EXPECT_GT(collectiveCost(dgx, OpType::AllReduce, kGiB, 16, A::Hierarchical).seconds,
            collectiveCost(dgx, OpType::AllReduce, kGiB, 16, A::Ring).seconds);
  // One node: hierarchical is the ring, and says so.
  const auto oneNode = collectiveCost(dgx, OpType::AllReduce, kGiB, 8, A::Hierarchical);
  EXPECT_EQ(oneNode.algorithm, A::Ring);
  EXPECT_EQ(oneNode.seconds, collectiveCost(dgx, OpType::AllReduce, kGiB, 8, A::Ring).seconds);
}

TEST(CollectiveCost, BusbwIsAlgbwTimesTheBenchmarkFactor) {
  const ClusterSpec c = test::clusterPreset("dgx-a100", 16);
  for (OpType op : comm::kAllOpTypes) {
    for (std::int64_t ranks : {2, 7, 8, 9, 128}) {
      for (A a : {A::Ring, A::Tree, A::Hierarchical, A::Auto}) {
        const auto cost = collectiveCost(c, op, 123456789, ranks, a);
        ASSERT_GT(cost.seconds, 0);
        EXPECT_DOUBLE_EQ(cost.algbwGBps,
                         op == OpType::Barrier ? 0 : 123456789 / cost.seconds / 1e9);
        EXPECT_DOUBLE_EQ(cost.busbwGBps,
                         cost.algbwGBps * comm::busBandwidthFactor(op, static_cast<int>(ranks)));
      }
    }
  }
}

TEST(CollectiveCost, ExplicitPlacementCostsASubGroupWhereItIs) {
  const ClusterSpec c = test::clusterPreset("dgx-h100", 4);
  // 4 ranks, one per node: every ring link is a NIC.
  const auto spread = collectiveCost(c, OpType::AllReduce, 4 * kGiB, Placement{4, 4, 1}, A::Ring);
  EXPECT_NEAR(spread.busbwGBps, c.interNodeGBps, 0.01 * c.interNodeGBps);
  // The same 4 ranks packed on one node.
  const auto packed = collectiveCost(c, OpType::AllReduce, 4 * kGiB, Placement{4, 1, 4}, A::Ring);
  EXPECT_NEAR(packed.busbwGBps, c.intraNodeGBps, 0.01 * c.intraNodeGBps);
  EXPECT_EQ(collectiveCost(c, OpType::AllReduce, 4 * kGiB, placeNodeByNode(c, 4)).seconds,
            packed.seconds);
}

TEST(CollectiveCost, BadRanksAndPlacementsAreConfigErrors) {
  const ClusterSpec c = test::clusterPreset("dgx-h100", 2);
  for (std::int64_t ranks : {std::int64_t{0}, std::int64_t{-1}, std::int64_t{17}}) {
    try {
      collectiveCost(c, OpType::AllReduce, 8, ranks);
      ADD_FAILURE() << ranks;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("ranks = " + std::to_string(ranks)), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("[1, 16]"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(collectiveCost(c, OpType::AllReduce, 8, Placement{4, 3, 2}), ConfigError);
  EXPECT_THROW(collectiveCost(c, OpType::AllReduce, 8, Placement{4, 1, 9}), ConfigError);
  EXPECT_THROW(collectiveCost(c, OpType::AllReduce, 8, Placement{5, 1, 4}), ConfigError);
  ClusterSpec broken = c;
  broken.interNodeGBps = 0;
  try {
    collectiveCost(broken, OpType::AllReduce, 8, 8);
    ADD_FAILURE();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("cluster.inter_node_GBps"), std::string::npos);
  }
}

TEST(CollectiveCost, AlgorithmNames) {
  for (A a : {A::Ring, A::Tree, A::Hierarchical, A::Auto})
    EXPECT_EQ(parseCollectiveAlgorithm(toString(a)), a);
  EXPECT_EQ(parseCollectiveAlgorithm("nvls"), std::nullopt);
}

TEST(CollectiveCost, CostPerCallDoesNotGrowWithTheWorld) {
  // O(1): the step-level simulator calls this millions of times at 100,000-GPU scale.
  const ClusterSpec c = test::clusterPreset("dgx-h100", 16384);
  auto timeCalls = [&](std::int64_t ranks) {
    constexpr int kCalls = 200000;
    double sink = 0;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) {
      sink +=
          collectiveCost(c, OpType::AllReduce, 1000 + static_cast<std::uint64_t>(i), ranks).seconds;
    }
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    EXPECT_GT(sink, 0);
    return took.count() / kCalls;
  };
  const double small = std::min(timeCalls(8), timeCalls(8));
  const double large = std::min(timeCalls(c.gpus()), timeCalls(c.gpus()));
  RecordProperty("ns_per_call_8_ranks", static_cast<int>(small * 1e9));
  RecordProperty("ns_per_call_131072_ranks", static_cast<int>(large * 1e9));
  EXPECT_LT(large, 2e-6) << "seconds per call";
  EXPECT_LT(large, 5 * small + 2e-7);
}

}  // namespace
}  // namespace stretch::sim
