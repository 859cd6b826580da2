#pragma once
// The collective cost model: how long one collective takes on a ClusterSpec, as an alpha-beta
// (latency + bytes / bandwidth) formula per algorithm, reported with nccl-tests' algbw and busbw
// (runtime/comm/bandwidth.hpp) so that simulated and measured figures compare directly.
//
// Notation. S = bytes as nccl-tests counts them (the buffer for all_reduce and broadcast, the
// gathered output for all_gather, the full input for reduce_scatter, the send buffer for
// all_to_all, the message for send/recv). n ranks placed node by node: N = ceil(n / G) nodes
// (G = gpus_per_node) with g = min(n, G) ranks each. Bi, Be = per-GPU intra- and inter-node
// bandwidth (bytes/s); ai, ae = per-hop intra- and inter-node latency; a0 = op_latency (a fixed
// cost per collective). f(op, n) = comm::busBandwidthFactor: 2(n-1)/n for all_reduce, (n-1)/n
// for all_gather / reduce_scatter / all_to_all, 1 for broadcast and send/recv.
//
// Ring (NCCL's ring algorithm; Patarasuk & Yuan, JPDC 2009, for its optimality; latency terms as
// NCCL's tuning model, src/graph/tuning.cc, counts them):
//   T = a0 + (steps - interSteps) ai + interSteps ae + f(op, n) S / Bring
//   steps = 2(n-1) for all_reduce (reduce-scatter then all-gather, each step moving S/n),
//   n-1 for all_gather, reduce_scatter and broadcast (pipelined chain); interSteps = 2(N-1),
//   N-1, N-1 likewise (the ring crosses each node boundary once per pass).
//   Bring = Bi on one node. Across nodes NCCL runs one ring per NIC ("rail"), each leaving every
//   node once, so a node's g NICs together carry what one ring link carries and each GPU's
//   NVLink carries (g-1)/g of it: Bring = min(Bi g/(g-1), g Be). This is why nccl-tests reports
//   an inter-node all_reduce busbw near the node's total NIC bandwidth (8 x 24 = 192 GB/s on
//   DGX-A100 with 8 x 200 Gb/s, NVIDIA/nccl#812; ~370-400 GB/s on DGX-H100 with 8 x 400 Gb/s,
//   NVIDIA/nccl-tests#290) and not near one NIC's 25 / 50 GB/s. busbw -> Bring for large S.
// all_to_all (Thakur, Rabenseifner & Gropp 2005, pairwise exchange; NCCL runs it as grouped
// send/recv): T = a0 + (g-1) ai + (n-g) ae + max((g-1)/n S / Bi, (n-g)/n S / Be): the share
// bound for other nodes leaves through the GPU's own NIC. Tree and Hierarchical fall back to it.
// send/recv: T = a0 + a + S / B with the intra- or inter-node hop (rank 0 to rank n-1).
// barrier: no payload; the latency of an all_reduce of nothing with the same algorithm.
//
// Tree (NCCL's tree: a chain inside each node and a double binary tree across nodes, reduce and
// broadcast pipelined; Sanders, Speck & Traeff 2009 for the two trees; NCCL's tuning model):
//   all_reduce: T = a0 + 2((g-1) ai + ceil(log2 N) ae) + 2 S / min(Bi, g Be)
//     (every GPU and every node sends 2S in all: S up the trees and S down; on one node the
//     chain gives 2 S / Bi). busbw -> (n-1)/n min(Bi, g Be): a bit below the ring's, but the
//     latency grows with log N instead of N, so the tree wins for small messages at scale.
//   broadcast: T = a0 + (g-1) ai + ceil(log2 N) ae + S / min(Bi, g Be).
//   all_gather, reduce_scatter: no tree (as in NCCL); the ring's cost is returned.
//
// Hierarchical (intra-node reduce-scatter, inter-node all-reduce of S/g on each of the g rails in
// parallel, intra-node all-gather, one after the other; Thakur et al. 2005 for each phase,
// as Horovod's hierarchical all-reduce and MPICH's SMP-aware collectives do it):
//   all_reduce: T = a0 + 2(g-1) ai + 2(g-1)/g S / Bi + 2(N-1) ae + 2(N-1)/N S / (g Be)
//   reduce_scatter, all_gather: half of that (one phase of each kind).
//   broadcast, and any operation on one node or with one GPU per node (where the formula is
//   the ring's): the ring's cost, reported as ring.
//   For large S it beats the ring exactly when Bi > N g Be (its NIC phase moves less, but its
//   NVLink phases no longer overlap the network): on PCIe / Ethernet nodes with a few nodes, not
//   on DGX-class nodes, which matches NCCL's choice of ring and tree there.
//
// Auto: the cheapest of the three; another algorithm replaces the ring (and hierarchical the
// tree) only when cheaper by more than a relative 1e-9, so ties from rounding go to the ring.
//
// Bounds the model keeps (tests/sim/cost): 1 rank or 0 bytes (except barrier) cost 0; cost is
// non-decreasing in bytes; it is non-decreasing in ranks on clusters whose node NICs together
// are no faster than one GPU's intra-node link and whose inter-node hop is no faster than the
// intra-node one (g Be <= Bi, ae >= ai: every preset), except for all_to_all, whose per-peer
// blocks shrink as ranks are added (spilling onto a second node's NICs can make it faster); on
// one node busbw <= Bi; across N nodes no algorithm's algbw beats the network's lower bound
// (every node must send its share through its g NICs): N/(2(N-1)) g Be for all_reduce,
// N/(N-1) g Be for all_gather and reduce_scatter; the ring's busbw <= Bring.
// Presets give line rates unless they say otherwise; NCCL reaches less (e.g. ~370 of H100's
// 450 GB/s NVLink with the ring, NVIDIA/nccl-tests#212): put measured figures in a preset to
// predict measured times.
//
// Performance: O(1), no allocation, no exception on valid input (called millions of times by the
// step-level simulator).

