#pragma once
// The engine's step schedule as a cost: how long one optimizer step takes at a world size.
//
// A step is `gas` micro steps (gradient accumulation) of micro_batch samples each; a micro step
// is a forward then a backward (backward_fraction of it). During the last micro step's backward
// the gradients become ready bucket by bucket (bucket j of B at forward + j/B of the backward)
// and are all-reduced over the data-parallel group, one bucket after the other on the network:
//
//   overlap:    bucket j starts at max(ready_j, end_{j-1}), ends c later
//   no overlap: every bucket waits for the end of the backward (DeepSpeed ZeRO 0-2 reduces at the
//               gradient-accumulation boundary unless overlap_comm is set)
//   step = max(end_B, end of the last backward) + overhead (optimizer update, data loading)
//
// with c = collectiveCost(all_reduce, gradient_bytes / B, data-parallel group) from the cluster
// model. Ranks whose compute C per step varies (compute_spread s: standard deviation s * C) meet
// at the reduction: the last micro step ends, and its buckets are ready, straggler = s * C * e(D)
// later, e(D) the expected maximum of D standard normals (0 for one rank or no reduction). Every
// duration is an integer number of nanoseconds, and the step-level simulation schedules exactly
// these events, so the aggregate and step-level modes agree to the nanosecond.

#include <cstdint>
#include <vector>

#include "runtime/config/batch.hpp"
#include "sim/cluster.hpp"
#include "sim/collective_cost.hpp"
#include "sim/scenario.hpp"
#include "sim/scheduler.hpp"

namespace stretch::sim {

struct StepPlan {
  std::int64_t gas = 1;         // micro steps per step
  std::int64_t microBatch = 1;  // samples per micro step per data-parallel rank
  std::int64_t samplesPerStep = 0;
  SimTime microNs = 1;       // one micro step, forward + backward
  SimTime forwardNs = 0;     // its forward part
  SimTime backwardNs = 1;    // its backward part
  std::int64_t buckets = 0;  // all-reduce buckets (0: nothing to reduce)
  std::uint64_t bucketBytes = 0;
  SimTime bucketNs = 0;  // one bucket's all-reduce
  CollectiveCost bucketCost;
  bool overlap = false;
  SimTime stragglerNs = 0;    // the slowest rank's extra compute (0 without a reduction)
  SimTime overheadNs = 0;     // after the reduction: step_overhead_seconds
  SimTime stepNs = 1;         // the whole step
  SimTime exposedCommNs = 0;  // communication the step waits for: stepNs - gas * microNs -
                              // stragglerNs - overheadNs

  // When bucket j (1-based) is ready, from the start of the last micro step.
  SimTime readyOffset(std::int64_t j) const noexcept {
    if (!overlap) {
      return stragglerNs + microNs;
    }
    return stragglerNs + forwardNs + (backwardNs * j) / buckets;
  }
  // End of bucket j's all-reduce given the end of bucket j-1 (both from the last micro step's
  // start); the step-level simulation and the closed form both use it.
  SimTime bucketEnd(std::int64_t j, SimTime previousEnd) const noexcept {
    const SimTime ready = readyOffset(j);
    return (ready > previousEnd ? ready : previousEnd) + bucketNs;
  }
};

// The plan of a step at batch `batch` with `dataParallelSize` ranks of `job` on `cluster`.
// Data-parallel peers are placed as the model-parallel size implies: G / mp peers per node
// (one per node when mp >= G). Throws ConfigError from the cost model for impossible placements.
// E[max of n independent standard normals]: 0 at n = 1, 0.5642 at 2, 1.0294 at 4, 3.8 at 10^5
// (numerical integration, remembered per n).
double expectedMaxOfNormals(std::int64_t n);

StepPlan planStep(const JobSpec& job, const ClusterSpec& cluster, const config::BatchTriple& batch,
                  std::int64_t dataParallelSize, std::int64_t modelParallelSize);

}  // namespace stretch::sim
