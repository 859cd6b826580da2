// Section 2: the simulated checkpoint interval against Young and Daly. With exponential failures
// (Daly's assumption) the planner recommends Daly's interval and the simulation agrees with the
// formula; with Weibull failures of shape 0.7 the simulated optimum beats Daly's interval in
// simulated ETTR, on fresh replicas. Also: the scenario reduction used for speed is exact.

#include <cmath>

#include <gtest/gtest.h>

#include "planner/analytic.hpp"
#include "planner/plan.hpp"
#include "planner/replicas.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::planner {
namespace {

// 32 DGX nodes, node MTBF 320 h: the job fails every 10 h; a 30-day horizon.
std::string exponentialJob(const std::string& failures) {
  return R"({"cluster": {"preset": "dgx-h100", "nodes": 32},
    "job": {"config": {"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": true}},
            "seconds_per_sample_per_gpu": 0.2, "gradient_bytes": 1000000000,
            "horizon_hours": 720,
            "checkpoint": {"interval_minutes": 60, "save_seconds": 60, "load_seconds": 60},
            "restart_overhead_seconds": 240},
    "failures": )" +
         failures + R"(,
    "seed": 99,
    "plan": {"world_sizes": {"min_gpus": 256, "max_gpus": 256}, "sweep_seeds": 300}})";
}

// 64 DGX nodes, node MTBF 640 h, exponential failures (a stationary process), 500 h, a
// checkpoint every 20 min; `restart` is the job's "restart_overhead_seconds" and what follows it.
PlanInput stationaryJob(const std::string& restart) {
  return parsePlanInput(R"({"cluster": {"preset": "dgx-h100", "nodes": 64},
          "job": {"config": {"train_micro_batch_size_per_gpu": 4},
                  "seconds_per_sample_per_gpu": 0.2, "horizon_hours": 500,
                  "checkpoint": {"interval_minutes": 20, "save_seconds": 30},
                  "restart_overhead_seconds": )" +
                            restart + R"(},
          "failures": {"model": "exponential", "node_mtbf_hours": 640}})",
                        test::fixturePath("plans"));
}

TEST(PlannerCheckpoint, ExponentialRecommendsDalysInterval) {
  const PlanInput in = parsePlanInput(
      exponentialJob(
          R"({"model": "exponential", "node_mtbf_hours": 320, "replacement": "immediate"})"),
      test::fixturePath("plans"));
  const Plan plan = makePlan(in);
  const CheckpointSection& c = plan.checkpoint;
  ASSERT_TRUE(c.failures);
  ASSERT_TRUE(c.simulated) << c.skipped;
  EXPECT_EQ(c.gpus, 256);
  EXPECT_NEAR(c.jobMtbfHours, 10.0, 1e-9);
  // C = 1 min, M = 600 min.
  EXPECT_NEAR(c.youngMinutes, std::sqrt(2.0 * 1.0 * 600.0), 1e-9);
  EXPECT_NEAR(c.dalyMinutes, dalyInterval(1.0, 600.0), 1e-9);
  EXPECT_EQ(c.seeds, 300);

  // The recommendation is within 5 % of Daly's interval (whole steps).
  EXPECT_NEAR(c.recommendedMinutes / c.dalyMinutes, 1.0, 0.05) << c.reason;
  EXPECT_EQ(plan.recommendation.intervalMinutes, c.recommendedMinutes);
  // The simulation agrees with Daly's formula at Daly's interval (within 1 percentage point) and
  // its optimum is no better than noise: the ETTR curve is flat there.
  EXPECT_NEAR(c.dalySimulatedEttr.mean, c.dalyEttr, 0.01);
  EXPECT_LT(c.gainOverDaly.mean, 0.003);
  EXPECT_GT(c.simulatedOptimumMinutes, 0.5 * c.dalyMinutes);
  EXPECT_LT(c.simulatedOptimumMinutes, 2.0 * c.dalyMinutes);
  // The sweep is a real curve: far from the optimum the ETTR is clearly lower.
  EXPECT_LT(c.curve.front().ettr.mean, c.dalySimulatedEttr.mean - 0.01);
  EXPECT_LT(c.curve.back().ettr.mean, c.dalySimulatedEttr.mean - 0.01);
  for (const IntervalPoint& p : c.curve) {
    EXPECT_NEAR(p.ettr.mean, p.analyticEttr, 0.015) << p.minutes << " min";
  }
}

