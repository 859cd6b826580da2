// Section 2 of the plan, the checkpoint interval at the chosen world size (Young's and Daly's
// intervals, then a Monte Carlo sweep of the ETTR over intervals with a hold-out check), and the
// recovery modes side by side (checkpoint-restart against live recovery). makePlan calls them
// from plan.cpp; what they share with the other sections is in plan_detail.hpp.

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

// Without seeds or sweep_seeds, the checkpoint sweep runs kDefaultSweepSeeds replicas per
// interval unless that would take longer than this (wall seconds, estimated from one pilot run).
constexpr double kSweepBudgetSeconds = 0.6;
constexpr int kGridPoints = 9;
constexpr int kRefineRounds = 4;
// The simulated optimum replaces Daly's interval only when it gains at least this much ETTR
// (0.1 percentage point) and more than the 95 % CI of the paired gain.
constexpr double kMinGain = 0.001;

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
                              longest_, chosen_.jobMtbfHours, p_.restartSeconds(chosen_.nodes));
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
    const double rMin = p_.restartSeconds(chosen_.nodes) / 60.0;
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

}  // namespace

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
  ck.restartSeconds = p.restartSeconds(chosen.nodes);
  ck.stepSeconds = chosen.stepSeconds;
  ck.configuredMinutes = configuredInterval(sc, chosen.stepSeconds);
  const double cMin = p.saveSeconds / 60.0;
  const double rMin = ck.restartSeconds / 60.0;
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
  // Both costs at the recommended size's nodes, and where they come from (given, measured,
  // extrapolated: sim/node_cost.hpp).
  r.nodes = chosen.nodes;
  r.reconfigureSeconds = sc.job.recovery.reconfigureSeconds.at(chosen.nodes);
  r.restartSeconds = p.restartSeconds(chosen.nodes);
  r.reconfigureSource = sc.job.recovery.reconfigureSeconds.describe(chosen.nodes);
  r.restartSource = sc.job.restartOverheadSeconds.describe(chosen.nodes);
  r.detectionSeconds = sc.job.failureDetectionSeconds.at(chosen.nodes);
  r.detectionSource = sc.job.failureDetectionSeconds.describe(chosen.nodes);
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
                              longest, chosen.jobMtbfHours, p.restartSeconds(chosen.nodes))
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
    // Each mode by name: a loop over pointers to the two drew a false -Wstringop-overflow
    // from g++ 12 on the optional's assignment.
    const auto hours = [&](const RecoveryMode& m) -> std::optional<double> {
      if (m.ettr.mean <= 0)
        return std::nullopt;
      return static_cast<double>(*samples) / (chosen.samplesPerSecond * m.ettr.mean) / 3600.0;
    };
    r.checkpoint.timeToTrainHours = hours(r.checkpoint);
    r.live.timeToTrainHours = hours(r.live);
  }
  return r;
}

}  // namespace stretch::planner::detail
