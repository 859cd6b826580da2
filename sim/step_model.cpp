#include "sim/step_model.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>

namespace stretch::sim {

double expectedMaxOfNormals(std::int64_t n) {
  if (n <= 1) {
    return 0.0;
  }
  static std::mutex mutex;
  static std::map<std::int64_t, double> known;
  const std::lock_guard lock(mutex);
  if (const auto it = known.find(n); it != known.end()) {
    return it->second;
  }
  // E[max] = integral of x * d/dx Phi(x)^n: Simpson's rule on [-9, 9 + sqrt(2 ln n)].
  const double hi = 9.0 + std::sqrt(2.0 * std::log(static_cast<double>(n)));
  const double lo = -9.0;
  constexpr int kIntervals = 20'000;  // even
  const double h = (hi - lo) / kIntervals;
  const double dn = static_cast<double>(n);
  double sum = 0;
  for (int i = 0; i <= kIntervals; ++i) {
    const double x = lo + h * i;
    const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
    const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
    const double f = x * dn * pdf * (cdf > 0 ? std::exp((dn - 1) * std::log(cdf)) : 0.0);
    sum += f * (i == 0 || i == kIntervals ? 1.0 : (i % 2 == 1 ? 4.0 : 2.0));
  }
  const double value = sum * h / 3.0;
  known.emplace(n, value);
  return value;
}

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

  if (p.buckets > 0 && job.computeSpread > 0) {
    const double compute = static_cast<double>(p.gas * p.microNs) * 1e-9;
    p.stragglerNs =
        secondsToNanos(job.computeSpread * compute * expectedMaxOfNormals(dataParallelSize));
  }
  p.overheadNs = secondsToNanos(job.stepOverheadSeconds);
  const SimTime lastStart = (p.gas - 1) * p.microNs;
  // End of the slowest rank's last backward, from the last micro step's start.
  SimTime end = p.stragglerNs + p.microNs;
  SimTime previous = 0;
  for (std::int64_t j = 1; j <= p.buckets; ++j) {
    previous = p.bucketEnd(j, previous);
  }
  end = std::max(end, previous);
  p.stepNs = lastStart + end + p.overheadNs;
  p.exposedCommNs = p.stepNs - p.gas * p.microNs - p.stragglerNs - p.overheadNs;
  return p;
}

}  // namespace stretch::sim
