// Whole plans: every figure of the scale table follows from its formula, the recommendation
// optimises the objective, the emitted DeepSpeed config parses and reproduces the plan, and the
// worker-thread contract (progress, cancellation, reentrancy, thread-count independence) holds.

#include "planner/plan.hpp"

#include <array>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "planner/analytic.hpp"
#include "planner/report.hpp"
#include "runtime/common/error.hpp"
#include "runtime/config/ds_config.hpp"
#include "runtime/elasticity/world_size_rules.hpp"
#include "tests/support/test_support.hpp"
#include "tests/support/thread_group.hpp"

namespace stretch::planner {
namespace {

PlanInput example() {
  PlanInput in = bundledExample();
  in.settings.sweepSeeds = 32;  // fixed, so results do not depend on the machine's speed
  return in;
}

TEST(PlannerPlan, ScaleRowsFollowTheirFormulas) {
  const PlanInput in = example();
  const Plan plan = makePlan(in);
  ASSERT_FALSE(plan.scale.rows.empty());
  ASSERT_TRUE(plan.scale.totalSamples.has_value());
  const double samples = static_cast<double>(*plan.scale.totalSamples);
  const double c = in.scenario.job.checkpoint.saveSeconds / 60.0;
  for (const ScaleRow& row : plan.scale.rows) {
    SCOPED_TRACE(row.gpus);
    const double r = (in.scenario.job.restartOverheadSeconds.at(row.nodes) +
                      in.scenario.job.checkpoint.loadSeconds) /
                     60.0;
    EXPECT_EQ(row.rentedGpus, row.nodes * 8);
    EXPECT_EQ(row.gpus % 8, 0);  // whole nodes
    EXPECT_EQ(row.batch, plan.batch.versions.front().finalBatch);
    EXPECT_EQ(row.microBatch * row.gradientAccumulation * row.gpus, row.batch);
    EXPECT_NEAR(row.samplesPerSecond, static_cast<double>(row.batch) / row.stepSeconds, 1e-9);
    EXPECT_NEAR(row.jobMtbfHours, 3700.0 / static_cast<double>(row.nodes), 1e-9);
    const double daly = dalyInterval(c, row.jobMtbfHours * 60.0);
    EXPECT_NEAR(row.intervalMinutes, quantizedInterval(daly, row.stepSeconds / 60.0), 1e-9);
    EXPECT_NEAR(row.ettr.mean, dalyEttr(row.intervalMinutes, c, r, row.jobMtbfHours * 60.0), 1e-12);
    EXPECT_NEAR(row.goodput.mean, row.samplesPerSecond * row.ettr.mean, 1e-9);
    ASSERT_TRUE(row.timeToTrainHours && row.gpuHours && row.cost);
    EXPECT_NEAR(row.timeToTrainHours->mean, samples / row.goodput.mean / 3600.0, 1e-6);
    EXPECT_NEAR(row.gpuHours->mean,
                row.timeToTrainHours->mean * static_cast<double>(row.rentedGpus), 1e-6);
    EXPECT_NEAR(row.cost->mean, row.gpuHours->mean * 2.5, 1e-6);
    EXPECT_FALSE(row.simulated);
  }
  // Step times come from the simulator's step model: more GPUs, shorter steps.
  for (std::size_t i = 1; i < plan.scale.rows.size(); ++i) {
    EXPECT_LT(plan.scale.rows[i].stepSeconds, plan.scale.rows[i - 1].stepSeconds);
  }
}

TEST(PlannerPlan, RecommendationOptimisesTheObjective) {
  for (const Objective objective : {Objective::Time, Objective::Cost, Objective::Ettr}) {
    SCOPED_TRACE(toString(objective));
    PlanInput in = example();
    in.settings.objective = objective;
    const Plan plan = makePlan(in);
    const ScaleRow& best = plan.scale.rows.at(plan.recommendation.row);
    EXPECT_EQ(plan.recommendation.gpus, best.gpus);
    for (const ScaleRow& row : plan.scale.rows) {
      switch (objective) {
        case Objective::Time:
          EXPECT_GE(row.timeToTrainHours->mean, best.timeToTrainHours->mean * (1 - 1e-12))
              << "row " << row.gpus;
          break;
        case Objective::Cost:
          EXPECT_GE(row.cost->mean, best.cost->mean * (1 - 1e-12)) << "row " << row.gpus;
          break;
        case Objective::Ettr:
          EXPECT_LE(row.ettr.mean, best.ettr.mean + 1e-12) << "row " << row.gpus;
          break;
      }
    }
    EXPECT_EQ(plan.checkpoint.gpus, best.gpus);
    EXPECT_FALSE(plan.recommendation.reasons.empty());
    EXPECT_NE(plan.recommendation.reasons.find(std::to_string(best.gpus) + " GPUs"),
              std::string::npos);
  }
}

TEST(PlannerPlan, EmittedConfigParsesAndReproducesThePlan) {
  const PlanInput in = example();
  const Plan plan = makePlan(in);
  const Recommendation& rec = plan.recommendation;
  test::TempDir dir("stretch-plan");
  const auto configPath = dir.path() / "ds_config.json";
  std::ofstream(configPath) << rec.configJson;

  const config::ParsedConfig parsed = config::loadConfig(configPath);
  EXPECT_EQ(parsed.config, rec.config);
  const elasticity::WorldSizeRules rules(parsed.config, in.scenario.job.modelParallelSize);
  EXPECT_EQ(rules.finalBatch(), rec.batch);
  const auto triple = rules.batchFor(rec.gpus);
  ASSERT_TRUE(triple.has_value());
  EXPECT_EQ(triple->trainBatchSize, rec.batch);
  EXPECT_EQ(triple->microBatchPerGpu, rec.microBatch);
  EXPECT_EQ(triple->gradientAccumulation, rec.gradientAccumulation);

  // Planning the same job with the emitted config file gives the same plan.
  nlohmann::json job = nlohmann::json::parse(bundledExampleText());
  job["job"].erase("config");
  job["job"]["config_file"] = configPath.string();
  job["plan"]["sweep_seeds"] = 32;
  const Plan again = makePlan(parsePlanInput(job.dump(), dir.path()));
  EXPECT_EQ(again.recommendation.gpus, rec.gpus);
  EXPECT_EQ(again.recommendation.batch, rec.batch);
  EXPECT_EQ(again.recommendation.microBatch, rec.microBatch);
  EXPECT_EQ(again.recommendation.gradientAccumulation, rec.gradientAccumulation);
  EXPECT_EQ(again.recommendation.intervalSteps, rec.intervalSteps);
  EXPECT_EQ(again.recommendation.configJson, rec.configJson);
}

TEST(PlannerPlan, FixedBatchJobsEmitTheirTriple) {
  const PlanInput in = parsePlanInput(
      R"({"cluster": {"preset": "dgx-h100", "nodes": 8},
          "job": {"config": {"train_batch_size": 256, "train_micro_batch_size_per_gpu": 4},
                  "seconds_per_sample_per_gpu": 0.1, "total_samples": 10000000,
                  "checkpoint": {"interval_minutes": 30, "save_seconds": 10}},
          "failures": {"model": "exponential", "node_mtbf_hours": 1000},
          "plan": {"sweep_seeds": 16}})",
      test::fixturePath("plans"));
  const Plan plan = makePlan(in);
  const Recommendation& rec = plan.recommendation;
  EXPECT_FALSE(plan.batch.elastic);
  EXPECT_EQ(rec.config.batch.trainBatchSize, 256);
  EXPECT_EQ(rec.config.batch.microBatchPerGpu, 4);
  const config::BatchTriple t = config::resolveBatch(rec.config.batch, rec.gpus);
  EXPECT_EQ(t.trainBatchSize, 256);
  EXPECT_EQ(t.microBatchPerGpu * t.gradientAccumulation * rec.gpus, 256);
  EXPECT_EQ(config::parseConfig(rec.configJson).config, rec.config);
}

