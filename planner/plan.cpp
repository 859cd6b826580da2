#include "planner/plan.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
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
  // Delta method: T = S / g, so the relative CI of T is that of g. T falls as g rises: T's
  // extremes and upper percentiles come from g's lower ones.
  const double rel = row.goodput.ci95 / row.goodput.mean;
  const auto work = static_cast<double>(*samples) / 3600.0;
  auto hoursAt = [&](double g) {
    return g > 0.0 ? work / g : std::numeric_limits<double>::infinity();
  };
  sim::MetricSummary t;
  t.mean = work / row.goodput.mean;
  t.ci95 = t.mean * rel;
  t.min = hoursAt(row.goodput.max);
  t.max = hoursAt(row.goodput.min);
  t.p1 = hoursAt(row.goodput.p99);
  t.p10 = hoursAt(row.goodput.p90);
  t.p50 = hoursAt(row.goodput.p50);
  t.p90 = hoursAt(row.goodput.p10);
  t.p99 = hoursAt(row.goodput.p1);
  row.timeToTrainHours = t;
  auto scaled = [](sim::MetricSummary m, double factor) {
    for (double* x : {&m.mean, &m.ci95, &m.min, &m.max, &m.p1, &m.p10, &m.p50, &m.p90, &m.p99}) {
      *x *= factor;
    }
    return m;
  };
  row.gpuHours = scaled(t, static_cast<double>(row.rentedGpus));
  if (price) {
    row.cost = scaled(*row.gpuHours, *price);
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
    const elasticity::WorldSizeRules rules(c, input.scenario.job.modelParallelSize);
    if (const auto triple = rules.batchFor(gpus)) {
      c.batch.trainBatchSize = triple->trainBatchSize;
      c.batch.microBatchPerGpu = triple->microBatchPerGpu;
      c.batch.gradientAccumulation = triple->gradientAccumulation;
    }
  }
  return c;
}

// ---- the plan ----------------------------------------------------------------------------
//
// One function per section, numbered as plan.hpp and the reports number them (the reports show
// them in that order). makePlan calls them in the order their inputs allow: 1 (batch), 3 (scale:
// which world size wins), 2 (the checkpoint interval at that size), 4 (recommendation), 5
// (portability).

