#pragma once
// Failure processes: when the next failure strikes and which node it hits. One interface, three
// models (plus "none"), all O(log nodes) or better per failure and O(nodes) memory:
//
//  - Exponential per-node MTBF m: the superposition of the up nodes' Poisson processes is one
//    Poisson process of rate up/m; the node it hits is uniform among the up nodes. Memoryless, so
//    when the set of up nodes changes the pending draw is simply redrawn from that moment:
//    O(1) per failure and per change.
//  - Weibull (shape k, scale m / Gamma(1 + 1/k) so that the mean is m): each node has its own
//    renewal clock, kept in a heap of next-failure times (lazy deletion): O(log nodes).
//    k < 1 gives infant mortality (clustered failures), k > 1 wear-out, k = 1 is exponential.
//  - Trace replay: the failures of a trace at their times, on their nodes (strikes on nodes that
//    are not up at that moment are delivered anyway; the simulation ignores and counts them).
//
// Nodes are indices 0..nodeCount-1. A node is "up" (can fail) while it is in the job; the
// simulation reports every change (nodeUp / nodeDown) and every replacement (nodeRenewed: a new
// machine in the same slot, or a restart after a software failure, restarts the node's clock).
// Times are simulated nanoseconds; draws come from the Rng given at construction, so a process
// is deterministic in its seed and the sequence of calls.
//
// Not thread-safe: one per simulation.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/random.hpp"
#include "sim/scenario.hpp"
#include "sim/scheduler.hpp"

namespace stretch::sim {

struct FailureStrike {
  SimTime time = 0;
  std::int64_t node = 0;
  // Trace replay only: the cause index in the cause table (when the trace names a known cause)
  // and the repair time the trace gives.
  std::optional<std::size_t> cause;
  std::optional<double> repairHours;
};

class FailureProcess {
 public:
  virtual ~FailureProcess() = default;

  virtual void nodeUp(std::int64_t node, SimTime now) = 0;
  virtual void nodeDown(std::int64_t node, SimTime now) = 0;
  // The node's machine was replaced or restarted at `now`: its clock starts again.
  virtual void nodeRenewed(std::int64_t node, SimTime now) = 0;
  // The earliest pending strike (time >= the time of the last call), nullopt when none will come.
  virtual std::optional<FailureStrike> peek() = 0;
  // Removes the strike peek() returned; `now` is its time. The struck node keeps no pending
  // strike until the caller reports what became of it (nodeDown, nodeRenewed).
  virtual void consume(SimTime now) = 0;
};

// Exponential superposition over the up nodes; meanHours is one node's mean time between events.
std::unique_ptr<FailureProcess> makeExponentialProcess(std::int64_t nodeCount, double meanHours,
                                                       std::uint64_t seed);
// Per-node Weibull renewal clocks with mean meanHours.
std::unique_ptr<FailureProcess> makeWeibullProcess(std::int64_t nodeCount, double meanHours,
                                                   double shape, std::uint64_t seed);
// A replayed trace: (time, node index, cause index, repair hours), sorted by time.
std::unique_ptr<FailureProcess> makeTraceProcess(std::vector<FailureStrike> strikes);

// Picks causes by weight: index into the table. Empty table: nullopt (every failure loses its
// node).
class CauseSampler {
 public:
  CauseSampler(const std::vector<FailureCause>& causes, std::uint64_t seed);
  std::optional<std::size_t> sample();
  // Index of the cause named `name` (case-insensitive), nullopt when there is none.
  std::optional<std::size_t> find(const std::string& name) const;

 private:
  std::vector<double> cumulative_;
  std::vector<std::string> lowerNames_;
  Rng rng_;
};

}  // namespace stretch::sim