TEST(PlannerPlan, MonteCarloScaleTable) {
  PlanInput in = example();
  in.settings.seeds = 64;
  in.settings.sweepSeeds = 0;  // the sweep takes --seeds too
  const Plan plan = makePlan(in);
  EXPECT_TRUE(plan.scale.monteCarlo);
  EXPECT_EQ(plan.checkpoint.seeds, 64);
  int simulated = 0;
  for (const ScaleRow& row : plan.scale.rows) {
    if (!row.shown) {
      EXPECT_FALSE(row.simulated);
      continue;
    }
    ASSERT_TRUE(row.simulated);
    ++simulated;
    EXPECT_GT(row.ettr.ci95, 0.0);
    // Exponential failures: the simulation agrees with Daly's closed form.
    const double c = in.scenario.job.checkpoint.saveSeconds / 60.0;
    const double r = (in.scenario.job.restartOverheadSeconds.at(row.nodes) +
                      in.scenario.job.checkpoint.loadSeconds) /
                     60.0;
    EXPECT_NEAR(row.ettr.mean, dalyEttr(row.intervalMinutes, c, r, row.jobMtbfHours * 60.0), 0.01)
        << row.gpus;
    ASSERT_TRUE(row.timeToTrainHours);
    EXPECT_GT(row.timeToTrainHours->ci95, 0.0);
  }
  EXPECT_GT(simulated, 0);
  EXPECT_TRUE(plan.scale.rows.at(plan.recommendation.row).simulated);
}

