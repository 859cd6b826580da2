// Properties of the collective cost model over random clusters, operations, world sizes and
// message sizes (rapidcheck; the seed is printed and can be replayed with RC_PARAMS="seed=N"):
// finite non-negative costs, 1 rank and empty buffers free, busbw = algbw x the benchmark factor,
// monotone in bytes and in ranks, Auto the cheapest, no algorithm faster than the links allow,
// and hierarchical beating the ring exactly when the model says it should.

#include <algorithm>
#include <cmath>
#include <limits>
#include <rapidcheck.h>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "runtime/comm/bandwidth.hpp"
#include "sim/collective_cost.hpp"

namespace stretch::sim {
namespace {

using comm::OpType;
using A = CollectiveAlgorithm;

constexpr double kRel = 1e-9;  // slack for floating-point rounding

// realistic: the node's NICs together are no faster than one GPU's intra-node link and an
// inter-node hop is no faster than an intra-node one (true of every preset).
ClusterSpec genCluster(bool realistic) {
  ClusterSpec c;
  c.gpusPerNode = *rc::gen::inRange<std::int64_t>(1, 17);
  c.nodes = *rc::gen::oneOf(rc::gen::inRange<std::int64_t>(1, 5),
                            rc::gen::inRange<std::int64_t>(1, 5000));
  c.intraNodeGBps = *rc::gen::inRange(1, 100000) / 100.0;  // 0.01 .. 1000
  c.interNodeGBps = *rc::gen::inRange(1, 20000) / 100.0;
  c.intraLatencyUs = *rc::gen::inRange(0, 5000) / 100.0;
  c.interLatencyUs = *rc::gen::inRange(0, 5000) / 100.0;
  c.opLatencyUs = *rc::gen::inRange(0, 2000) / 100.0;
  if (realistic) {
    c.interNodeGBps =
        std::min(c.interNodeGBps, c.intraNodeGBps / static_cast<double>(c.gpusPerNode));
    c.interLatencyUs = std::max(c.interLatencyUs, c.intraLatencyUs);
  }
  return c;
}

// World sizes, often within a few nodes, where the one-node / multi-node transitions are.
std::int64_t genRanks(const ClusterSpec& c, std::int64_t from = 1) {
  const std::int64_t few = std::max(from, std::min(c.gpus(), 3 * c.gpusPerNode));
  return *rc::gen::oneOf(rc::gen::inRange<std::int64_t>(from, few + 1),
                         rc::gen::inRange<std::int64_t>(from, c.gpus() + 1));
}

OpType genOp() {
  return *rc::gen::elementOf(
      std::vector<OpType>(std::begin(comm::kAllOpTypes), std::end(comm::kAllOpTypes)));
}

A genAlgorithm() {
  return *rc::gen::element(A::Ring, A::Tree, A::Hierarchical, A::Auto);
}

std::uint64_t genBytes() {
  return *rc::gen::oneOf(rc::gen::inRange<std::uint64_t>(0, 4096),
                         rc::gen::inRange<std::uint64_t>(0, std::uint64_t{1} << 36));
}

RC_GTEST_PROP(CollectiveCostProperty, CostsAreFiniteAndBusbwIsTheBenchmarkDefinition, ()) {
  const ClusterSpec c = genCluster(false);
  const OpType op = genOp();
  const A a = genAlgorithm();
  const std::int64_t ranks = genRanks(c);
  const std::uint64_t bytes = genBytes();
  const CollectiveCost cost = collectiveCost(c, op, bytes, ranks, a);
  RC_ASSERT(std::isfinite(cost.seconds));
  RC_ASSERT(cost.seconds >= 0);
  if (ranks == 1 || (bytes == 0 && op != OpType::Barrier)) {
    RC_ASSERT(cost.seconds == 0.0);
  } else if (op != OpType::Barrier) {
    RC_ASSERT(cost.seconds > 0);  // a barrier costs only latency, which may be 0 here
  }
  if (cost.seconds > 0 && op != OpType::Barrier) {
    RC_ASSERT(std::abs(cost.algbwGBps - static_cast<double>(bytes) / cost.seconds / 1e9) <=
              kRel * cost.algbwGBps);
  }
  RC_ASSERT(cost.busbwGBps ==
            cost.algbwGBps * comm::busBandwidthFactor(op, static_cast<int>(ranks)));
  if (a != A::Auto) {
    RC_ASSERT(cost.algorithm == a || cost.algorithm == A::Ring);
  }
}

RC_GTEST_PROP(CollectiveCostProperty, MonotoneInBytes, ()) {
  const ClusterSpec c = genCluster(false);
  const OpType op = genOp();
  const A a = genAlgorithm();
  const std::int64_t ranks = genRanks(c);
  const std::uint64_t b1 = genBytes();
  const std::uint64_t b2 = b1 + *rc::gen::inRange<std::uint64_t>(0, std::uint64_t{1} << 34);
  RC_ASSERT(collectiveCost(c, op, b1, ranks, a).seconds <=
            collectiveCost(c, op, b2, ranks, a).seconds * (1 + kRel));
}

RC_GTEST_PROP(CollectiveCostProperty, MonotoneInRanksOnRealisticClusters, ()) {
  const ClusterSpec c = genCluster(true);
  const OpType op = genOp();
  RC_PRE(op != OpType::AllToAll);
  const A a = genAlgorithm();
  const std::int64_t r1 = genRanks(c);
  const std::int64_t r2 = genRanks(c, r1);
  const std::uint64_t bytes = genBytes();
  RC_ASSERT(collectiveCost(c, op, bytes, r1, a).seconds <=
            collectiveCost(c, op, bytes, r2, a).seconds * (1 + kRel));
}

RC_GTEST_PROP(CollectiveCostProperty, AutoIsTheCheapestAlgorithm, ()) {
  const ClusterSpec c = genCluster(false);
  const OpType op = genOp();
  const std::int64_t ranks = genRanks(c);
  const std::uint64_t bytes = genBytes();
  const CollectiveCost best = collectiveCost(c, op, bytes, ranks, A::Auto);
  double min = std::numeric_limits<double>::infinity();
  for (A a : {A::Ring, A::Tree, A::Hierarchical}) {
    const CollectiveCost cost = collectiveCost(c, op, bytes, ranks, a);
    min = std::min(min, cost.seconds);
    if (cost.algorithm == best.algorithm)
      RC_ASSERT(cost.seconds == best.seconds);
  }
  RC_ASSERT(best.seconds >= min);
  RC_ASSERT(best.seconds <= min * (1 + 2e-9));  // ties within rounding go to the ring
}

RC_GTEST_PROP(CollectiveCostProperty, NoAlgorithmIsFasterThanTheLinksAllow, ()) {
  const ClusterSpec c = genCluster(false);
  const OpType op = genOp();
  const A a = genAlgorithm();
  RC_PRE(c.gpus() >= 2);
  const std::int64_t ranks = genRanks(c, 2);
  const std::uint64_t bytes = *rc::gen::inRange<std::uint64_t>(1, std::uint64_t{1} << 36);
  const CollectiveCost cost = collectiveCost(c, op, bytes, ranks, a);
  const Placement p = placeNodeByNode(c, ranks);
  const double g = static_cast<double>(p.ranksPerNode);
  const double nodes = static_cast<double>(p.nodes);
  if (p.nodes == 1) {
    // Everything moves over the intra-node links.
    RC_ASSERT(cost.busbwGBps <= c.intraNodeGBps * (1 + kRel));
  } else if (op == OpType::AllReduce) {
    // Each node sends at least 2(N-1)/N of the buffer through its g NICs.
    RC_ASSERT(cost.algbwGBps <= nodes / (2 * (nodes - 1)) * g * c.interNodeGBps * (1 + kRel));
  } else if (op == OpType::AllGather || op == OpType::ReduceScatter) {
    RC_ASSERT(cost.algbwGBps <= nodes / (nodes - 1) * g * c.interNodeGBps * (1 + kRel));
  }
  if (cost.algorithm == A::Ring && (op == OpType::AllReduce || op == OpType::AllGather ||
                                    op == OpType::ReduceScatter || op == OpType::Broadcast)) {
    const double ringBandwidth = p.nodes == 1
                                     ? c.intraNodeGBps
                                     : std::min(g > 1 ? c.intraNodeGBps * g / (g - 1)
                                                      : std::numeric_limits<double>::infinity(),
                                                g * c.interNodeGBps);
    RC_ASSERT(cost.busbwGBps <= ringBandwidth * (1 + kRel));
  }
}

RC_GTEST_PROP(CollectiveCostProperty, HierarchicalBeatsTheRingExactlyWhenNvlinkOutrunsAllNics, ()) {
  // Without latency and with whole nodes, hierarchical all_reduce < ring all_reduce
  // <=> Bi > N g Be (sim/collective_cost.hpp). Stay 1 % away from the boundary.
  ClusterSpec c = genCluster(false);
  c.gpusPerNode = *rc::gen::inRange<std::int64_t>(2, 17);
  c.nodes = *rc::gen::inRange<std::int64_t>(2, 200);
  c.intraLatencyUs = c.interLatencyUs = c.opLatencyUs = 0;
  const double boundary = static_cast<double>(c.nodes * c.gpusPerNode) * c.interNodeGBps;
  RC_PRE(std::abs(c.intraNodeGBps / boundary - 1) > 0.01);
  const std::uint64_t bytes = *rc::gen::inRange<std::uint64_t>(1 << 20, std::uint64_t{1} << 36);
  const double hier =
      collectiveCost(c, OpType::AllReduce, bytes, c.gpus(), A::Hierarchical).seconds;
  const double ring = collectiveCost(c, OpType::AllReduce, bytes, c.gpus(), A::Ring).seconds;
  if (c.intraNodeGBps > boundary)
    RC_ASSERT(hier < ring);
  else
    RC_ASSERT(hier > ring);
}

}  // namespace
}  // namespace stretch::sim
