#include "sim/step_model.hpp"

#include <algorithm>

namespace stretch::sim {

StepPlan planStep(const JobSpec& job, const ClusterSpec& cluster, const config::BatchTriple& batch,
                  std::int64_t dataParallelSize, std::int64_t modelParallelSize) {
  StepPlan p;
  p.gas = std::max<std::int64_t>(1, batch.gradientAccumulation);
  p.microBatch = std::max<std::int64_t>(1, batch.microBatchPerGpu);
  p.samplesPerStep = batch.trainBatchSize;
  // At least a nanosecond per micro step: a step of zero time would never end a run.
  p.microNs = std::max<SimTime>(
      1, secondsToNanos(static_cast<double>(p.microBatch) * job.secondsPerSample));
  p.backwardNs = std::clamp<SimTime>(
      secondsToNanos(nanosToSeconds(p.microNs) * job.backwardFraction), 0, p.microNs);
  p.forwardNs = p.microNs - p.backwardNs;
  p.overlap = job.overlapComm && p.backwardNs > 0;

  if (job.gradientBytes > 0 && job.bucketCount > 0 && dataParallelSize > 1) {
    p.buckets = job.bucketCount;
    const auto b = static_cast<std::uint64_t>(p.buckets);
    p.bucketBytes = (job.gradientBytes + b - 1) / b;
    // Data-parallel peers: G / mp per node, or one per node when a model-parallel group fills
    // nodes; the cluster is widened when scale events made the world larger than its node count.
    const std::int64_t g = cluster.gpusPerNode;
    const std::int64_t mp = std::max<std::int64_t>(1, modelParallelSize);
    std::int64_t perNode = mp >= g ? 1 : std::max<std::int64_t>(1, g / mp);
    perNode = std::min(perNode, dataParallelSize);
    Placement placement;
    placement.ranks = dataParallelSize;
    placement.ranksPerNode = perNode;
    placement.nodes = (dataParallelSize + perNode - 1) / perNode;
    ClusterSpec wide = cluster;
    wide.nodes = std::max(wide.nodes, placement.nodes);
    p.bucketCost = collectiveCost(wide, comm::OpType::AllReduce, p.bucketBytes, placement);
    p.bucketNs = secondsToNanos(p.bucketCost.seconds);
  }

  const SimTime lastStart = (p.gas - 1) * p.microNs;
  SimTime end = p.microNs;  // end of the last backward, from the last micro step's start
  SimTime previous = 0;
  for (std::int64_t j = 1; j <= p.buckets; ++j) {
    previous = p.bucketEnd(j, previous);
  }
  end = std::max(end, previous);
  p.stepNs = lastStart + end;
  p.exposedCommNs = p.stepNs - p.gas * p.microNs;
  return p;
}

}  // namespace stretch::sim