TEST(PlannerPlan, ProgressIsMonotoneAndEnds) {
  std::vector<PlanProgress> seen;
  PlanOptions options;
  options.progress = [&](const PlanProgress& p) { seen.push_back(p); };
  makePlan(example(), options);
  ASSERT_GE(seen.size(), 4u);
  for (std::size_t i = 1; i < seen.size(); ++i) {
    EXPECT_GE(seen[i].fraction, seen[i - 1].fraction);
  }
  EXPECT_EQ(seen.back().fraction, 1.0);
  EXPECT_EQ(seen.back().stage, "done");
}

TEST(PlannerPlan, CancelFromAnotherThread) {
  std::atomic<bool> cancel{true};
  PlanOptions options;
  options.cancel = &cancel;
  EXPECT_THROW(makePlan(example(), options), PlanCancelled);

  // Cancelled halfway, from the progress callback (the GUI's cancel button, in effect).
  cancel = false;
  std::atomic<bool> sawCheckpoint{false};
  options.progress = [&](const PlanProgress& p) {
    if (p.stage == "checkpoint" && p.fraction > 0.6) {
      sawCheckpoint = true;
      cancel = true;
    }
  };
  PlanInput in = example();
  in.settings.sweepSeeds = 400;
  EXPECT_THROW(makePlan(in, options), PlanCancelled);
  EXPECT_TRUE(sawCheckpoint);
}

std::string jsonWithoutTimings(const Plan& plan) {
  nlohmann::json j = nlohmann::json::parse(renderPlan(plan, ReportFormat::Json));
  j.erase("wall_seconds");
  j.erase("threads");
  return j.dump();
}

TEST(PlannerPlan, SameResultOnAnyNumberOfThreadsAndConcurrently) {
  PlanInput in = example();
  in.settings.seeds = 16;
  PlanOptions one;
  one.threads = 1;
  const std::string reference = jsonWithoutTimings(makePlan(in, one));
  PlanOptions three;
  three.threads = 3;
  EXPECT_EQ(jsonWithoutTimings(makePlan(in, three)), reference);
  // Two plans at once (the GUI may run one while another is cancelled).
  std::string a;
  std::string b;
  std::thread t1([&] { a = jsonWithoutTimings(makePlan(in, three)); });
  std::thread t2([&] { b = jsonWithoutTimings(makePlan(in, one)); });
  t1.join();
  t2.join();
  EXPECT_EQ(a, reference);
  EXPECT_EQ(b, reference);
}

// `mpirun -n 3 stretch plan`, as three threads: every rank makes the plan one process makes,
// with an automatic sweep replica count too (rank 0's pilot decides for all).
TEST(PlannerPlan, SameResultOverRanks) {
  for (const std::int64_t seeds : {16, 0}) {
    PlanInput in = example();
    in.settings.seeds = seeds;
    PlanOptions one;
    one.threads = 1;
    const std::string reference = jsonWithoutTimings(makePlan(in, one));
    std::array<std::string, 3> plans;
    test::runRanks(3, [&](sim::ReplicaGroup& group) {
      PlanOptions o = one;
      o.group = &group;
      plans[static_cast<std::size_t>(group.rank())] = jsonWithoutTimings(makePlan(in, o));
    });
    for (std::size_t r = 0; r < plans.size(); ++r) {
      EXPECT_EQ(plans[r], reference) << "rank " << r << ", seeds " << seeds;
    }
  }
}

TEST(PlannerPlan, NoValidSizeInTheExpectedRange) {
  PlanInput in = example();
  in.settings.expectedSizes = {{64, 1.0}, {72, 1.0}};  // v0.1's batch 3360: first valid is 80
  in.settings.expectedFromRange = true;
  try {
    makePlan(in);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    ASSERT_TRUE(e.detail());
    EXPECT_EQ(e.detail()->path, "plan.world_sizes");
    EXPECT_NE(e.detail()->expected.find("valid world"), std::string::npos) << e.what();
  }
}