TEST(PlannerCheckpoint, WeibullSimulatedOptimumBeatsDaly) {
  PlanInput in = loadPlanInput(test::fixturePath("plans/weibull.json"));
  ASSERT_EQ(in.scenario.failures.model, sim::FailureModelKind::Weibull);
  ASSERT_DOUBLE_EQ(in.scenario.failures.shape, 0.7);
  in.settings.sweepSeeds = 200;
  const Plan plan = makePlan(in);
  const CheckpointSection& c = plan.checkpoint;
  ASSERT_TRUE(c.simulated) << c.skipped;
  EXPECT_EQ(c.reduction, 1);  // Weibull renewals are not reducible
  // On replicas the optimum was not chosen on (a hold-out), it gains ETTR over Daly's interval,
  // beyond the 95 % CI of the paired difference.
  EXPECT_GT(c.gainOverDaly.mean, 0.0);
  EXPECT_GT(c.gainOverDaly.mean, c.gainOverDaly.ci95)
      << c.gainOverDaly.mean << " ± " << c.gainOverDaly.ci95;
  EXPECT_GT(c.simulatedOptimumEttr.mean, c.dalySimulatedEttr.mean);
  EXPECT_EQ(c.recommendedSource, "simulated") << c.reason;
  // Infant mortality: failures come faster than the mean suggests, so the optimum is shorter.
  EXPECT_LT(c.simulatedOptimumMinutes, c.dalyMinutes);
  // And the mean-based formula overestimates the ETTR.
  EXPECT_LT(c.dalySimulatedEttr.mean, c.dalyEttr);
}

TEST(PlannerCheckpoint, NoFailuresNoSweep) {
  const PlanInput in =
      parsePlanInput(exponentialJob(R"({"model": "none"})"), test::fixturePath("plans"));
  const Plan plan = makePlan(in);
  EXPECT_FALSE(plan.checkpoint.failures);
  EXPECT_FALSE(plan.checkpoint.simulated);
  EXPECT_FALSE(plan.checkpoint.skipped.empty());
  EXPECT_EQ(plan.checkpoint.recommendedSource, "configured");
  EXPECT_NEAR(plan.checkpoint.recommendedMinutes, 60.0, 0.1);
  // Without failures the only loss is the save itself: tau / (tau + C).
  const ScaleRow& row = plan.scale.rows[plan.recommendation.row];
  EXPECT_NEAR(row.ettr.mean, row.intervalMinutes / (row.intervalMinutes + 1.0), 1e-12);
}

TEST(PlannerCheckpoint, ReductionOfStationaryScenariosIsExact) {
  const PlanInput in = stationaryJob("300");
  ASSERT_TRUE(isStationary(in.scenario));
  const ReducedScenario reduced = reduceForMonteCarlo(in.scenario, 512, 16);
  EXPECT_EQ(reduced.factor, 4);
  EXPECT_EQ(reduced.scenario.cluster.nodes, 16);
  EXPECT_EQ(reduced.scenario.cluster.gpusPerNode, 32);
  EXPECT_DOUBLE_EQ(reduced.scenario.failures.nodeMtbfHours, 160.0);
  // Not every node runs workers: unchanged.
  EXPECT_EQ(reduceForMonteCarlo(in.scenario, 504, 16).factor, 1);

  ReplicaOptions o;
  o.seeds = 200;
  const auto runs = runReplicas({in.scenario, reduced.scenario}, o);
  const auto full = summarizeMetric(runs[0], &ReplicaMetrics::ettr);
  const auto small = summarizeMetric(runs[1], &ReplicaMetrics::ettr);
  const auto fullFailures = summarizeMetric(runs[0], &ReplicaMetrics::failures);
  const auto smallFailures = summarizeMetric(runs[1], &ReplicaMetrics::failures);
  // The same Poisson process of failures (rate 64 / 640 per hour: 50 in 500 h) ...
  EXPECT_NEAR(fullFailures.mean, 50.0, 3 * fullFailures.ci95 + 1.0);
  EXPECT_NEAR(smallFailures.mean, fullFailures.mean, 3 * (fullFailures.ci95 + smallFailures.ci95));
  // ... and the same ETTR.
  EXPECT_NEAR(small.mean, full.mean, 2 * (full.ci95 + small.ci95));

  sim::Scenario weibull = in.scenario;
  weibull.failures.model = sim::FailureModelKind::Weibull;
  weibull.failures.shape = 0.7;
  EXPECT_FALSE(isStationary(weibull));
  EXPECT_EQ(reduceForMonteCarlo(weibull, 512, 16).factor, 1);
}

// A cost that grows with the nodes keeps its value at the real job's node count in the stand-in
// of fewer, larger nodes: every start of the stationary job is at all its nodes.
TEST(PlannerCheckpoint, ReductionKeepsNodeDependentCostsAtTheFullNodeCount) {
  const PlanInput in = stationaryJob(R"({"fixed_seconds": 60, "per_node_seconds": 4},
      "recovery": {"mode": "live",
                   "reconfigure_seconds": {"points": [{"nodes": 32, "seconds": 8}]}})");
  ASSERT_TRUE(isStationary(in.scenario));
  const ReducedScenario reduced = reduceForMonteCarlo(in.scenario, 512, 16);
  ASSERT_EQ(reduced.factor, 4);
  ASSERT_EQ(reduced.scenario.cluster.nodes, 16);
  const sim::JobSpec& job = reduced.scenario.job;
  EXPECT_TRUE(job.restartOverheadSeconds.constant());
  EXPECT_DOUBLE_EQ(job.restartOverheadSeconds.at(16), 60.0 + 4.0 * 64);  // not 60 + 4 x 16
  EXPECT_TRUE(job.recovery.reconfigureSeconds.constant());
  EXPECT_DOUBLE_EQ(job.recovery.reconfigureSeconds.at(16), 16.0);  // 8 s at 32 nodes, x 2
  // Not reduced: the scenario keeps its functions.
  EXPECT_FALSE(
      reduceForMonteCarlo(in.scenario, 504, 16).scenario.job.restartOverheadSeconds.constant());
}

