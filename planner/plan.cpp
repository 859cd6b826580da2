// makePlan and the public pieces of plan.hpp (expected sizes, running world size, job MTBF,
// planned config), the helpers several sections share, and sections 1 (batch) and 5
// (checkpoint portability). Sections 2 and the recovery comparison are in plan_checkpoint.cpp,
// sections 3 and 4 in plan_scale.cpp; what they share is in plan_detail.hpp.

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
#include "planner/plan_detail.hpp"
#include "planner/text_format.hpp"
#include "runtime/common/error.hpp"
#include "sim/step_model.hpp"

namespace stretch::planner {

using namespace detail;

namespace {

// Stationary Monte Carlo runs are cut after about this many failures: enough for the ETTR of one
// replica to average over many failure cycles, short enough for 1,000 seeds to take seconds
// (docs/planner.md, "Monte Carlo").
constexpr double kFailuresPerReplica = 50.0;

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

}  // namespace

namespace detail {

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
}  // namespace detail

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

int threadCount(const PlanInput& input, const PlanOptions& options) {
  int threads = options.threads > 0 ? options.threads : input.settings.threads;
  if (threads <= 0) {
    threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  return threads;
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

}  // namespace

namespace detail {

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

}  // namespace detail

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
                   sc.job.checkpoint.saveSeconds};
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