TEST(PlannerPlan, PortabilityListsEveryValidSize) {
  const Plan plan = makePlan(example());
  const PortabilitySection& p = plan.portability;
  EXPECT_EQ(p.writtenAt, plan.recommendation.gpus);
  EXPECT_EQ(p.zeroStage, 1);
  ASSERT_EQ(p.rows.size(), plan.batch.versions.front().rows.size());
  for (std::size_t i = 0; i < p.rows.size(); ++i) {
    EXPECT_EQ(p.rows[i].gpus, plan.batch.versions.front().rows[i].gpus);
    EXPECT_EQ(p.rows[i].microBatch, plan.batch.versions.front().rows[i].microBatch);
    EXPECT_TRUE(p.rows[i].sameBatch);
  }
  bool universal = false;
  for (const std::string& note : p.notes) {
    universal = universal || note.find("Universal Checkpointing") != std::string::npos;
  }
  EXPECT_TRUE(universal);  // ZeRO stage 1 in DeepSpeed's own format
}

// With recovery.mode live the plan sweeps the interval under live recovery and compares both
// recovery modes at the recommended size on fresh replicas, in every format.
TEST(PlannerPlan, LiveRecoveryIsComparedWithCheckpointRestart) {
  PlanInput in = example();
  EXPECT_FALSE(makePlan(in).recovery.compared);
  in.scenario.job.recovery.live = true;
  in.scenario.job.recovery.reconfigureSeconds = 20;
  in.scenario.job.recovery.stateBytes = 4'000'000'000;
  const Plan plan = makePlan(in);
  const RecoverySection& r = plan.recovery;
  ASSERT_TRUE(r.compared);
  EXPECT_EQ(r.gpus, plan.recommendation.gpus);
  EXPECT_EQ(r.seeds, 32);
  EXPECT_EQ(r.checkpoint.mode, "checkpoint");
  EXPECT_EQ(r.live.mode, "live");
  EXPECT_NEAR(r.transferSeconds, 4e9 / (in.scenario.cluster.interNodeGBps * 1e9), 1e-9);
  // Checkpoint-restart at Daly's interval; live recovery at the plan's interval, which the
  // sweep finds well above Daly's: a failure no longer costs the work since the last save.
  EXPECT_NEAR(r.checkpoint.intervalMinutes,
              quantizedInterval(plan.checkpoint.dalyMinutes, plan.checkpoint.stepSeconds / 60.0),
              1e-9);
  EXPECT_EQ(r.live.intervalMinutes, plan.checkpoint.recommendedMinutes);
  EXPECT_GT(r.live.intervalMinutes, 2.0 * plan.checkpoint.dalyMinutes);
  EXPECT_GT(r.live.ettr.mean, r.checkpoint.ettr.mean);
  EXPECT_GT(r.gain.mean, r.gain.ci95);
  EXPECT_NEAR(r.gain.mean, r.live.ettr.mean - r.checkpoint.ettr.mean, 1e-12);
  ASSERT_TRUE(r.checkpoint.timeToTrainHours && r.live.timeToTrainHours);
  EXPECT_LT(*r.live.timeToTrainHours, *r.checkpoint.timeToTrainHours);
  EXPECT_NEAR(*r.live.timeToTrainHours / *r.checkpoint.timeToTrainHours,
              r.checkpoint.ettr.mean / r.live.ettr.mean, 1e-9);

  const auto j = nlohmann::json::parse(renderPlan(plan, ReportFormat::Json));
  EXPECT_EQ(j["recovery"]["live"]["ettr"]["mean"].get<double>(), r.live.ettr.mean);
  EXPECT_EQ(j["recovery"]["checkpoint"]["interval_steps"], r.checkpoint.intervalSteps);
  for (const ReportFormat format :
       {ReportFormat::Table, ReportFormat::Markdown, ReportFormat::Html}) {
    SCOPED_TRACE(toString(format));
    const std::string text = renderPlan(plan, format);
    EXPECT_NE(text.find("Recovery: live vs checkpoint-restart"), std::string::npos);
    EXPECT_NE(text.find("live (survivors keep training)"), std::string::npos);
  }
  EXPECT_EQ(
      nlohmann::json::parse(renderPlan(makePlan(example()), ReportFormat::Json)).count("recovery"),
      0u);
}