#include <cstdint>
#include <optional>
#include <string_view>

#include "runtime/comm/types.hpp"
#include "sim/cluster.hpp"

namespace stretch::sim {

enum class CollectiveAlgorithm { Ring, Tree, Hierarchical, Auto };

// "ring", "tree", "hierarchical", "auto".
std::string_view toString(CollectiveAlgorithm algorithm) noexcept;
std::optional<CollectiveAlgorithm> parseCollectiveAlgorithm(std::string_view text) noexcept;

struct CollectiveCost {
  double seconds = 0;
  double algbwGBps = 0;  // bytes / seconds / 1e9 (0 when seconds == 0)
  double busbwGBps = 0;  // algbwGBps * comm::busBandwidthFactor(op, ranks)
  // The algorithm the figures are for: the one asked for, Auto's choice, or Ring where the asked
  // one has no variant for this operation (see above).
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::Ring;
};

// Where a group's ranks sit: `ranks` ranks over `nodes` nodes, at most `ranksPerNode` on a node.
struct Placement {
  std::int64_t ranks = 1;
  std::int64_t nodes = 1;
  std::int64_t ranksPerNode = 1;
};

// ranks placed node by node: nodes = ceil(ranks / gpusPerNode), ranksPerNode = min(ranks,
// gpusPerNode). Throws stretch::ConfigError naming "ranks" unless 1 <= ranks <= cluster.gpus().
Placement placeNodeByNode(const ClusterSpec& cluster, std::int64_t ranks);

// One collective of `bytes` (counted as nccl-tests does, runtime/comm/bandwidth.hpp) over `ranks`
// GPUs placed node by node (ranks <= gpus()). Auto picks the cheapest. Throws
// stretch::ConfigError naming "ranks" when ranks is outside [1, gpus()], or the cluster field
// validateCluster rejects.
CollectiveCost collectiveCost(const ClusterSpec& cluster, comm::OpType op, std::uint64_t bytes,
                              std::int64_t ranks,
                              CollectiveAlgorithm algorithm = CollectiveAlgorithm::Auto);

// The same over an explicit placement (a sub-group spread over nodes). Throws
// stretch::ConfigError naming "placement" unless 1 <= nodes <= cluster.nodes,
// 1 <= ranksPerNode <= gpusPerNode and nodes <= ranks <= nodes * ranksPerNode.
CollectiveCost collectiveCost(const ClusterSpec& cluster, comm::OpType op, std::uint64_t bytes,
                              const Placement& placement,
                              CollectiveAlgorithm algorithm = CollectiveAlgorithm::Auto);

// One message of `bytes` from one GPU to another: a0 + (ai or ae) + bytes / (Bi or Be). algbw
// and busbw are bytes / seconds (factor 1). 0 bytes cost 0.
CollectiveCost pointToPointCost(const ClusterSpec& cluster, std::uint64_t bytes, bool sameNode);

}  // namespace stretch::sim
