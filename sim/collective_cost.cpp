#include "sim/collective_cost.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "runtime/comm/bandwidth.hpp"
#include "runtime/common/error.hpp"

namespace stretch::sim {

namespace {

using comm::OpType;

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// The cluster's figures in SI units plus the placement, computed once per call.
struct Model {
  double n;          // ranks
  double nodes;      // N
  double g;          // ranks per node
  double bi;         // bytes/s per GPU inside a node
  double be;         // bytes/s per GPU across nodes
  double ai, ae;     // seconds per hop
  double a0;         // seconds per collective
  double log2Nodes;  // ceil(log2 N)
  bool multiNode;

  // Bandwidth a ring reaches (its busbw for large messages).
  double ringBandwidth() const noexcept {
    if (!multiNode)
      return bi;
    const double nvlink = g > 1 ? bi * g / (g - 1) : kInfinity;
    return std::min(nvlink, g * be);
  }
  // Bandwidth of the tree's bottleneck: the chain inside the node or the node's NICs.
  double treeBandwidth() const noexcept {
    if (!multiNode)
      return bi;
    return g > 1 ? std::min(bi, g * be) : be;
  }
};

bool usable(const ClusterSpec& c) noexcept {
  return c.gpusPerNode >= 1 && c.nodes >= 1 && c.interNodeGBps > 0 &&
         (c.gpusPerNode == 1 || c.intraNodeGBps > 0) && c.intraLatencyUs >= 0 &&
         c.interLatencyUs >= 0 && c.opLatencyUs >= 0;
}

void checkCluster(const ClusterSpec& c) {
  if (!usable(c))
    validateCluster(c);  // throws, naming the field
}

Model modelOf(const ClusterSpec& c, const Placement& p) noexcept {
  Model m{};
  m.n = static_cast<double>(p.ranks);
  m.nodes = static_cast<double>(p.nodes);
  m.g = static_cast<double>(p.ranksPerNode);
  m.bi = c.intraNodeGBps * 1e9;
  m.be = c.interNodeGBps * 1e9;
  m.ai = c.intraLatencyUs * 1e-6;
  m.ae = c.interLatencyUs * 1e-6;
  m.a0 = c.opLatencyUs * 1e-6;
  m.multiNode = p.nodes > 1;
  m.log2Nodes = p.nodes > 1
                    ? static_cast<double>(std::bit_width(static_cast<std::uint64_t>(p.nodes - 1)))
                    : 0.0;
  return m;
}

// Seconds for each algorithm; `s` is the byte count as a double.
double ringSeconds(const Model& m, OpType op, double s) noexcept {
  const double n = m.n;
  const double nodes = m.nodes;
  double steps = 0;
  double inter = 0;
  double volume = 0;  // bytes each rank moves over its ring link, per byte of S
  switch (op) {
    case OpType::AllReduce:
      steps = 2 * (n - 1);
      inter = 2 * (nodes - 1);
      volume = 2 * (n - 1) / n;
      break;
    case OpType::Barrier:
      steps = 2 * (n - 1);
      inter = 2 * (nodes - 1);
      break;
    case OpType::AllGather:
    case OpType::ReduceScatter:
      steps = n - 1;
      inter = nodes - 1;
      volume = (n - 1) / n;
      break;
    case OpType::Broadcast:
      steps = n - 1;
      inter = nodes - 1;
      volume = 1;
      break;
    case OpType::AllToAll:
    case OpType::Send:
    case OpType::Recv:
      return 0;  // handled by their own formulas
  }
  return m.a0 + (steps - inter) * m.ai + inter * m.ae + volume * s / m.ringBandwidth();
}

double allToAllSeconds(const Model& m, double s) noexcept {
  const double intraPeers = m.g - 1;
  const double interPeers = m.n - m.g;
  const double intraTime = intraPeers > 0 ? intraPeers / m.n * s / m.bi : 0.0;
  const double interTime = interPeers > 0 ? interPeers / m.n * s / m.be : 0.0;
  return m.a0 + intraPeers * m.ai + interPeers * m.ae + std::max(intraTime, interTime);
}

double pointToPointSeconds(const Model& m, double s, bool sameNode) noexcept {
  return sameNode ? m.a0 + m.ai + s / m.bi : m.a0 + m.ae + s / m.be;
}

// Tree seconds, or a negative number when the operation has no tree variant.
double treeSeconds(const Model& m, OpType op, double s) noexcept {
  const double depth = (m.g - 1) * m.ai + m.log2Nodes * m.ae;
  switch (op) {
    case OpType::AllReduce:
      return m.a0 + 2 * depth + 2 * s / m.treeBandwidth();
    case OpType::Barrier:
      return m.a0 + 2 * depth;
    case OpType::Broadcast:
      return m.a0 + depth + s / m.treeBandwidth();
    default:
      return -1;
  }
}

// Hierarchical seconds, or a negative number when the operation has no hierarchical variant.
double hierarchicalSeconds(const Model& m, OpType op, double s) noexcept {
  if (!m.multiNode || m.g < 2)
    return -1;  // one node, or one GPU per node: there is only the ring
  const double g = m.g;
  const double nodes = m.nodes;
  const double intraBw = g > 1 ? (g - 1) / g * s / m.bi : 0.0;
  const double interBw = m.multiNode ? (nodes - 1) / nodes * s / (g * m.be) : 0.0;
  const double intraLat = (g - 1) * m.ai;
  const double interLat = (nodes - 1) * m.ae;
  switch (op) {
    case OpType::AllReduce:
      return m.a0 + 2 * (intraLat + interLat + intraBw + interBw);
    case OpType::Barrier:
      return m.a0 + 2 * (intraLat + interLat);
    case OpType::AllGather:
    case OpType::ReduceScatter:
      return m.a0 + intraLat + interLat + intraBw + interBw;
    default:
      return -1;
  }
}

CollectiveCost finish(double seconds, CollectiveAlgorithm algorithm, OpType op, std::uint64_t bytes,
                      std::int64_t ranks) noexcept {
  CollectiveCost cost;
  cost.seconds = seconds;
  cost.algorithm = algorithm;
  if (seconds > 0) {
    const int clampedRanks =
        static_cast<int>(std::min<std::int64_t>(ranks, std::numeric_limits<int>::max()));
    const auto bw =
        comm::computeBandwidth(op, static_cast<std::size_t>(bytes), seconds, clampedRanks);
    cost.algbwGBps = bw.algbwGBps;
    cost.busbwGBps = bw.busbwGBps;
  }
  return cost;
}

[[noreturn]] void badPlacement(const Placement& p, const ClusterSpec& c, std::string expected) {
  throw ConfigError(ErrorDetail{
      "placement",
      fmt::format("{} ranks on {} nodes, at most {} per node", p.ranks, p.nodes, p.ranksPerNode),
      fmt::format("{} (cluster \"{}\": {} nodes x {} GPUs)", expected, c.name, c.nodes,
                  c.gpusPerNode)});
}

}  // namespace

std::string_view toString(CollectiveAlgorithm algorithm) noexcept {
  switch (algorithm) {
    case CollectiveAlgorithm::Ring:
      return "ring";
    case CollectiveAlgorithm::Tree:
      return "tree";
    case CollectiveAlgorithm::Hierarchical:
      return "hierarchical";
    case CollectiveAlgorithm::Auto:
      return "auto";
  }
  return "unknown";
}

std::optional<CollectiveAlgorithm> parseCollectiveAlgorithm(std::string_view text) noexcept {
  for (auto a : {CollectiveAlgorithm::Ring, CollectiveAlgorithm::Tree,
                 CollectiveAlgorithm::Hierarchical, CollectiveAlgorithm::Auto}) {
    if (text == toString(a))
      return a;
  }
  return std::nullopt;
}

Placement placeNodeByNode(const ClusterSpec& cluster, std::int64_t ranks) {
  if (ranks < 1 || cluster.gpusPerNode < 1 || ranks > cluster.gpus()) {
    throw ConfigError(
        ErrorDetail{"ranks", std::to_string(ranks),
                    fmt::format("an integer in [1, {}] (cluster \"{}\": {} nodes x {} GPUs)",
                                cluster.gpus(), cluster.name, cluster.nodes, cluster.gpusPerNode)});
  }
  Placement p;
  p.ranks = ranks;
  p.nodes = (ranks + cluster.gpusPerNode - 1) / cluster.gpusPerNode;
  p.ranksPerNode = std::min(ranks, cluster.gpusPerNode);
  return p;
}

CollectiveCost collectiveCost(const ClusterSpec& cluster, comm::OpType op, std::uint64_t bytes,
                              std::int64_t ranks, CollectiveAlgorithm algorithm) {
  return collectiveCost(cluster, op, bytes, placeNodeByNode(cluster, ranks), algorithm);
}

CollectiveCost collectiveCost(const ClusterSpec& cluster, comm::OpType op, std::uint64_t bytes,
                              const Placement& placement, CollectiveAlgorithm algorithm) {
  checkCluster(cluster);
  const Placement& p = placement;
  if (p.nodes < 1 || p.nodes > cluster.nodes)
    badPlacement(p, cluster, "between 1 and the cluster's nodes");
  if (p.ranksPerNode < 1 || p.ranksPerNode > cluster.gpusPerNode)
    badPlacement(p, cluster, "between 1 and gpus_per_node ranks per node");
  if (p.ranks < p.nodes || p.ranks > p.nodes * p.ranksPerNode)
    badPlacement(p, cluster, "at least one rank per node and at most nodes x ranks per node");

  if (op == OpType::Barrier)
    bytes = 0;  // no payload, whatever the caller counted
  // Nothing moves: one rank, or an empty buffer (NCCL returns at once for a count of 0).
  if (p.ranks == 1 || (bytes == 0 && op != OpType::Barrier))
    return finish(0, algorithm == CollectiveAlgorithm::Auto ? CollectiveAlgorithm::Ring : algorithm,
                  op, bytes, p.ranks);

  const Model m = modelOf(cluster, p);
  const double s = static_cast<double>(bytes);

  if (op == OpType::Send || op == OpType::Recv)
    return finish(pointToPointSeconds(m, s, !m.multiNode), CollectiveAlgorithm::Ring, op, bytes,
                  p.ranks);
  if (op == OpType::AllToAll)
    return finish(allToAllSeconds(m, s), CollectiveAlgorithm::Ring, op, bytes, p.ranks);

  const double ring = ringSeconds(m, op, s);
  switch (algorithm) {
    case CollectiveAlgorithm::Ring:
      return finish(ring, CollectiveAlgorithm::Ring, op, bytes, p.ranks);
    case CollectiveAlgorithm::Tree: {
      const double tree = treeSeconds(m, op, s);
      return tree < 0 ? finish(ring, CollectiveAlgorithm::Ring, op, bytes, p.ranks)
                      : finish(tree, CollectiveAlgorithm::Tree, op, bytes, p.ranks);
    }
    case CollectiveAlgorithm::Hierarchical: {
      const double hier = hierarchicalSeconds(m, op, s);
      return hier < 0 ? finish(ring, CollectiveAlgorithm::Ring, op, bytes, p.ranks)
                      : finish(hier, CollectiveAlgorithm::Hierarchical, op, bytes, p.ranks);
    }
    case CollectiveAlgorithm::Auto:
      break;
  }
  // Another algorithm must win by more than rounding: where the formulas coincide (a barrier on
  // one node) the choice stays the ring, the same on every machine.
  constexpr double kMargin = 1 - 1e-9;
  double best = ring;
  CollectiveAlgorithm chosen = CollectiveAlgorithm::Ring;
  if (const double tree = treeSeconds(m, op, s); tree >= 0 && tree < best * kMargin) {
    best = tree;
    chosen = CollectiveAlgorithm::Tree;
  }
  if (const double hier = hierarchicalSeconds(m, op, s); hier >= 0 && hier < best * kMargin) {
    best = hier;
    chosen = CollectiveAlgorithm::Hierarchical;
  }
  return finish(best, chosen, op, bytes, p.ranks);
}

CollectiveCost pointToPointCost(const ClusterSpec& cluster, std::uint64_t bytes, bool sameNode) {
  checkCluster(cluster);
  if (bytes == 0)
    return {};
  if (sameNode && cluster.gpusPerNode == 1)
    sameNode = false;  // no intra-node link to use
  Placement p{2, sameNode ? 1 : 2, sameNode ? 2 : 1};
  const Model m = modelOf(cluster, p);
  return finish(pointToPointSeconds(m, static_cast<double>(bytes), sameNode),
                CollectiveAlgorithm::Ring, OpType::Send, bytes, 2);
}

}  // namespace stretch::sim