namespace {

// What every section reads: the job, the caller's options and what is derived from them once.
struct Planning {
  const PlanInput& input;
  const PlanOptions& options;
  Reporter& reporter;
  int threads = 1;
  config::DsConfig config;             // effectiveConfig(input)
  std::vector<ExpectedSize> expected;  // expectedSizes(input)
  double saveSeconds = 0.0;            // C
  double restartSeconds = 0.0;         // R = restart overhead + checkpoint load
};

int threadCount(const PlanInput& input, const PlanOptions& options) {
  int threads = options.threads > 0 ? options.threads : input.settings.threads;
  if (threads <= 0) {
    threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  return threads;
}

// The samples the time-to-train figures of a row with global batch `batch` are for.
std::optional<std::int64_t> trainingSamples(const ScaleSection& scale, const sim::Scenario& sc,
                                            std::int64_t batch) {
  std::optional<std::int64_t> samples = scale.totalSamples;
  if (!samples && sc.job.totalSteps) {
    samples = *sc.job.totalSteps * batch;  // fixed batch keys: the batch varies by size
  }
  return samples;
}

// The row that optimises the objective (among the simulated rows only, when asked).
std::size_t bestRow(const ScaleSection& scale, Objective objective, bool simulatedOnly) {
  std::size_t best = scale.rows.size();
  double bestScore = -inf();
  for (std::size_t i = 0; i < scale.rows.size(); ++i) {
    const ScaleRow& r = scale.rows[i];
    if (simulatedOnly && !r.simulated) {
      continue;
    }
    const double s = score(objective, r.ettr.mean, r.goodput.mean, r.rentedGpus);
    if (s > bestScore) {
      bestScore = s;
      best = i;
    }
  }
  return best;
}

// Which world sizes the job reaches, up to the largest expected size (sections 3 and 5).
SizeOracle sizeOracle(const Planning& p) {
  const sim::Scenario& sc = p.input.scenario;
  std::int64_t maxExpected = 0;
  for (const ExpectedSize& e : p.expected) {
    maxExpected = std::max(maxExpected, e.gpus);
  }
  const std::int64_t g = sc.cluster.gpusPerNode;
  return SizeOracle(p.config, sc.job.modelParallelSize, g, sc.agent.selection,
                    std::max(maxExpected, g));
}

// ---- 1. batch ----------------------------------------------------------------------------

BatchSection batchSection(const Planning& p) {
  BatchSection batch = computeBatchSection(p.input, p.config, p.expected);
  if (!batch.versions.front().error.empty()) {
    throw ConfigError(ErrorDetail{
        "job.config.elasticity", fmt::format("version {}", batch.version),
        fmt::format("a section the solver can plan: {}", batch.versions.front().error)});
  }
  return batch;
}

// ---- 2. checkpoint interval at the chosen size -------------------------------------------

// The Monte Carlo sweep of the ETTR over checkpoint intervals at one world size: a log-spaced
// grid plus Young's, Daly's and the configured interval, then a refinement around the best grid
// point, then a hold-out check of the optimum against Daly's and Young's intervals.
class IntervalSweep {
 public:
  IntervalSweep(const Planning& p, const ScaleRow& chosen, CheckpointSection& ck)
      : p_(p), chosen_(chosen), ck_(ck), stepMin_(chosen.stepSeconds / 60.0) {}

  // Fills the checkpoint section's simulated fields and the recommended interval (before
  // quantisation).
  void run(double lo, double hi, std::vector<std::string>& warnings) {
    longest_ =
        std::max({hi, ck_.youngMinutes, ck_.dalyMinutes, ck_.configuredMinutes.value_or(0.0)});
    ck_.reduction = scenarioAt(ck_.dalyMinutes).factor;
    seeds_ = replicasPerInterval(warnings);
    ck_.seeds = seeds_;
    ck_.simulated = true;

    std::vector<double> grid;
    std::vector<std::pair<double, std::string>> first;
    for (int i = 0; i < kGridPoints; ++i) {
      grid.push_back(
          std::exp(std::log(lo) + (std::log(hi) - std::log(lo)) * i / (kGridPoints - 1)));
      first.emplace_back(grid.back(), "grid");
    }
    first.emplace_back(std::max(ck_.dalyMinutes, stepMin_), "daly");
    first.emplace_back(std::max(ck_.youngMinutes, stepMin_), "young");
    if (ck_.configuredMinutes) {
      first.emplace_back(std::max(*ck_.configuredMinutes, stepMin_), "configured");
    }
    evaluate(first);
    const double youngAt = keyOf(std::max(ck_.youngMinutes, stepMin_));
    const double dalyAt = keyOf(std::max(ck_.dalyMinutes, stepMin_));
    for (double& x : grid) {
      x = keyOf(x);
    }
    refine(grid);

    for (const auto& [x, pt] : points_) {
      ck_.curve.push_back(pt);
    }
    ck_.runHours = runCount_ > 0 ? runHoursTotal_ / static_cast<double>(runCount_) : 0.0;
    double opt = points_.begin()->first;
    for (const auto& [x, pt] : points_) {
      if (pt.ettr.mean > points_.at(opt).ettr.mean) {
        opt = x;
      }
    }
    ck_.simulatedOptimumMinutes = opt;
    ck_.simulatedOptimumInSampleEttr = points_.at(opt).ettr;
    ck_.dalySimulatedEttr = points_.at(dalyAt).ettr;
    ck_.youngSimulatedEttr = points_.at(youngAt).ettr;
    choose(opt, dalyAt, youngAt);
  }

 private:
  ReducedScenario scenarioAt(double minutes) const {
    return evaluationScenario(p_.input.scenario, p_.config, chosen_.nodes, chosen_.gpus, minutes,
                              longest_, chosen_.jobMtbfHours, p_.restartSeconds);
  }

  // Replicas: asked for, else kDefaultSweepSeeds unless one pilot run shows the sweep would
  // take longer than the budget (then as many as fit, at least kMinAutoSweepSeeds). A fixed
  // default keeps the plan reproducible: the cut only happens for jobs whose replicas are slow.
  std::int64_t replicasPerInterval(std::vector<std::string>& warnings) const {
    const PlanSettings& settings = p_.input.settings;
    std::int64_t seeds = settings.sweepSeeds > 0 ? settings.sweepSeeds : settings.seeds;
    if (seeds > 0) {
      return seeds;
    }
    seeds = kDefaultSweepSeeds;
    const ReducedScenario pilot = scenarioAt(std::max(ck_.dalyMinutes, stepMin_));
    ReplicaOptions ro;
    ro.seeds = 1;
    ro.threads = 1;
    ro.cancel = p_.options.cancel;
    double one = inf();  // the fastest of three pilot runs: the first also warms caches up
    for (int i = 0; i < 3; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      runReplicas({pilot.scenario}, ro);
      one = std::min(one,
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      if (one * static_cast<double>(seeds) > 10.0 * kSweepBudgetSeconds) {
        break;  // clearly too slow: no need to confirm
      }
    }
    if (p_.options.group != nullptr) {
      // Every rank must choose the same count: rank 0's timing decides.
      std::string mine(sizeof one, '\0');
      std::memcpy(mine.data(), &one, sizeof one);
      const std::vector<std::string> all = p_.options.group->allGather(mine);
      std::memcpy(&one, all.front().data(), sizeof one);
    }
    one = std::max(one, 1e-7);
    const double estimate = one * static_cast<double>(seeds) * kEvaluations / p_.threads;
    if (estimate > kSweepBudgetSeconds) {
      seeds = std::clamp<std::int64_t>(
          static_cast<std::int64_t>(kSweepBudgetSeconds * p_.threads / (one * kEvaluations)),
          kMinAutoSweepSeeds, kDefaultSweepSeeds);
      warnings.push_back(fmt::format(
          "checkpoint sweep: {} replicas per interval instead of {}, since one replica of this "
          "job takes {:.2g} s (--sweep-seeds N asks for more)",
          seeds, kDefaultSweepSeeds, one));
    }
    return seeds;
  }

  // Runs `scenarios` for replicas [first, first + seeds), reporting progress.
  std::vector<std::vector<ReplicaMetrics>> runBatch(const std::vector<sim::Scenario>& scenarios,
                                                    std::int64_t first) {
    ReplicaOptions ro;
    ro.seeds = seeds_;
    ro.firstReplica = first;
    ro.threads = p_.threads;
    ro.cancel = p_.options.cancel;
    ro.group = p_.options.group;
    ro.traceJitterHours.assign(scenarios.size(), std::max(ck_.dalyMinutes, stepMin_) / 120.0);
    const double before = evaluationsDone_;
    const double size = static_cast<double>(scenarios.size());
    ro.onDone = [&](std::int64_t done, std::int64_t total) {
      const double progress =
          (before + size * static_cast<double>(done) / static_cast<double>(total)) / kEvaluations;
      p_.reporter.report("checkpoint", 0.55 + 0.4 * std::min(1.0, progress));
    };
    auto results = runReplicas(scenarios, ro);
    evaluationsDone_ += size;
    return results;
  }

  // Intervals within 0.1 % of an evaluated one are that one (they save at the same steps, or
  // nearly).
  double keyOf(double x) const {
    const auto it = points_.lower_bound(x * (1.0 - 1e-3));
    return it != points_.end() && it->first <= x * (1.0 + 1e-3) ? it->first : x;
  }

  double meanAt(double x) const { return points_.at(x).ettr.mean; }

  void evaluate(const std::vector<std::pair<double, std::string>>& asks) {
    std::vector<sim::Scenario> scenarios;
    std::vector<std::pair<double, std::string>> todo;
    for (const auto& [asked, label] : asks) {
      const double minutes = keyOf(asked);
      if (const auto it = points_.find(minutes); it != points_.end()) {
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
    const double cMin = p_.saveSeconds / 60.0;
    const double rMin = p_.restartSeconds / 60.0;
    const double mMin = chosen_.jobMtbfHours * 60.0;
    const auto results = runBatch(scenarios, 0);
    for (std::size_t i = 0; i < todo.size(); ++i) {
      IntervalPoint pt;
      pt.minutes = todo[i].first;
      pt.label = todo[i].second;
      pt.effectiveMinutes = quantizedInterval(pt.minutes, stepMin_);
      pt.analyticEttr = dalyEttr(pt.effectiveMinutes, cMin, rMin, mMin);
      pt.ettr = summarizeMetric(results[i], &ReplicaMetrics::ettr);
      for (const ReplicaMetrics& m : results[i]) {
        runHoursTotal_ += m.simulatedHours;
        ++runCount_;
      }
      points_[pt.minutes] = pt;
    }
  }

  // Bisects, in log scale, the bracket of grid neighbours around the best grid point, keeping
  // the best of (left half, centre, right half) each round.
  void refine(const std::vector<double>& grid) {
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
      p_.reporter.checkCancel();
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
  }

  // The optimum was picked as the best of many noisy points, so its gain on the same replicas
  // is biased upwards (the winner's curse). The gain is measured again on a fresh, independent
  // set of replicas (a hold-out), paired across the three intervals.
  void choose(double opt, double dalyAt, double youngAt) {
    const sim::Scenario& sc = p_.input.scenario;
    p_.reporter.checkCancel();
    const auto holdout = runBatch(
        {scenarioAt(opt).scenario, scenarioAt(dalyAt).scenario, scenarioAt(youngAt).scenario},
        seeds_);
    // The optimum's own ETTR is reported from the hold-out too: on the replicas it was chosen
    // on it is the maximum of noisy means, biased upwards.
    ck_.simulatedOptimumEttr = summarizeMetric(holdout[0], &ReplicaMetrics::ettr);
    ck_.gainOverDaly = summarizeDifference(holdout[0], holdout[1], &ReplicaMetrics::ettr);
    ck_.gainOverYoung = summarizeDifference(holdout[0], holdout[2], &ReplicaMetrics::ettr);
    const bool significant =
        ck_.gainOverDaly.mean > kMinGain && ck_.gainOverDaly.mean > ck_.gainOverDaly.ci95;
    if (significant) {
      ck_.recommendedSource = "simulated";
      ck_.recommendedMinutes = opt;
      ck_.reason = fmt::format(
          "the simulated optimum ({}) beats Daly's interval ({}) by {:.2f} ± {:.2f} percentage "
          "points of ETTR on {} fresh paired replicas{}",
          minutesText(opt, 0), minutesText(dalyAt, 0), 100.0 * ck_.gainOverDaly.mean,
          100.0 * ck_.gainOverDaly.ci95, seeds_,
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
      ck_.recommendedSource = "daly";
      ck_.recommendedMinutes = dalyAt;
      ck_.reason = fmt::format(
          "Daly's interval: on {} fresh paired replicas the simulated optimum ({}) gains {:+.3f} "
          "± {:.3f} percentage points over it, less than {:.1f} point or within the noise",
          seeds_, minutesText(opt, 0), 100.0 * ck_.gainOverDaly.mean, 100.0 * ck_.gainOverDaly.ci95,
          100.0 * kMinGain);
    }
  }

  // Interval evaluations a sweep runs at most: the grid, Daly, Young and the configured
  // interval, two per refinement round, the three of the hold-out.
  static constexpr double kEvaluations = kGridPoints + 3 + 2 * kRefineRounds + 3;

  const Planning& p_;
  const ScaleRow& chosen_;
  CheckpointSection& ck_;
  const double stepMin_;
  double longest_ = 0.0;  // the longest interval: every scenario gets the same cut (paired)
  std::int64_t seeds_ = 0;
  std::map<double, IntervalPoint> points_;  // by requested minutes
  double runHoursTotal_ = 0.0;
  std::int64_t runCount_ = 0;
  double evaluationsDone_ = 0.0;
};

CheckpointSection checkpointSection(const Planning& p, const ScaleRow& chosen,
                                    const std::string& failureSummary,
                                    std::vector<std::string>& warnings) {
  const sim::Scenario& sc = p.input.scenario;
  const PlanSettings& settings = p.input.settings;
  CheckpointSection ck;
  ck.gpus = chosen.gpus;
  ck.failureModel = failureSummary;
  ck.failures = !std::isinf(chosen.jobMtbfHours);
  ck.jobMtbfHours = chosen.jobMtbfHours;
  ck.saveSeconds = p.saveSeconds;
  ck.restartSeconds = p.restartSeconds;
  ck.stepSeconds = chosen.stepSeconds;
  ck.configuredMinutes = configuredInterval(sc, chosen.stepSeconds);
  const double cMin = p.saveSeconds / 60.0;
  const double rMin = p.restartSeconds / 60.0;
  const double mMin = chosen.jobMtbfHours * 60.0;
  const double stepMin = chosen.stepSeconds / 60.0;
  ck.youngMinutes = youngInterval(cMin, mMin);
  ck.dalyMinutes = dalyInterval(cMin, mMin);
  ck.exactDalyMinutes = exactDalyOptimum(cMin, rMin, mMin);
  ck.dalyEttr =
      dalyEttr(quantizedInterval(std::max(ck.dalyMinutes, stepMin), stepMin), cMin, rMin, mMin);

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
    // Under live recovery a failure costs about one step, and checkpoints only guard against
    // the failures no survivor outlives: the optimum lies far above Daly's interval.
    const double reach = sc.job.recovery.live ? 64.0 : 8.0;
    double hi = settings.intervalMaxMinutes.value_or(std::max(ck.dalyMinutes * reach, lo * 2.0));
    lo = std::max(lo, stepMin);
    hi = std::max(hi, lo * 1.0001);
    IntervalSweep(p, chosen, ck).run(lo, hi, warnings);
  }
  ck.recommendedSteps = intervalSteps(ck.recommendedMinutes, stepMin);
  if (!std::isinf(ck.recommendedMinutes)) {
    ck.recommendedMinutes = quantizedInterval(ck.recommendedMinutes, stepMin);
  }
  return ck;
}

// ---- recovery modes side by side ---------------------------------------------------------

// With recovery.mode live: checkpoint-restart at Daly's interval against live recovery at the
// recommended interval, at the recommended world size, on replicas no other section used.
RecoverySection recoverySection(const Planning& p, const Plan& plan, const ScaleRow& chosen) {
  const sim::Scenario& sc = p.input.scenario;
  const CheckpointSection& ck = plan.checkpoint;
  RecoverySection r;
  if (!sc.job.recovery.live || !ck.failures) {
    return r;
  }
  r.compared = true;
  r.gpus = chosen.gpus;
  r.reconfigureSeconds = sc.job.recovery.reconfigureSeconds;
  r.transferSeconds = sim::stateTransferSeconds(sc);
  const PlanSettings& settings = p.input.settings;
  r.seeds = ck.seeds > 0 ? ck.seeds : settings.seeds > 0 ? settings.seeds : kDefaultSweepSeeds;
  const double stepMin = chosen.stepSeconds / 60.0;
  r.checkpoint.mode = "checkpoint";
  r.checkpoint.intervalMinutes = quantizedInterval(std::max(ck.dalyMinutes, stepMin), stepMin);
  r.checkpoint.intervalSteps = intervalSteps(r.checkpoint.intervalMinutes, stepMin);
  r.live.mode = "live";
  r.live.intervalMinutes = ck.recommendedMinutes;
  r.live.intervalSteps = ck.recommendedSteps;
  const double longest =
      std::max(r.checkpoint.intervalMinutes,
               std::isinf(r.live.intervalMinutes) ? 0.0 : r.live.intervalMinutes);
  sim::Scenario restart = sc;
  restart.job.recovery.live = false;
  auto at = [&](const sim::Scenario& base, double minutes) {
    return evaluationScenario(base, p.config, chosen.nodes, chosen.gpus,
                              std::isinf(minutes) ? std::nullopt : std::optional<double>(minutes),
                              longest, chosen.jobMtbfHours, p.restartSeconds)
        .scenario;
  };
  ReplicaOptions ro;
  ro.seeds = r.seeds;
  ro.firstReplica = 2 * r.seeds;  // after the sweep's replicas and its hold-out
  ro.threads = p.threads;
  ro.cancel = p.options.cancel;
  ro.group = p.options.group;
  ro.traceJitterHours.assign(2, std::max(ck.dalyMinutes, stepMin) / 120.0);
  const auto runs =
      runReplicas({at(restart, r.checkpoint.intervalMinutes), at(sc, r.live.intervalMinutes)}, ro);
  r.checkpoint.ettr = summarizeMetric(runs[0], &ReplicaMetrics::ettr);
  r.live.ettr = summarizeMetric(runs[1], &ReplicaMetrics::ettr);
  r.gain = summarizeDifference(runs[1], runs[0], &ReplicaMetrics::ettr);
  if (const auto samples = trainingSamples(plan.scale, sc, chosen.batch);
      samples && chosen.samplesPerSecond > 0) {
    for (RecoveryMode* m : {&r.checkpoint, &r.live}) {
      if (m->ettr.mean > 0) {
        m->timeToTrainHours =
            static_cast<double>(*samples) / (chosen.samplesPerSecond * m->ettr.mean) / 3600.0;
      }
    }
  }
  return r;
}

// ---- 3. scale table ----------------------------------------------------------------------

// The world sizes the job runs at when the expected sizes are available.
std::set<std::int64_t> candidateSizes(const Planning& p, const SizeOracle& oracle) {
  std::set<std::int64_t> candidates;
  for (const ExpectedSize& e : p.expected) {
    if (const std::int64_t w = oracle.running(e.gpus); w > 0) {
      candidates.insert(w);
    }
  }
  if (candidates.empty()) {
    throw ConfigError(
        ErrorDetail{"plan.world_sizes",
                    fmt::format("{} expected size(s) from {} to {} GPUs", p.expected.size(),
                                p.expected.front().gpus, p.expected.back().gpus),
                    fmt::format("at least one size where the job has a valid world ({})",
                                oracle.rules().describeValid())});
  }
  return candidates;
}

// One row at world size w, with Daly's ETTR at Daly's interval.
ScaleRow analyticRow(const Planning& p, const SizeOracle& oracle, std::int64_t w) {
  const sim::Scenario& sc = p.input.scenario;
  const std::int64_t g = sc.cluster.gpusPerNode;
  const std::int64_t mp = oracle.rules().modelParallelSize();
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
    interval = dalyInterval(p.saveSeconds / 60.0, row.jobMtbfHours * 60.0);
  } else {
    interval = configuredInterval(sc, row.stepSeconds);
  }
  if (interval) {
    row.intervalMinutes = quantizedInterval(std::max(*interval, stepMinutes), stepMinutes);
    row.ettr.mean = dalyEttr(row.intervalMinutes, p.saveSeconds / 60.0, p.restartSeconds / 60.0,
                             row.jobMtbfHours * 60.0);
  } else {
    row.intervalMinutes = inf();  // never saves, never fails
    row.ettr.mean = 1.0;
  }
  row.ettr = sim::exactSummary(row.ettr.mean);
  row.goodput = sim::exactSummary(row.samplesPerSecond * row.ettr.mean);
  return row;
}

// Every candidate row, analytic; the displayed subset marked around the analytic best.
ScaleSection analyticScale(const Planning& p, const SizeOracle& oracle, bool elastic) {
  const sim::Scenario& sc = p.input.scenario;
  const PlanSettings& settings = p.input.settings;
  ScaleSection scale;
  for (const std::int64_t w : candidateSizes(p, oracle)) {
    scale.rows.push_back(analyticRow(p, oracle, w));
  }
  if (sc.job.totalSamples) {
    scale.totalSamples = *sc.job.totalSamples;
  } else if (sc.job.totalSteps && elastic) {
    scale.totalSamples = *sc.job.totalSteps * scale.rows.front().batch;
  }
  for (ScaleRow& row : scale.rows) {
    fillWorkFigures(row, trainingSamples(scale, sc, row.batch), settings.pricePerGpuHour);
  }
  const std::size_t best = bestRow(scale, settings.objective, false);
  for (const std::size_t i : shownRows(scale.rows, best, settings.maxRows)) {
    scale.rows[i].shown = true;
  }
  return scale;
}

// The displayed rows again, as Monte Carlo means and CIs over the seeds.
void simulateScale(const Planning& p, ScaleSection& scale) {
  const sim::Scenario& sc = p.input.scenario;
  const PlanSettings& settings = p.input.settings;
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
        sc, p.config, r.nodes, r.gpus, saves ? std::optional(r.intervalMinutes) : std::nullopt,
        saves ? r.intervalMinutes : 0.0, r.jobMtbfHours, p.restartSeconds);
    indices.push_back(i);
    scenarios.push_back(std::move(e.scenario));
    factors.push_back(e.factor);
  }
  ReplicaOptions ro;
  ro.seeds = settings.seeds;
  ro.threads = p.threads;
  ro.cancel = p.options.cancel;
  ro.group = p.options.group;
  for (const std::size_t i : indices) {
    const double interval = scale.rows[i].intervalMinutes;
    ro.traceJitterHours.push_back(std::isinf(interval) ? 0.0 : interval / 120.0);
  }
  ro.onDone = [&](std::int64_t done, std::int64_t total) {
    p.reporter.report("scale",
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
    fillWorkFigures(row, trainingSamples(scale, sc, row.batch), settings.pricePerGpuHour);
  }
}

ScaleSection scaleSection(const Planning& p, const SizeOracle& oracle, bool elastic) {
  const sim::Scenario& sc = p.input.scenario;
  ScaleSection scale = analyticScale(p, oracle, elastic);
  p.reporter.checkCancel();
  p.reporter.report("scale", 0.12);
  const bool anyFailures = sc.failures.model != sim::FailureModelKind::None || sc.spot;
  if (p.input.settings.seeds > 0 && anyFailures) {
    simulateScale(p, scale);
  }
  return scale;
}

// ---- 4. recommendation -------------------------------------------------------------------

// Why the recommended row wins, what failures cost there and what batch it trains with.
std::string reasons(const Planning& p, const Plan& plan, const Recommendation& rec,
                    std::optional<std::int64_t> samples) {
  const PlanSettings& settings = p.input.settings;
  const ScaleSection& scale = plan.scale;
  const CheckpointSection& ck = plan.checkpoint;
  const ScaleRow& chosen = scale.rows[rec.row];
  // The runner-up by the same objective.
  std::optional<std::size_t> second;
  {
    double secondScore = -inf();
    for (std::size_t i = 0; i < scale.rows.size(); ++i) {
      const ScaleRow& r = scale.rows[i];
      if (i == rec.row || (scale.monteCarlo && !r.simulated)) {
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
    const std::string ettrSource =
        ck.simulated ? fmt::format("simulated over {} replicas", ck.seeds) : "no failures";
    const std::string cost =
        p.input.scenario.job.recovery.live
            ? fmt::format(
                  "under live recovery costs the step in flight and {:g} s of reconfiguration "
                  "(a {:.0f} s restart plus the work since the last checkpoint only when no worker "
                  "survives, or a ZeRO partition is lost with its copy)",
                  p.input.scenario.job.recovery.reconfigureSeconds, p.restartSeconds)
            : fmt::format("costs a {:.0f} s restart plus the work since the last checkpoint",
                          p.restartSeconds);
    failuresText = fmt::format(
        ". At this size the job is interrupted every {} on average ({}), and each interruption "
        "{}; saving every {} ({} steps; {}) balances the {:.0f} s save against that loss, leaving "
        "an ETTR of {:.1f} % ({})",
        hoursText(chosen.jobMtbfHours, "days"), plan.failureSummary, cost,
        minutesText(rec.intervalMinutes, 0), rec.intervalSteps,
        ck.recommendedSource == "simulated" ? "the simulated optimum" : "Daly's optimum",
        p.saveSeconds, 100.0 * rec.ettr, ettrSource);
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
  return why + failuresText + batchText + ".";
}

Recommendation recommendationSection(const Planning& p, const Plan& plan, std::size_t best) {
  const sim::Scenario& sc = p.input.scenario;
  const PlanSettings& settings = p.input.settings;
  const ScaleRow& chosen = plan.scale.rows[best];
  const CheckpointSection& ck = plan.checkpoint;
  Recommendation rec;
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
  rec.ettr = ck.recommendedSource == "simulated" ? ck.simulatedOptimumEttr.mean
             : ck.recommendedSource == "daly"    ? ck.dalySimulatedEttr.mean
                                                 : chosen.ettr.mean;
  rec.goodput = chosen.samplesPerSecond * rec.ettr;
  const std::optional<std::int64_t> samples = trainingSamples(plan.scale, sc, chosen.batch);
  if (samples && rec.goodput > 0.0) {
    rec.timeToTrainHours = static_cast<double>(*samples) / rec.goodput / 3600.0;
    rec.gpuHours = *rec.timeToTrainHours * static_cast<double>(chosen.rentedGpus);
    if (settings.pricePerGpuHour) {
      rec.cost = *rec.gpuHours * *settings.pricePerGpuHour;
    }
  }
  rec.config = plannedConfig(p.input, chosen.gpus);
  rec.configJson = config::toJson(rec.config);
  rec.reasons = reasons(p, plan, rec, samples);
  return rec;
}

// ---- 5. checkpoint portability -----------------------------------------------------------

PortabilitySection portabilitySection(const Planning& p, const SizeOracle& oracle,
                                      const ScaleRow& chosen) {
  PortabilitySection port;
  port.writtenAt = chosen.gpus;
  port.zeroStage = p.config.zero.stage;
  const elasticity::WorldSizeRules& rules = oracle.rules();
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
  if (p.config.zero.stage >= 1) {
    port.notes.push_back(fmt::format(
        "DeepSpeed's own format partitions ZeRO stage {} optimizer state by data-parallel rank: "
        "resuming a DeepSpeed checkpoint at another size needs Universal Checkpointing "
        "(DeepSpeed#2921; the failure is DeepSpeed#3810).",
        p.config.zero.stage));
  } else {
    port.notes.push_back(
        "ZeRO stage 0: DeepSpeed's own checkpoints hold the full optimizer state on rank 0 and "
        "also load at any data-parallel size.");
  }
  const std::int64_t mp = oracle.rules().modelParallelSize();
  if (mp > 1) {
    port.notes.push_back(fmt::format(
        "The model-parallel size ({}) must stay the same: only the data-parallel size changes.",
        mp));
  }
  return port;
}

}  // namespace

Plan makePlan(const PlanInput& input, const PlanOptions& options) {
  const auto wallStart = std::chrono::steady_clock::now();
  Reporter reporter(options);
  const sim::Scenario& sc = input.scenario;

  Plan plan;
  plan.name = input.name;
  plan.description = input.description;
  plan.cluster = sc.cluster;
  plan.settings = input.settings;
  plan.failureSummary = failureSummary(sc);
  plan.warnings = input.warnings;
  plan.threads = threadCount(input, options);

  reporter.report("batch", 0.0);
  const Planning p{input,
                   options,
                   reporter,
                   plan.threads,
                   effectiveConfig(input),
                   expectedSizes(input),
                   sc.job.checkpoint.saveSeconds,
                   sc.job.restartOverheadSeconds + sc.job.checkpoint.loadSeconds};
  plan.batch = batchSection(p);
  reporter.checkCancel();
  reporter.report("scale", 0.08);

  const SizeOracle oracle = sizeOracle(p);
  plan.scale = scaleSection(p, oracle, plan.batch.elastic);
  const std::size_t best = bestRow(plan.scale, input.settings.objective, plan.scale.monteCarlo);
  const ScaleRow& chosen = plan.scale.rows[best];
  reporter.checkCancel();
  reporter.report("checkpoint", 0.55);

  plan.checkpoint = checkpointSection(p, chosen, plan.failureSummary, plan.warnings);
  reporter.checkCancel();
  reporter.report("recommendation", 0.96);

  plan.recommendation = recommendationSection(p, plan, best);
  plan.portability = portabilitySection(p, oracle, chosen);
  plan.recovery = recoverySection(p, plan, chosen);

  plan.wallSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wallStart).count();
  reporter.report("done", 1.0);
  return plan;
}

}  // namespace stretch::planner