// restart_overhead_seconds that grows with the nodes: every scale row's R is the cost at its own
// node count, and the recovery comparison says which figures it used and where they come from.
TEST(PlannerPlan, NodeDependentCostsAreTakenAtEachRowsNodes) {
  PlanInput in = example();
  in.scenario.job.restartOverheadSeconds =
      sim::SecondsByNodes(60.0, 0.5, {{4, 1.0}, {8, 3.0}}, "a test");
  const Plan plan = makePlan(in);
  const double c = in.scenario.job.checkpoint.saveSeconds / 60.0;
  std::set<std::int64_t> nodes;
  for (const ScaleRow& row : plan.scale.rows) {
    SCOPED_TRACE(row.gpus);
    if (std::isinf(row.intervalMinutes)) {
      continue;
    }
    nodes.insert(row.nodes);
    const double r = (in.scenario.job.restartOverheadSeconds.at(row.nodes) +
                      in.scenario.job.checkpoint.loadSeconds) /
                     60.0;
    EXPECT_NEAR(row.ettr.mean, dalyEttr(row.intervalMinutes, c, r, row.jobMtbfHours * 60.0), 1e-12);
  }
  EXPECT_GE(nodes.size(), 2u);  // rows at different node counts, so different costs
  const ScaleRow& chosen = plan.scale.rows[plan.recommendation.row];
  EXPECT_DOUBLE_EQ(plan.checkpoint.restartSeconds,
                   in.scenario.job.restartOverheadSeconds.at(chosen.nodes) +
                       in.scenario.job.checkpoint.loadSeconds);

  in.scenario.job.recovery.live = true;
  in.scenario.job.recovery.reconfigureSeconds = sim::SecondsByNodes(0.0, 0.0, {{2, 1.0}}, "bench");
  const Plan live = makePlan(in);
  const RecoverySection& r = live.recovery;
  ASSERT_TRUE(r.compared);
  const std::int64_t n = live.scale.rows[live.recommendation.row].nodes;
  EXPECT_EQ(r.nodes, n);
  EXPECT_GT(n, 2);
  EXPECT_DOUBLE_EQ(r.reconfigureSeconds, 0.5 * static_cast<double>(n));
  EXPECT_DOUBLE_EQ(r.restartSeconds, live.checkpoint.restartSeconds);
  EXPECT_EQ(r.reconfigureSource,
            "measured at 2 nodes (bench), extrapolated beyond 2 nodes at 0.5 s per node");
  EXPECT_EQ(r.restartSource.rfind("given as 60 s + 0.5 s per node, plus measured at 4 to 8 nodes "
                                  "(2 points) (a test), extrapolated beyond 8 nodes at 0.5 s per "
                                  "node",
                                  0),
            0u)
      << r.restartSource;
  const auto j = nlohmann::json::parse(renderPlan(live, ReportFormat::Json));
  EXPECT_EQ(j["recovery"]["nodes"], n);
  EXPECT_EQ(j["recovery"]["reconfigure_source"], r.reconfigureSource);
  EXPECT_EQ(j["recovery"]["restart_seconds"].get<double>(), r.restartSeconds);
  const std::string text = renderPlan(live, ReportFormat::Markdown);
  EXPECT_NE(text.find("the costs at " + std::to_string(n) +
                      " nodes: reconfiguration measured at 2 nodes (bench), extrapolated beyond "
                      "2 nodes"),
            std::string::npos)
      << text;
}

// job.failure_detection_seconds: section 6 gives its value at the recommended size's nodes and
// where it comes from, and says nothing of it when the job pays none.
TEST(PlannerPlan, TheRecoveryComparisonNamesTheFailureDetectionCost) {
  PlanInput in = example();
  in.scenario.job.recovery.live = true;
  in.scenario.job.recovery.reconfigureSeconds = 20;
  const std::string without = renderPlan(makePlan(in), ReportFormat::Markdown);
  EXPECT_EQ(without.find("failure detection"), std::string::npos) << without;

  in.scenario.job.failureDetectionSeconds =
      sim::SecondsByNodes(0.0, 0.0, {{2, 4.5}}, "control plane");
  const Plan plan = makePlan(in);
  const RecoverySection& r = plan.recovery;
  ASSERT_TRUE(r.compared);
  EXPECT_DOUBLE_EQ(r.detectionSeconds, 2.25 * static_cast<double>(r.nodes));
  EXPECT_EQ(r.detectionSource.rfind("measured at 2 nodes (control plane)", 0), 0u)
      << r.detectionSource;
  const auto j = nlohmann::json::parse(renderPlan(plan, ReportFormat::Json));
  EXPECT_EQ(j["recovery"]["failure_detection_seconds"].get<double>(), r.detectionSeconds);
  EXPECT_EQ(j["recovery"]["failure_detection_source"], r.detectionSource);
  const std::string text = renderPlan(plan, ReportFormat::Markdown);
  EXPECT_NE(text.find(fmt::format("either first waits {:g} s for a node failure to be noticed",
                                  r.detectionSeconds)),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("; failure detection " + r.detectionSource), std::string::npos) << text;
}

}  // namespace
}  // namespace stretch::planner
