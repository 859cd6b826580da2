// Sections 3 and 4 of the plan: the scale table (the world sizes the job reaches, Daly's
// analytic row for each, then Monte Carlo rows) and the recommendation with its reasons.
// makePlan calls them from plan.cpp; what they share with the other sections is in
// plan_detail.hpp.

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

namespace stretch::planner::detail {

namespace {

std::string nodesText(std::int64_t n) {
  return fmt::format("{} node{}", n, n == 1 ? "" : "s");
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
    row.ettr.mean = dalyEttr(row.intervalMinutes, p.saveSeconds / 60.0,
                             p.restartSeconds(row.nodes) / 60.0, row.jobMtbfHours * 60.0);
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
        saves ? r.intervalMinutes : 0.0, r.jobMtbfHours, p.restartSeconds(r.nodes));
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

}  // namespace

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

namespace {

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
                  p.input.scenario.job.recovery.reconfigureSeconds.at(chosen.nodes),
                  p.restartSeconds(chosen.nodes))
            : fmt::format("costs a {:.0f} s restart plus the work since the last checkpoint",
                          p.restartSeconds(chosen.nodes));
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

}  // namespace

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

}  // namespace stretch::planner::detail
