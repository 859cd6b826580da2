#include "planner/replicas.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>

#include <fmt/format.h>

#include "sim/cluster.hpp"
#include "sim/parallel.hpp"
#include "sim/random.hpp"
#include "sim/scheduler.hpp"

namespace stretch::planner {

std::vector<std::vector<ReplicaMetrics>> runReplicas(const std::vector<sim::Scenario>& scenarios,
                                                     const ReplicaOptions& options) {
  const auto count = static_cast<std::int64_t>(scenarios.size());
  const std::int64_t seeds = std::max<std::int64_t>(1, options.seeds);
  std::vector<std::vector<ReplicaMetrics>> results(
      scenarios.size(), std::vector<ReplicaMetrics>(static_cast<std::size_t>(seeds)));
  const std::int64_t total = count * seeds;
  if (total == 0) {
    return results;
  }
  auto cancelled = [&] {
    return options.cancel != nullptr && options.cancel->load(std::memory_order_relaxed);
  };
  // Replica-major order: every scenario's replica r is handed out before replica r + 1, so a
  // cancelled or failing batch stops early for all of them alike.
  auto work = [&](std::int64_t item) {
    const std::int64_t replica = item / count;
    const std::int64_t index = item % count;
    if (cancelled()) {
      throw PlanCancelled();
    }
    sim::RunOptions run;
    run.replica = static_cast<std::uint64_t>(options.firstReplica + replica);
    if (options.cancel != nullptr) {
      run.progress = [&](double) {
        if (cancelled()) {
          throw PlanCancelled();
        }
      };
    }
    const sim::Scenario& base = scenarios[static_cast<std::size_t>(index)];
    const double jitter = static_cast<std::size_t>(index) < options.traceJitterHours.size()
                              ? options.traceJitterHours[static_cast<std::size_t>(index)]
                              : 0.0;
    const bool perturb = jitter > 0.0 && base.failures.model == sim::FailureModelKind::Trace;
    const sim::RunResult r =
        perturb ? sim::simulate(jitteredTrace(base, options.firstReplica + replica, jitter), run)
                : sim::simulate(base, run);
    ReplicaMetrics m;
    m.ettr = r.ettr();
    m.simulatedHours = sim::nanosToHours(r.simulatedNs);
    m.samples = static_cast<double>(r.samples);
    m.failures = static_cast<double>(r.failures + r.preemptions);
    m.finished = r.outcome == sim::Outcome::Finished;
    results[static_cast<std::size_t>(index)][static_cast<std::size_t>(replica)] = m;
  };
  if (options.group == nullptr || options.group->size() <= 1) {
    sim::parallelFor(total, options.threads, work, options.onDone);
    return results;
  }
  // Every rank runs its block of items and sends the metrics; every rank then fills in the
  // others' from the bytes (4 doubles and a flag per item, in item order).
  constexpr std::size_t kItemBytes = 4 * sizeof(double) + 1;
  auto at = [&](std::int64_t item) -> ReplicaMetrics& {
    return results[static_cast<std::size_t>(item % count)][static_cast<std::size_t>(item / count)];
  };
  const std::vector<std::string> blocks =
      sim::runSplit(*options.group, total, [&](std::int64_t first, std::int64_t n) {
        sim::parallelFor(
            n, options.threads, [&](std::int64_t k) { work(first + k); }, options.onDone);
        std::string bytes;
        bytes.reserve(static_cast<std::size_t>(n) * kItemBytes);
        for (std::int64_t item = first; item < first + n; ++item) {
          const ReplicaMetrics& m = at(item);
          for (const double x : {m.ettr, m.simulatedHours, m.samples, m.failures}) {
            bytes.append(reinterpret_cast<const char*>(&x), sizeof x);
          }
          bytes.push_back(m.finished ? '\1' : '\0');
        }
        return bytes;
      });
  for (int r = 0; r < options.group->size(); ++r) {
    const sim::ItemBlock block = sim::itemBlock(total, r, options.group->size());
    const std::string& b = blocks[static_cast<std::size_t>(r)];
    if (b.size() != static_cast<std::size_t>(block.count) * kItemBytes) {
      throw IoError(fmt::format("planner: rank {} sent {} bytes of replica metrics, not {}", r,
                                b.size(), static_cast<std::size_t>(block.count) * kItemBytes));
    }
    const char* p = b.data();
    for (std::int64_t item = block.first; item < block.first + block.count; ++item) {
      ReplicaMetrics& m = at(item);
      for (double* x : {&m.ettr, &m.simulatedHours, &m.samples, &m.failures}) {
        std::memcpy(x, p, sizeof *x);
        p += sizeof *x;
      }
      m.finished = *p++ != '\0';
    }
  }
  return results;
}

sim::Scenario jitteredTrace(const sim::Scenario& scenario, std::int64_t replica,
                            double jitterHours) {
  sim::Scenario s = scenario;
  // A stream of its own, so the jitter does not move the simulator's draws.
  constexpr std::uint64_t kTraceJitterStream = 0x7472616365;  // "trace"
  sim::Rng rng(sim::deriveSeed(s.seed, static_cast<std::uint64_t>(replica), kTraceJitterStream));
  for (sim::TraceFailure& t : s.failures.trace) {
    t.atHours = std::max(0.0, t.atHours + (2.0 * rng.uniform() - 1.0) * jitterHours);
  }
  std::stable_sort(
      s.failures.trace.begin(), s.failures.trace.end(),
      [](const sim::TraceFailure& a, const sim::TraceFailure& b) { return a.atHours < b.atHours; });
  return s;
}

sim::MetricSummary summarizeMetric(const std::vector<ReplicaMetrics>& runs,
                                   double ReplicaMetrics::*metric) {
  std::vector<double> values;
  values.reserve(runs.size());
  for (const ReplicaMetrics& r : runs) {
    values.push_back(r.*metric);
  }
  return sim::summarize(values);
}

sim::MetricSummary summarizeDifference(const std::vector<ReplicaMetrics>& a,
                                       const std::vector<ReplicaMetrics>& b,
                                       double ReplicaMetrics::*metric) {
  std::vector<double> values;
  const std::size_t n = std::min(a.size(), b.size());
  values.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    values.push_back(a[i].*metric - b[i].*metric);
  }
  return sim::summarize(values);
}

