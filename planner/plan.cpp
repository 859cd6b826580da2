#include "planner/plan.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "planner/analytic.hpp"
#include "planner/batch_plan.hpp"
#include "planner/text_format.hpp"
#include "runtime/common/error.hpp"
#include "sim/step_model.hpp"

namespace stretch::planner {

namespace {

// Stationary Monte Carlo runs are cut after about this many failures: enough for the ETTR of one
// replica to average over many failure cycles, short enough for 1,000 seeds to take seconds
// (docs/planner.md, "Monte Carlo").
constexpr double kFailuresPerReplica = 50.0;
// Without seeds or sweep_seeds, the checkpoint sweep runs kDefaultSweepSeeds replicas per
// interval unless that would take longer than this (wall seconds, estimated from one pilot run).
constexpr double kSweepBudgetSeconds = 0.6;
constexpr int kGridPoints = 9;
constexpr int kRefineRounds = 4;
// The simulated optimum replaces Daly's interval only when it gains at least this much ETTR
// (0.1 percentage point) and more than the 95 % CI of the paired gain.
constexpr double kMinGain = 0.001;

class Reporter {
 public:
  explicit Reporter(const PlanOptions& options) : options_(options) {}

  void report(const std::string& stage, double fraction) {
    if (!options_.progress) {
      return;
    }
    std::lock_guard lock(mutex_);
    fraction = std::clamp(fraction, last_, 1.0);
    last_ = fraction;
    options_.progress(PlanProgress{stage, fraction});
  }
  void checkCancel() const {
    if (options_.cancel != nullptr && options_.cancel->load()) {
      throw PlanCancelled();
    }
  }