TEST(PlannerCheckpoint, ReplicasDoNotDependOnThreads) {
  const PlanInput in =
      parsePlanInput(exponentialJob(R"({"model": "exponential", "node_mtbf_hours": 320})"),
                     test::fixturePath("plans"));
  ReplicaOptions one;
  one.seeds = 16;
  one.threads = 1;
  ReplicaOptions many = one;
  many.threads = 4;
  const auto a = runReplicas({in.scenario}, one);
  const auto b = runReplicas({in.scenario}, many);
  for (std::size_t i = 0; i < a[0].size(); ++i) {
    EXPECT_EQ(a[0][i].ettr, b[0][i].ettr);
    EXPECT_EQ(a[0][i].samples, b[0][i].samples);
  }
  // A fresh set of replicas differs.
  ReplicaOptions fresh = one;
  fresh.firstReplica = 16;
  const auto c = runReplicas({in.scenario}, fresh);
  EXPECT_NE(summarizeMetric(a[0], &ReplicaMetrics::ettr).mean,
            summarizeMetric(c[0], &ReplicaMetrics::ettr).mean);
}

}  // namespace
}  // namespace stretch::planner

namespace stretch::planner {
namespace {

TEST(PlannerCheckpoint, TraceJitterIsBoundedAndPaired) {
  const PlanInput in = loadPlanInput(test::fixturePath("plans/trace.json"));
  ASSERT_EQ(in.scenario.failures.model, sim::FailureModelKind::Trace);
  const auto& original = in.scenario.failures.trace;
  const sim::Scenario a = jitteredTrace(in.scenario, 3, 0.5);
  const sim::Scenario b = jitteredTrace(in.scenario, 3, 0.5);
  const sim::Scenario c = jitteredTrace(in.scenario, 4, 0.5);
  ASSERT_EQ(a.failures.trace.size(), original.size());
  bool moved = false;
  bool differs = false;
  for (std::size_t i = 0; i < original.size(); ++i) {
    EXPECT_EQ(a.failures.trace[i].atHours, b.failures.trace[i].atHours);  // deterministic
    differs = differs || a.failures.trace[i].atHours != c.failures.trace[i].atHours;
    if (i > 0) {
      EXPECT_GE(a.failures.trace[i].atHours, a.failures.trace[i - 1].atHours);  // still sorted
    }
  }
  // Every failure moved by at most the jitter (matched by node and cause, order may swap).
  for (const sim::TraceFailure& t : a.failures.trace) {
    bool near = false;
    for (const sim::TraceFailure& o : original) {
      near = near ||
             (o.node == t.node && o.cause == t.cause && std::abs(o.atHours - t.atHours) <= 0.5);
    }
    EXPECT_TRUE(near) << t.atHours;
    moved =
        moved || std::none_of(original.begin(), original.end(),
                              [&](const sim::TraceFailure& o) { return o.atHours == t.atHours; });
  }
  EXPECT_TRUE(moved);
  EXPECT_TRUE(differs);
}

TEST(PlannerCheckpoint, TracePlanIsNotFittedToOneHistory) {
  PlanInput in = loadPlanInput(test::fixturePath("plans/trace.json"));
  in.settings.sweepSeeds = 100;
  const Plan plan = makePlan(in);
  const CheckpointSection& c = plan.checkpoint;
  ASSERT_TRUE(c.simulated);
  // The jittered replicas differ, so the ETTR has a spread ...
  EXPECT_GT(c.dalySimulatedEttr.ci95, 0.0);
  // ... and the curve is smooth near the optimum: from one interval to the next it moves as
  // Daly's smooth curve does, within 0.2 points (replayed as is, steps of 0.3-0.8 points appear
  // wherever a failure changes sides of a checkpoint).
  for (std::size_t i = 1; i < c.curve.size(); ++i) {
    if (c.curve[i].minutes < 1.35 * c.dalyMinutes &&
        c.curve[i - 1].minutes > 0.75 * c.dalyMinutes) {
      const double simulated = c.curve[i].ettr.mean - c.curve[i - 1].ettr.mean;
      const double analytic = c.curve[i].analyticEttr - c.curve[i - 1].analyticEttr;
      EXPECT_NEAR(simulated, analytic, 0.002) << c.curve[i].minutes << " min";
    }
  }
  // The job MTBF comes from the trace: its failures on the job's nodes over the horizon.
  EXPECT_NEAR(c.jobMtbfHours, 336.0 / static_cast<double>(in.scenario.failures.trace.size()),
              336.0 / 20.0);
}

}  // namespace
}  // namespace stretch::planner