bool isStationary(const sim::Scenario& s) noexcept {
  const bool failuresOk = s.failures.model == sim::FailureModelKind::None ||
                          (s.failures.model == sim::FailureModelKind::Exponential &&
                           s.failures.replacement == sim::ReplacementKind::Immediate);
  return failuresOk && !s.spot && s.scaleEvents.empty() && s.script.empty() &&
         s.nodeNames.empty() && !s.agent.minNodes && !s.agent.maxNodes;
}

ReducedScenario reduceForMonteCarlo(const sim::Scenario& scenario, std::int64_t worldSize,
                                    std::int64_t maxNodes) {
  ReducedScenario out{scenario, 1};
  const std::int64_t n = scenario.cluster.nodes;
  const std::int64_t g = scenario.cluster.gpusPerNode;
  if (!isStationary(scenario) || worldSize != n * g || n <= maxNodes) {
    return out;
  }
  std::int64_t best = 1;
  for (std::int64_t k = 2; k <= n && k * g <= sim::kMaxGpusPerNode; ++k) {
    if (n % k != 0) {
      continue;
    }
    best = k;
    if (n / k <= maxNodes) {
      break;
    }
  }
  if (best == 1) {
    return out;
  }
  sim::Scenario& s = out.scenario;
  // Every start of a stationary job is at its n nodes: the costs that grow with the nodes keep
  // their value at n, not at the n / k nodes of the stand-in.
  s.job.restartOverheadSeconds = scenario.job.restartOverheadSeconds.at(n);
  s.job.recovery.reconfigureSeconds = scenario.job.recovery.reconfigureSeconds.at(n);
  s.job.failureDetectionSeconds = scenario.job.failureDetectionSeconds.at(n);
  s.cluster.nodes = n / best;
  s.cluster.gpusPerNode = g * best;
  if (s.failures.model == sim::FailureModelKind::Exponential) {
    s.failures.nodeMtbfHours = scenario.failures.nodeMtbfHours / static_cast<double>(best);
  }
  out.factor = best;
  return out;
}

}  // namespace stretch::planner