 private:
  const PlanOptions& options_;
  std::mutex mutex_;
  double last_ = 0.0;
};

double inf() {
  return std::numeric_limits<double>::infinity();
}

std::optional<std::int64_t> nodeIndex(const sim::Scenario& s, const std::string& node) {
  for (std::size_t i = 0; i < s.nodeNames.size(); ++i) {
    if (s.nodeNames[i] == node) {
      return static_cast<std::int64_t>(i);
    }
  }
  std::string digits = node;
  if (s.nodeNames.empty() && digits.size() > 1 && digits[0] == 'n') {
    digits = digits.substr(1);
  }
  if (digits.empty() || digits.size() > 12 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return std::stoll(digits);
}

std::string nodesText(std::int64_t n) {
  return fmt::format("{} node{}", n, n == 1 ? "" : "s");
}

std::string failureSummary(const sim::Scenario& s) {
  const sim::FailureSpec& f = s.failures;
  std::string text;
  switch (f.model) {
    case sim::FailureModelKind::None:
      text = "no failures";
      break;
    case sim::FailureModelKind::Exponential:
      text = fmt::format("exponential, node MTBF {:g} h", f.nodeMtbfHours);
      break;
    case sim::FailureModelKind::Weibull:
      text = fmt::format("Weibull shape {:g}, node MTBF {:g} h", f.shape, f.nodeMtbfHours);
      break;
    case sim::FailureModelKind::Trace:
      text = fmt::format("trace of {} failures", f.trace.size());
      break;
  }
  if (f.model != sim::FailureModelKind::None) {
    switch (f.replacement) {
      case sim::ReplacementKind::Immediate:
        text += ", immediate replacement";
        break;
      case sim::ReplacementKind::Spares:
        text += fmt::format(", {} spare node(s)", f.spares);
        break;
      case sim::ReplacementKind::None:
        text += ", no replacement";
        break;
    }
  }
  if (s.spot) {
    text += fmt::format(", spot preemptions every {:g} h per node",
                        s.spot->nodeMeanHoursBetweenPreemptions);
  }
  return text;
}

// The requested checkpoint interval of the job as configured, in minutes (every_steps converted
// with the step time).
std::optional<double> configuredInterval(const sim::Scenario& s, double stepSeconds) {
  if (s.job.checkpoint.intervalMinutes) {
    return *s.job.checkpoint.intervalMinutes;
  }
  if (s.job.checkpoint.everySteps) {
    return static_cast<double>(*s.job.checkpoint.everySteps) * stepSeconds / 60.0;
  }
  return std::nullopt;
}

// The scenario one Monte Carlo evaluation runs: the job on `nodes` nodes, saving every
// `intervalMinutes`; stationary jobs cut after about kFailuresPerReplica failures; reduced to a
// few nodes when that is exact (replicas.hpp).
// `longestMinutes` is the longest interval of the batch the scenario belongs to: every scenario
// of a batch gets the same cut, so their replicas stay paired.
ReducedScenario evaluationScenario(const sim::Scenario& base, const config::DsConfig& config,
                                   std::int64_t nodes, std::int64_t worldSize,
                                   std::optional<double> intervalMinutes, double longestMinutes,
                                   double mtbfHours, double restartSeconds) {
  sim::Scenario s = base;
  s.job.config = config;
  s.cluster.nodes = nodes;
  if (s.failures.model == sim::FailureModelKind::Trace) {
    // Failures of nodes the smaller job does not have never reach it.
    std::erase_if(s.failures.trace, [&](const sim::TraceFailure& t) {
      const auto index = nodeIndex(base, t.node);
      return index && *index >= nodes;
    });
  }
  s.job.checkpoint.everySteps.reset();
  s.job.checkpoint.intervalMinutes = intervalMinutes;
  if (isStationary(s) && !std::isinf(mtbfHours)) {
    const double cycleHours =
        longestMinutes / 60.0 + (s.job.checkpoint.saveSeconds + restartSeconds) / 3600.0;
    const double cap = std::max(kFailuresPerReplica * mtbfHours, 20.0 * cycleHours);
    s.job.horizonHours = std::min(s.job.horizonHours.value_or(inf()), cap);
  }
  return reduceForMonteCarlo(s, worldSize);
}

// Objective score: larger is better.
double score(Objective objective, double ettr, double goodput, std::int64_t rentedGpus) {
  switch (objective) {
    case Objective::Time:
      return goodput;
    case Objective::Cost:
      return goodput > 0.0 ? goodput / static_cast<double>(rentedGpus) : 0.0;
    case Objective::Ettr:
      return ettr + 1e-12 * goodput;  // ties: the faster
  }
  return 0.0;
}

void fillWorkFigures(ScaleRow& row, std::optional<std::int64_t> samples,
                     std::optional<double> price) {
  row.timeToTrainHours.reset();
  row.gpuHours.reset();
  row.cost.reset();
  if (!samples || !(row.goodput.mean > 0.0)) {
    return;
  }
  // Delta method: T = S / g, so the relative CI of T is that of g.
  const double rel = row.goodput.ci95 / row.goodput.mean;
  sim::MetricSummary t;
  t.mean = static_cast<double>(*samples) / row.goodput.mean / 3600.0;
  t.ci95 = t.mean * rel;
  t.min = row.goodput.max > 0.0 ? static_cast<double>(*samples) / row.goodput.max / 3600.0 : t.mean;
  t.max = row.goodput.min > 0.0 ? static_cast<double>(*samples) / row.goodput.min / 3600.0 : t.mean;
  row.timeToTrainHours = t;
  sim::MetricSummary h = t;
  const auto rented = static_cast<double>(row.rentedGpus);
  h.mean *= rented;
  h.ci95 *= rented;
  h.min *= rented;
  h.max *= rented;
  row.gpuHours = h;
  if (price) {
    sim::MetricSummary c = h;
    c.mean *= *price;
    c.ci95 *= *price;
    c.min *= *price;
    c.max *= *price;
    row.cost = c;
  }
}

std::vector<std::size_t> shownRows(const std::vector<ScaleRow>& rows, std::size_t best,
                                   std::int64_t maxRows) {
  std::set<std::size_t> chosen;
  const auto n = rows.size();
  if (n <= static_cast<std::size_t>(maxRows)) {
    for (std::size_t i = 0; i < n; ++i) {
      chosen.insert(i);
    }
  } else {
    chosen.insert(n - 1);
    chosen.insert(best);
    const double lo = std::log(static_cast<double>(rows.front().gpus));
    const double hi = std::log(static_cast<double>(rows.back().gpus));
    for (std::int64_t j = 0; j < maxRows && static_cast<std::int64_t>(chosen.size()) < maxRows;
         ++j) {
      const double target =
          maxRows > 1 ? lo + (hi - lo) * static_cast<double>(j) / static_cast<double>(maxRows - 1)
                      : hi;
      std::size_t pick = 0;
      double bestDistance = inf();
      for (std::size_t i = 0; i < n; ++i) {
        if (chosen.contains(i)) {
          continue;
        }
        const double d = std::abs(std::log(static_cast<double>(rows[i].gpus)) - target);
        if (d < bestDistance) {
          bestDistance = d;
          pick = i;
        }
      }
      if (!std::isinf(bestDistance)) {
        chosen.insert(pick);
      }
    }
  }
  return {chosen.begin(), chosen.end()};
}

}  // namespace

// ---- pieces ------------------------------------------------------------------------------

std::vector<ExpectedSize> expectedSizes(const PlanInput& input) {
  const sim::Scenario& s = input.scenario;
  const PlanSettings& settings = input.settings;
  const std::int64_t g = s.cluster.gpusPerNode;
  const bool whole = s.agent.selection == agent::NodeSelection::WholeNodes;
  std::vector<ExpectedSize> out;
  if (!settings.expectedSizes.empty() && !settings.expectedFromRange) {
    out = settings.expectedSizes;
  } else {
    std::int64_t lo = 1;
    std::int64_t hi = s.cluster.gpus();
    if (settings.expectedFromRange) {
      lo = settings.expectedSizes.front().gpus;
      hi = settings.expectedSizes.back().gpus;
    } else {
      const config::DsConfig c = effectiveConfig(input);
      if (c.elasticity.enabled) {
        lo = std::max<std::int64_t>(lo, c.elasticity.minGpus);
        hi = std::min<std::int64_t>(hi, c.elasticity.maxGpus);
      }
      if (s.agent.minNodes) {
        lo = std::max(lo, *s.agent.minNodes * g);
      }
      if (s.agent.maxNodes) {
        hi = std::min(hi, *s.agent.maxNodes * g);
      }
    }
    if (whole) {
      for (std::int64_t n = std::max<std::int64_t>(1, (lo + g - 1) / g); n * g <= hi; ++n) {
        out.push_back(ExpectedSize{n * g, 1.0});
      }
    } else {
      for (std::int64_t a = std::max<std::int64_t>(1, lo); a <= hi; ++a) {
        out.push_back(ExpectedSize{a, 1.0});
      }
    }
    if (out.empty()) {
      throw ConfigError(
          ErrorDetail{settings.expectedFromRange ? "plan.world_sizes" : "cluster.nodes",
                      fmt::format("[{}, {}] GPUs", lo, hi),
                      fmt::format("a range holding at least one whole node of {} GPUs", g)});
    }
  }
  double total = 0.0;
  for (const ExpectedSize& e : out) {
    total += e.weight;
  }
  for (ExpectedSize& e : out) {
    e.weight /= total;
  }
  return out;
}

std::int64_t runningWorldSize(const sim::Scenario& scenario, std::int64_t availableGpus) {
  const SizeOracle oracle(scenario.job.config, scenario.job.modelParallelSize,
                          scenario.cluster.gpusPerNode, scenario.agent.selection,
                          std::max<std::int64_t>(availableGpus, 1));
  return oracle.running(availableGpus);
}

double jobMtbfHours(const sim::Scenario& s, std::int64_t nodes) {
  double rate = 0.0;  // interruptions per hour
  const sim::FailureSpec& f = s.failures;
  const auto n = static_cast<double>(nodes);
  switch (f.model) {
    case sim::FailureModelKind::None:
      break;
    case sim::FailureModelKind::Exponential:
    case sim::FailureModelKind::Weibull:
      // A renewal process of mean m strikes 1/m times per hour in the long run, whatever its shape.
      rate += n / f.nodeMtbfHours;
      break;
    case sim::FailureModelKind::Trace: {
      double span = s.job.horizonHours.value_or(0.0);
      double last = 0.0;
      std::int64_t count = 0;
      for (const sim::TraceFailure& t : f.trace) {
        if (s.job.horizonHours && t.atHours > *s.job.horizonHours) {
          continue;
        }
        const auto index = nodeIndex(s, t.node);
        if (!index || *index < nodes) {
          ++count;
          last = std::max(last, t.atHours);
        }
      }
      if (span <= 0.0) {
        span = last;
      }
      if (count > 0 && span > 0.0) {
        rate += static_cast<double>(count) / span;
      }
      break;
    }
  }
  if (s.spot) {
    rate += n / s.spot->nodeMeanHoursBetweenPreemptions;
  }
  return rate > 0.0 ? 1.0 / rate : inf();
}

config::DsConfig plannedConfig(const PlanInput& input, std::int64_t gpus) {
  config::DsConfig c = effectiveConfig(input);
  if (!c.elasticity.enabled) {
    const agent::WorldSizeRules rules(c, input.scenario.job.modelParallelSize);
    if (const auto triple = rules.batchFor(gpus)) {
      c.batch.trainBatchSize = triple->trainBatchSize;
      c.batch.microBatchPerGpu = triple->microBatchPerGpu;
      c.batch.gradientAccumulation = triple->gradientAccumulation;
    }
  }
  return c;
}

// ---- the plan ----------------------------------------------------------------------------

Plan makePlan(const PlanInput& input, const PlanOptions& options) {
  const auto wallStart = std::chrono::steady_clock::now();
  Reporter reporter(options);
  const sim::Scenario& sc = input.scenario;
  const PlanSettings& settings = input.settings;

  Plan plan;
  plan.name = input.name;
  plan.description = input.description;
  plan.cluster = sc.cluster;
  plan.settings = settings;
  plan.failureSummary = failureSummary(sc);
  plan.warnings = input.warnings;
  int threads = options.threads > 0 ? options.threads : settings.threads;
  if (threads <= 0) {
    threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  plan.threads = threads;

  // ---- 1. batch -------------------------------------------------------------------------
  reporter.report("batch", 0.0);
  const config::DsConfig config = effectiveConfig(input);
  const std::vector<ExpectedSize> expected = expectedSizes(input);
  plan.batch = computeBatchSection(input, config, expected);
  if (!plan.batch.versions.front().error.empty()) {
    throw ConfigError(ErrorDetail{
        "job.config.elasticity", fmt::format("version {}", plan.batch.version),
        fmt::format("a section the solver can plan: {}", plan.batch.versions.front().error)});
  }
  reporter.checkCancel();
  reporter.report("scale", 0.08);

  // ---- 3. scale table, analytic ----------------------------------------------------------
  std::int64_t maxExpected = 0;
  for (const ExpectedSize& e : expected) {
    maxExpected = std::max(maxExpected, e.gpus);
  }
  const std::int64_t g = sc.cluster.gpusPerNode;
  const SizeOracle oracle(config, sc.job.modelParallelSize, g, sc.agent.selection,
                          std::max(maxExpected, g));
  std::set<std::int64_t> candidates;
  for (const ExpectedSize& e : expected) {
    if (const std::int64_t w = oracle.running(e.gpus); w > 0) {
      candidates.insert(w);
    }
  }
  if (candidates.empty()) {
    throw ConfigError(
        ErrorDetail{"plan.world_sizes",
                    fmt::format("{} expected size(s) from {} to {} GPUs", expected.size(),
                                expected.front().gpus, expected.back().gpus),
                    fmt::format("at least one size where the job has a valid world ({})",
                                oracle.rules().describeValid())});
  }

  const double saveSeconds = sc.job.checkpoint.saveSeconds;
  const double restartSeconds = sc.job.restartOverheadSeconds + sc.job.checkpoint.loadSeconds;
  const bool anyFailures = sc.failures.model != sim::FailureModelKind::None || sc.spot;
  ScaleSection& scale = plan.scale;
  const std::int64_t mp = oracle.rules().modelParallelSize();
  for (const std::int64_t w : candidates) {
    const config::BatchTriple triple = *oracle.batchFor(w);
    ScaleRow row;
    row.gpus = w;
    row.nodes = (w + g - 1) / g;
    row.rentedGpus = row.nodes * g;
    row.batch = triple.trainBatchSize;
    row.microBatch = triple.microBatchPerGpu;
    row.gradientAccumulation = triple.gradientAccumulation;
    const sim::StepPlan step = sim::planStep(sc.job, sc.cluster, triple, w / mp, mp);
    row.stepSeconds = sim::nanosToSeconds(step.stepNs);
    row.exposedCommSeconds = sim::nanosToSeconds(step.exposedCommNs);
    row.samplesPerSecond = static_cast<double>(triple.trainBatchSize) / row.stepSeconds;
    row.jobMtbfHours = jobMtbfHours(sc, row.nodes);
    const double stepMinutes = row.stepSeconds / 60.0;
    std::optional<double> interval;
    if (!std::isinf(row.jobMtbfHours)) {
      interval = dalyInterval(saveSeconds / 60.0, row.jobMtbfHours * 60.0);
    } else {
      interval = configuredInterval(sc, row.stepSeconds);
    }
    if (interval) {
      row.intervalMinutes = quantizedInterval(std::max(*interval, stepMinutes), stepMinutes);
      row.ettr.mean = dalyEttr(row.intervalMinutes, saveSeconds / 60.0, restartSeconds / 60.0,
                               row.jobMtbfHours * 60.0);
    } else {
      row.intervalMinutes = inf();  // never saves, never fails
      row.ettr.mean = 1.0;
    }
    row.ettr.min = row.ettr.max = row.ettr.mean;
    row.goodput.mean = row.samplesPerSecond * row.ettr.mean;
    row.goodput.min = row.goodput.max = row.goodput.mean;
    scale.rows.push_back(row);
  }
  if (sc.job.totalSamples) {
    scale.totalSamples = *sc.job.totalSamples;
  } else if (sc.job.totalSteps && plan.batch.elastic) {
    scale.totalSamples = *sc.job.totalSteps * scale.rows.front().batch;
  }
  for (ScaleRow& row : scale.rows) {
    std::optional<std::int64_t> samples = scale.totalSamples;
    if (!samples && sc.job.totalSteps) {
      samples = *sc.job.totalSteps * row.batch;  // fixed batch keys: the batch varies by size
    }
    fillWorkFigures(row, samples, settings.pricePerGpuHour);
  }

  auto bestRow = [&](bool simulatedOnly) {
    std::size_t best = scale.rows.size();
    double bestScore = -inf();
    for (std::size_t i = 0; i < scale.rows.size(); ++i) {
      const ScaleRow& r = scale.rows[i];
      if (simulatedOnly && !r.simulated) {
        continue;
      }
      const double s = score(settings.objective, r.ettr.mean, r.goodput.mean, r.rentedGpus);
      if (s > bestScore) {
        bestScore = s;
        best = i;
      }
    }
    return best;
  };
  std::size_t best = bestRow(false);
  for (const std::size_t i : shownRows(scale.rows, best, settings.maxRows)) {
    scale.rows[i].shown = true;
  }
  reporter.checkCancel();
  reporter.report("scale", 0.12);

  // ---- 3. scale table, Monte Carlo ---------------------------------------------------------
  if (settings.seeds > 0 && anyFailures) {
    scale.monteCarlo = true;
    scale.seeds = settings.seeds;
    std::vector<std::size_t> indices;
    std::vector<sim::Scenario> scenarios;
    std::vector<std::int64_t> factors;
    for (std::size_t i = 0; i < scale.rows.size(); ++i) {
      const ScaleRow& r = scale.rows[i];
      if (!r.shown) {
        continue;
      }
      const bool saves = !std::isinf(r.intervalMinutes);
      ReducedScenario e = evaluationScenario(
          sc, config, r.nodes, r.gpus, saves ? std::optional(r.intervalMinutes) : std::nullopt,
          saves ? r.intervalMinutes : 0.0, r.jobMtbfHours, restartSeconds);
      indices.push_back(i);
      scenarios.push_back(std::move(e.scenario));
      factors.push_back(e.factor);
    }
    ReplicaOptions ro;
    ro.seeds = settings.seeds;
    ro.threads = threads;
    ro.cancel = options.cancel;
    for (const std::size_t i : indices) {
      const double interval = scale.rows[i].intervalMinutes;
      ro.traceJitterHours.push_back(std::isinf(interval) ? 0.0 : interval / 120.0);
    }
    ro.onDone = [&](std::int64_t done, std::int64_t total) {
      reporter.report("scale",
                      0.12 + 0.43 * static_cast<double>(done) / static_cast<double>(total));
    };
    const auto results = runReplicas(scenarios, ro);
    for (std::size_t k = 0; k < indices.size(); ++k) {
      ScaleRow& row = scale.rows[indices[k]];
      const auto& runs = results[k];
      row.simulated = true;
      row.reduction = factors[k];
      row.ettr = summarizeMetric(runs, &ReplicaMetrics::ettr);
      std::vector<double> goodput;
      for (const ReplicaMetrics& m : runs) {
        // A reduced run's step time is not the real cluster's: its ETTR carries over, its sample
        // count does not.
        goodput.push_back(row.reduction > 1 || m.simulatedHours <= 0.0
                              ? row.samplesPerSecond * m.ettr
                              : m.samples / (m.simulatedHours * 3600.0));
      }
      row.goodput = sim::summarize(goodput);
      std::optional<std::int64_t> samples = scale.totalSamples;
      if (!samples && sc.job.totalSteps) {
        samples = *sc.job.totalSteps * row.batch;
      }
      fillWorkFigures(row, samples, settings.pricePerGpuHour);
    }
    best = bestRow(true);
  }
  reporter.checkCancel();
  reporter.report("checkpoint", 0.55);

  // ---- 2. checkpoint interval at the chosen size -----------------------------------------------
  const ScaleRow& chosen = scale.rows[best];
  CheckpointSection& ck = plan.checkpoint;
  ck.gpus = chosen.gpus;
  ck.failureModel = plan.failureSummary;
  ck.failures = !std::isinf(chosen.jobMtbfHours);
  ck.jobMtbfHours = chosen.jobMtbfHours;
  ck.saveSeconds = saveSeconds;
  ck.restartSeconds = restartSeconds;
  ck.stepSeconds = chosen.stepSeconds;
  ck.configuredMinutes = configuredInterval(sc, chosen.stepSeconds);
  const double cMin = saveSeconds / 60.0;
  const double rMin = restartSeconds / 60.0;
  const double mMin = chosen.jobMtbfHours * 60.0;
  const double stepMin = chosen.stepSeconds / 60.0;
  ck.youngMinutes = youngInterval(cMin, mMin);
  ck.dalyMinutes = dalyInterval(cMin, mMin);
  ck.exactDalyMinutes = exactDalyOptimum(cMin, rMin, mMin);
  ck.dalyEttr =
      dalyEttr(quantizedInterval(std::max(ck.dalyMinutes, stepMin), stepMin), cMin, rMin, mMin);

  double recommendedEttr = chosen.ettr.mean;
  if (!ck.failures) {
    ck.skipped = "the job never fails: checkpoints only cost time, no interval is optimal";
    ck.recommendedSource = ck.configuredMinutes ? "configured" : "none";
    ck.recommendedMinutes = ck.configuredMinutes.value_or(inf());
    ck.reason = ck.configuredMinutes
                    ? "no failure model: the configured interval is kept (saves guard against "
                      "failures the model does not include)"
                    : "no failure model and no configured interval: no checkpoints are needed";
  } else {
    // Sweep range: the plan's, else Daly's interval / 8 .. x 8, never below one step.
    double lo = settings.intervalMinMinutes.value_or(std::max(ck.dalyMinutes / 8.0, stepMin));
    double hi = settings.intervalMaxMinutes.value_or(std::max(ck.dalyMinutes * 8.0, lo * 2.0));
    lo = std::max(lo, stepMin);
    hi = std::max(hi, lo * 1.0001);

    const double longest =
        std::max({hi, ck.youngMinutes, ck.dalyMinutes, ck.configuredMinutes.value_or(0.0)});
    auto scenarioAt = [&](double minutes) {
      return evaluationScenario(sc, config, chosen.nodes, chosen.gpus, minutes, longest,
                                chosen.jobMtbfHours, restartSeconds);
    };
    ck.reduction = scenarioAt(ck.dalyMinutes).factor;

    // Replicas: asked for, else kDefaultSweepSeeds unless one pilot run shows the sweep would
    // take longer than the budget (then as many as fit, at least kMinAutoSweepSeeds). A fixed
    // default keeps the plan reproducible: the cut only happens for jobs whose replicas are slow.
    std::int64_t seeds = settings.sweepSeeds > 0 ? settings.sweepSeeds : settings.seeds;
    if (seeds <= 0) {
      seeds = kDefaultSweepSeeds;
      const ReducedScenario pilot = scenarioAt(std::max(ck.dalyMinutes, stepMin));
      ReplicaOptions ro;
      ro.seeds = 1;
      ro.threads = 1;
      ro.cancel = options.cancel;
      double one = inf();  // the fastest of three pilot runs: the first also warms caches up
      for (int i = 0; i < 3; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        runReplicas({pilot.scenario}, ro);
        one = std::min(
            one, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        if (one * static_cast<double>(seeds) > 10.0 * kSweepBudgetSeconds) {
          break;  // clearly too slow: no need to confirm
        }
      }
      one = std::max(one, 1e-7);
      const double evaluations = kGridPoints + 3 + 2 * kRefineRounds + 3;
      const double estimate = one * static_cast<double>(seeds) * evaluations / threads;
      if (estimate > kSweepBudgetSeconds) {
        seeds = std::clamp<std::int64_t>(
            static_cast<std::int64_t>(kSweepBudgetSeconds * threads / (one * evaluations)),
            kMinAutoSweepSeeds, kDefaultSweepSeeds);
        plan.warnings.push_back(fmt::format(
            "checkpoint sweep: {} replicas per interval instead of {}, since one replica of this "
            "job takes {:.2g} s (--sweep-seeds N asks for more)",
            seeds, kDefaultSweepSeeds, one));
      }
    }
    ck.seeds = seeds;
    ck.simulated = true;

    std::map<double, IntervalPoint> points;  // by requested minutes
    std::map<double, std::vector<ReplicaMetrics>> runsAt;
    double runHoursTotal = 0.0;
    std::int64_t runCount = 0;
    const double totalEvaluations = kGridPoints + 3 + 2 * kRefineRounds + 3;
    double evaluationsDone = 0.0;
    // Runs `scenarios` for replicas [first, first + seeds), reporting progress.
    auto runBatch = [&](const std::vector<sim::Scenario>& scenarios, std::int64_t first) {
      ReplicaOptions ro;
      ro.seeds = seeds;
      ro.firstReplica = first;
      ro.threads = threads;
      ro.cancel = options.cancel;
      ro.traceJitterHours.assign(scenarios.size(), std::max(ck.dalyMinutes, stepMin) / 120.0);
      const double before = evaluationsDone;
      const double size = static_cast<double>(scenarios.size());
      ro.onDone = [&](std::int64_t done, std::int64_t total) {
        const double progress =
            (before + size * static_cast<double>(done) / static_cast<double>(total)) /
            totalEvaluations;
        reporter.report("checkpoint", 0.55 + 0.4 * std::min(1.0, progress));
      };
      auto results = runReplicas(scenarios, ro);
      evaluationsDone += size;
      return results;
    };
    // Intervals within 0.1 % of an evaluated one are that one (they save at the same steps, or
    // nearly).
    auto keyOf = [&](double x) {
      const auto it = points.lower_bound(x * (1.0 - 1e-3));
      return it != points.end() && it->first <= x * (1.0 + 1e-3) ? it->first : x;
    };
    auto evaluate = [&](const std::vector<std::pair<double, std::string>>& asks) {
      std::vector<sim::Scenario> scenarios;
      std::vector<std::pair<double, std::string>> todo;
      for (const auto& [asked, label] : asks) {
        const double minutes = keyOf(asked);
        if (const auto it = points.find(minutes); it != points.end()) {
          if (it->second.label == "grid" || it->second.label == "refine") {
            it->second.label = label;
          }
          continue;
        }
        if (std::any_of(todo.begin(), todo.end(),
                        [&](const auto& t) { return std::abs(t.first / minutes - 1.0) <= 1e-3; })) {
          continue;
        }
        todo.emplace_back(minutes, label);
        scenarios.push_back(scenarioAt(minutes).scenario);
      }
      if (scenarios.empty()) {
        return;
      }
      const auto results = runBatch(scenarios, 0);
      for (std::size_t i = 0; i < todo.size(); ++i) {
        IntervalPoint p;
        p.minutes = todo[i].first;
        p.label = todo[i].second;
        p.effectiveMinutes = quantizedInterval(p.minutes, stepMin);
        p.analyticEttr = dalyEttr(p.effectiveMinutes, cMin, rMin, mMin);
        p.ettr = summarizeMetric(results[i], &ReplicaMetrics::ettr);
        for (const ReplicaMetrics& m : results[i]) {
          runHoursTotal += m.simulatedHours;
          ++runCount;
        }
        points[p.minutes] = p;
        runsAt[p.minutes] = results[i];
      }
    };
    auto meanAt = [&](double x) { return points.at(x).ettr.mean; };

    std::vector<double> grid;
    std::vector<std::pair<double, std::string>> first;
    for (int i = 0; i < kGridPoints; ++i) {
      grid.push_back(
          std::exp(std::log(lo) + (std::log(hi) - std::log(lo)) * i / (kGridPoints - 1)));
      first.emplace_back(grid.back(), "grid");
    }
    first.emplace_back(std::max(ck.dalyMinutes, stepMin), "daly");
    first.emplace_back(std::max(ck.youngMinutes, stepMin), "young");
    if (ck.configuredMinutes) {
      first.emplace_back(std::max(*ck.configuredMinutes, stepMin), "configured");
    }
    evaluate(first);
    const double youngAt = keyOf(std::max(ck.youngMinutes, stepMin));
    const double dalyAt = keyOf(std::max(ck.dalyMinutes, stepMin));
    for (double& x : grid) {
      x = keyOf(x);
    }

    // Refinement: bisect, in log scale, the bracket of grid neighbours around the best grid point,
    // keeping the best of (left half, centre, right half) each round.
    std::size_t bestGrid = 0;
    for (std::size_t i = 1; i < grid.size(); ++i) {
      if (meanAt(grid[i]) > meanAt(grid[bestGrid])) {
        bestGrid = i;
      }
    }
    double centre = grid[bestGrid];
    double left = bestGrid > 0 ? grid[bestGrid - 1] : centre;
    double right = bestGrid + 1 < grid.size() ? grid[bestGrid + 1] : centre;
    for (int round = 0; round < kRefineRounds; ++round) {
      reporter.checkCancel();
      const double a = keyOf(std::sqrt(left * centre));
      const double b = keyOf(std::sqrt(centre * right));
      std::vector<std::pair<double, std::string>> asks;
      if (a < centre * 0.999) {
        asks.emplace_back(a, "refine");
      }
      if (b > centre * 1.001) {
        asks.emplace_back(b, "refine");
      }
      if (asks.empty()) {
        break;
      }
      evaluate(asks);
      if (a < centre * 0.999 && meanAt(a) > meanAt(centre) &&
          (b <= centre * 1.001 || meanAt(a) >= meanAt(b))) {
        right = centre;
        centre = a;
      } else if (b > centre * 1.001 && meanAt(b) > meanAt(centre)) {
        left = centre;
        centre = b;
      } else {
        left = a < centre * 0.999 ? a : left;
        right = b > centre * 1.001 ? b : right;
      }
    }

    for (const auto& [x, p] : points) {
      ck.curve.push_back(p);
    }
    ck.runHours = runCount > 0 ? runHoursTotal / static_cast<double>(runCount) : 0.0;
    double opt = points.begin()->first;
    for (const auto& [x, p] : points) {
      if (p.ettr.mean > points.at(opt).ettr.mean) {
        opt = x;
      }
    }
    ck.simulatedOptimumMinutes = opt;
    ck.simulatedOptimumEttr = points.at(opt).ettr;
    ck.dalySimulatedEttr = points.at(dalyAt).ettr;
    ck.youngSimulatedEttr = points.at(youngAt).ettr;

    // The optimum was picked as the best of many noisy points, so its gain on the same replicas
    // is biased upwards (the winner's curse). The gain is measured again on a fresh, independent
    // set of replicas (a hold-out), paired across the three intervals.
    reporter.checkCancel();
    const auto holdout = runBatch(
        {scenarioAt(opt).scenario, scenarioAt(dalyAt).scenario, scenarioAt(youngAt).scenario},
        seeds);
    ck.gainOverDaly = summarizeDifference(holdout[0], holdout[1], &ReplicaMetrics::ettr);
    ck.gainOverYoung = summarizeDifference(holdout[0], holdout[2], &ReplicaMetrics::ettr);
    const bool significant =
        ck.gainOverDaly.mean > kMinGain && ck.gainOverDaly.mean > ck.gainOverDaly.ci95;
    recommendedEttr = significant ? points.at(opt).ettr.mean : points.at(dalyAt).ettr.mean;
    if (significant) {
      ck.recommendedSource = "simulated";
      ck.recommendedMinutes = opt;
      ck.reason = fmt::format(
          "the simulated optimum ({}) beats Daly's interval ({}) by {:.2f} ± {:.2f} percentage "
          "points of ETTR on {} fresh paired replicas{}",
          minutesText(opt, 0), minutesText(dalyAt, 0), 100.0 * ck.gainOverDaly.mean,
          100.0 * ck.gainOverDaly.ci95, seeds,
          sc.failures.model == sim::FailureModelKind::Exponential && !sc.spot
              ? std::string(" (the job's finite length and restarts are what Daly's formula "
                            "leaves out)")
              : fmt::format(": {} are not the exponential failures Young's and Daly's "
                            "formulas assume",
                            sc.spot ? std::string("spot preemptions")
                            : sc.failures.model == sim::FailureModelKind::Weibull
                                ? fmt::format("Weibull (shape {:g}) failures", sc.failures.shape)
                                : std::string("replayed trace failures")));
    } else {
      ck.recommendedSource = "daly";
      ck.recommendedMinutes = dalyAt;
      ck.reason = fmt::format(
          "Daly's interval: on {} fresh paired replicas the simulated optimum ({}) gains {:+.3f} "
          "± {:.3f} percentage points over it, less than {:.1f} point or within the noise",
          seeds, minutesText(opt, 0), 100.0 * ck.gainOverDaly.mean, 100.0 * ck.gainOverDaly.ci95,
          100.0 * kMinGain);
    }
  }
  ck.recommendedSteps = intervalSteps(ck.recommendedMinutes, stepMin);
  if (!std::isinf(ck.recommendedMinutes)) {
    ck.recommendedMinutes = quantizedInterval(ck.recommendedMinutes, stepMin);
  }
  reporter.checkCancel();
  reporter.report("recommendation", 0.96);

  // ---- 4. recommendation -----------------------------------------------------------------
  Recommendation& rec = plan.recommendation;
  rec.objective = settings.objective;
  rec.row = best;
  rec.gpus = chosen.gpus;
  rec.nodes = chosen.nodes;
  rec.batch = chosen.batch;
  rec.microBatch = chosen.microBatch;
  rec.gradientAccumulation = chosen.gradientAccumulation;
  rec.intervalMinutes = ck.recommendedMinutes;
  rec.intervalSteps = ck.recommendedSteps;
  // The sweep simulated this very interval: its ETTR is the most faithful figure.
  rec.ettr = recommendedEttr;
  const std::string ettrSource =
      ck.simulated ? fmt::format("simulated over {} replicas", ck.seeds) : "no failures";
  rec.goodput = chosen.samplesPerSecond * rec.ettr;
  std::optional<std::int64_t> samples = scale.totalSamples;
  if (!samples && sc.job.totalSteps) {
    samples = *sc.job.totalSteps * chosen.batch;
  }
  if (samples && rec.goodput > 0.0) {
    rec.timeToTrainHours = static_cast<double>(*samples) / rec.goodput / 3600.0;
    rec.gpuHours = *rec.timeToTrainHours * static_cast<double>(chosen.rentedGpus);
    if (settings.pricePerGpuHour) {
      rec.cost = *rec.gpuHours * *settings.pricePerGpuHour;
    }
  }
  rec.config = plannedConfig(input, chosen.gpus);
  rec.configJson = config::toJson(rec.config);

  // The runner-up by the same objective, for the reasons.
  std::optional<std::size_t> second;
  {
    double secondScore = -inf();
    for (std::size_t i = 0; i < scale.rows.size(); ++i) {
      const ScaleRow& r = scale.rows[i];
      if (i == best || (scale.monteCarlo && !r.simulated)) {
        continue;
      }
      const double s = score(settings.objective, r.ettr.mean, r.goodput.mean, r.rentedGpus);
      if (s > secondScore) {
        secondScore = s;
        second = i;
      }
    }
  }
  std::string why;
  switch (settings.objective) {
    case Objective::Time:
      why = samples
                ? fmt::format(
                      "{} GPUs ({}) train the {} samples fastest: {} at an "
                      "expected ETTR of {:.1f} %",
                      chosen.gpus, nodesText(chosen.nodes), grouped(static_cast<double>(*samples)),
                      hoursText(rec.timeToTrainHours.value_or(inf()), "days"), 100.0 * rec.ettr)
                : fmt::format(
                      "{} GPUs ({}) give the highest goodput: {:.1f} samples/s "
                      "at an expected ETTR of {:.1f} %",
                      chosen.gpus, nodesText(chosen.nodes), rec.goodput, 100.0 * rec.ettr);
      break;
    case Objective::Cost:
      why = fmt::format(
          "{} GPUs ({}) train at the lowest cost per sample{}: {:.1f} samples "
          "per GPU-hour at an expected ETTR of {:.1f} %",
          chosen.gpus, nodesText(chosen.nodes),
          settings.pricePerGpuHour ? "" : " (GPU-hours, no price given)",
          rec.goodput * 3600.0 / static_cast<double>(chosen.rentedGpus), 100.0 * rec.ettr);
      break;
    case Objective::Ettr:
      why = fmt::format(
          "{} GPUs ({}) keep the highest share of wall time training: an "
          "expected ETTR of {:.1f} %",
          chosen.gpus, nodesText(chosen.nodes), 100.0 * rec.ettr);
      break;
  }
  if (second) {
    const ScaleRow& r = scale.rows[*second];
    why += fmt::format(" (next best: {} GPUs, {:.1f} samples/s, ETTR {:.1f} %)", r.gpus,
                       r.goodput.mean, 100.0 * r.ettr.mean);
  }
  std::string failuresText;
  if (ck.failures) {
    failuresText = fmt::format(
        ". At this size the job is interrupted every {} on average ({}), and each interruption "
        "costs a {:.0f} s restart plus the work since the last checkpoint; saving every {} "
        "({} steps; {}) balances the {:.0f} s save against that loss, leaving an ETTR of "
        "{:.1f} % ({})",
        hoursText(chosen.jobMtbfHours, "days"), plan.failureSummary, restartSeconds,
        minutesText(rec.intervalMinutes, 0), rec.intervalSteps,
        ck.recommendedSource == "simulated" ? "the simulated optimum" : "Daly's optimum",
        saveSeconds, 100.0 * rec.ettr, ettrSource);
  } else {
    failuresText = fmt::format(". The failure model has no failures, so {}", ck.reason);
  }
  const std::string batchText = fmt::format(
      ". Each GPU runs micro batch {} with {} accumulation step{}, so the global batch stays {} "
      "({} solver, {} of the expected cluster sizes valid){}",
      rec.microBatch, rec.gradientAccumulation, rec.gradientAccumulation == 1 ? "" : "s", rec.batch,
      plan.batch.elastic ? "elasticity " + plan.batch.version : "fixed batch keys,",
      fmt::format("{:.1f} %", 100.0 * plan.batch.versions.front().coverage.covered),
      rec.timeToTrainHours
          ? fmt::format(". Expected: {} GPU-hours{}", grouped(*rec.gpuHours),
                        rec.cost ? fmt::format(", cost {} at {:g} per GPU-hour", grouped(*rec.cost),
                                               *settings.pricePerGpuHour)
                                 : std::string())
          : std::string());
  rec.reasons = why + failuresText + batchText + ".";

  // ---- 5. checkpoint portability ---------------------------------------------------------
  PortabilitySection& port = plan.portability;
  port.writtenAt = chosen.gpus;
  port.zeroStage = config.zero.stage;
  const agent::WorldSizeRules& rules = oracle.rules();
  const std::vector<std::int64_t>& resumable =
      rules.elastic() ? rules.validGpuCounts() : oracle.sizes();
  for (const std::int64_t w : resumable) {
    const auto triple = rules.batchFor(w);
    if (!triple) {
      continue;
    }
    port.rows.push_back(PortabilityRow{w, triple->microBatchPerGpu, triple->gradientAccumulation,
                                       triple->trainBatchSize,
                                       triple->trainBatchSize == chosen.batch});
  }
  if (rules.elastic()) {
    port.notes.push_back(fmt::format(
        "The global batch is {} at every one of these {} sizes, so the step number, the learning-"
        "rate schedule and the data position (samples consumed = step x {}) carry over unchanged.",
        chosen.batch, port.rows.size(), chosen.batch));
  } else {
    const auto same = std::count_if(port.rows.begin(), port.rows.end(),
                                    [](const PortabilityRow& r) { return r.sameBatch; });
    port.notes.push_back(fmt::format(
        "Without elasticity the batch keys decide the global batch: {} of these {} sizes keep "
        "the batch of {} ({}); at the others the step count and learning-rate schedule no longer "
        "mean the same samples.",
        same, port.rows.size(), chosen.batch, chosen.gpus));
  }
  port.notes.push_back(
      "Stretch checkpoints store the optimizer state by element range of the flat parameter "
      "vector (docs/engine.md, Checkpoints): a checkpoint written at any size loads at any other, "
      "at any ZeRO stage, and the sampler resumes exactly where it stopped.");
  if (config.zero.stage >= 1) {
    port.notes.push_back(fmt::format(
        "DeepSpeed's own format partitions ZeRO stage {} optimizer state by data-parallel rank: "
        "resuming a DeepSpeed checkpoint at another size needs Universal Checkpointing "
        "(DeepSpeed#2921; the failure is DeepSpeed#3810).",
        config.zero.stage));
  } else {
    port.notes.push_back(
        "ZeRO stage 0: DeepSpeed's own checkpoints hold the full optimizer state on rank 0 and "
        "also load at any data-parallel size.");
  }
  if (mp > 1) {
    port.notes.push_back(fmt::format(
        "The model-parallel size ({}) must stay the same: only the data-parallel size changes.",
        mp));
  }

  plan.wallSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wallStart).count();
  reporter.report("done", 1.0);
  return plan;
}

}  // namespace stretch::planner
