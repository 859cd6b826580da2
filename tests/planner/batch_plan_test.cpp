// Section 1: the batch plan of each solver version, coverage of the expected cluster sizes and
// the suggestion search.

#include "planner/batch_plan.hpp"

#include <gtest/gtest.h>

#include "planner/plan.hpp"
#include "runtime/common/error.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::planner {
namespace {

PlanInput docsExample() {
  return loadPlanInput(test::fixturePath("plans/deepspeed_docs.json"));
}

BatchSection section(const PlanInput& in) {
  return computeBatchSection(in, effectiveConfig(in), expectedSizes(in));
}

TEST(PlannerBatch, DeepSpeedDocsExampleIs1680On32GpuCounts) {
  const BatchSection b = section(docsExample());
  ASSERT_TRUE(b.elastic);
  EXPECT_EQ(b.version, "0.1");
  const VersionPlan& v = b.versions.front();
  ASSERT_TRUE(v.error.empty()) << v.error;
  EXPECT_EQ(v.version, "0.1");
  EXPECT_EQ(v.finalBatch, 1680);
  ASSERT_EQ(v.rows.size(), 32u);
  EXPECT_EQ(v.rows.front().gpus, 1);
  EXPECT_EQ(v.rows.back().gpus, 840);
  for (const BatchRow& r : v.rows) {
    SCOPED_TRACE(r.gpus);
    EXPECT_EQ(r.batch, 1680);
    EXPECT_EQ(r.microBatch * r.gradientAccumulation * r.gpus, 1680);
    // The runtime's choice: the largest configured micro batch that divides.
    for (const std::int64_t mb : {6, 4, 2}) {
      if ((1680 / r.gpus) % mb == 0) {
        EXPECT_EQ(r.microBatch, mb);
        break;
      }
    }
  }
  // 840 single-GPU nodes: every count from 1 to 840 is a possible cluster size.
  EXPECT_EQ(v.coverage.expectedSizes, 840);
  EXPECT_EQ(v.coverage.coveredSizes, 32);
  EXPECT_NEAR(v.coverage.covered, 32.0 / 840.0, 1e-12);
  EXPECT_GT(v.coverage.utilisation, v.coverage.covered);
  EXPECT_LT(v.coverage.utilisation, 1.0);
  // The other versions are computed too.
  ASSERT_EQ(b.versions.size(), 3u);
  EXPECT_EQ(b.versions[1].version, "0.2");
  EXPECT_EQ(b.versions[2].version, "exact");
  EXPECT_GE(b.versions[2].rows.size(), 32u);  // exact is never worse than v0.1
}

TEST(PlannerBatch, SuggestionCoversMoreWithinTheBand) {
  const PlanInput in = docsExample();
  const BatchSection b = section(in);
  ASSERT_TRUE(b.suggestion.has_value());
  const BatchSuggestion& s = *b.suggestion;
  EXPECT_GT(s.coverage.covered, b.versions.front().coverage.covered);
  EXPECT_GE(s.finalBatch, 1680 * 0.9);
  EXPECT_LE(s.finalBatch, 1680 * 1.1);
  EXPECT_GT(b.alternativesTried, 5);
  EXPECT_FALSE(s.change.empty());

  // The suggestion is real: the config it describes has that coverage.
  config::DsConfig c = effectiveConfig(in);
  c.elasticity.microBatchSizes = s.microBatches;
  c.elasticity.maxTrainBatchSize = s.maxBatch;
  c.elasticity.version = s.version == "0.1"   ? config::ElasticityVersion::V0_1
                         : s.version == "0.2" ? config::ElasticityVersion::V0_2
                                              : config::ElasticityVersion::Exact;
  c.elasticity.targetBatchSize = s.targetBatch;
  if (s.targetBatch) {
    c.elasticity.batchTolerance = b.tolerance;
  }
  const SizeOracle oracle(c, 1, 1, agent::NodeSelection::WholeNodes, 840);
  EXPECT_EQ(oracle.rules().finalBatch(), s.finalBatch);
  EXPECT_EQ(oracle.coverage(b.expected).coveredSizes, s.coverage.coveredSizes);
}

TEST(PlannerBatch, ZeroToleranceKeepsTheBatch) {
  PlanInput in = docsExample();
  in.settings.batchTolerance = 0.0;
  const BatchSection b = section(in);
  if (b.suggestion) {
    EXPECT_EQ(b.suggestion->finalBatch, 1680);
  }
}

TEST(PlannerBatch, ExpectedSizesFollowTheNodes) {
  PlanInput in = loadPlanInput(test::fixturePath("plans/example.json"));
  auto sizes = expectedSizes(in);
  // min_gpus 64 .. max_gpus 1024 on 8-GPU nodes: 8 .. 128 nodes.
  ASSERT_EQ(sizes.size(), 121u);
  EXPECT_EQ(sizes.front().gpus, 64);
  EXPECT_EQ(sizes.back().gpus, 1024);
  double total = 0.0;
  for (const ExpectedSize& e : sizes) {
    EXPECT_EQ(e.gpus % 8, 0);
    total += e.weight;
  }
  EXPECT_NEAR(total, 1.0, 1e-12);

  in.settings.expectedSizes = {{512, 3.0}, {1024, 1.0}};
  in.settings.expectedFromRange = false;
  sizes = expectedSizes(in);
  ASSERT_EQ(sizes.size(), 2u);
  EXPECT_DOUBLE_EQ(sizes[0].weight, 0.75);

  in.settings.expectedSizes = {{3, 1.0}, {5, 1.0}};
  in.settings.expectedFromRange = true;
  try {
    expectedSizes(in);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.detail()->path, "plan.world_sizes");
  }
}

TEST(PlannerBatch, WeightedCoverage) {
  const PlanInput in = docsExample();
  const SizeOracle oracle(effectiveConfig(in), 1, 1, agent::NodeSelection::WholeNodes, 840);
  // 840 is valid, 839 is not: it runs at the largest valid size below, 420 (1680 / 560 = 3 has
  // no micro batch in [2, 4, 6]).
  const Coverage c = oracle.coverage({{840, 3.0}, {839, 1.0}});
  EXPECT_DOUBLE_EQ(c.covered, 0.75);
  EXPECT_EQ(oracle.running(839), 420);
  EXPECT_NEAR(c.utilisation, 0.75 + 0.25 * 420.0 / 839.0, 1e-12);
}

TEST(PlannerBatch, WholeNodesReachOnlyMultiplesOfTheNode) {
  const PlanInput in = docsExample();
  const SizeOracle whole(effectiveConfig(in), 1, 8, agent::NodeSelection::WholeNodes, 840);
  for (const std::int64_t g : whole.sizes()) {
    EXPECT_EQ(g % 8, 0);
  }
  EXPECT_EQ(whole.running(845), 840);
  EXPECT_EQ(whole.running(7), 0);
  const SizeOracle partial(effectiveConfig(in), 1, 8, agent::NodeSelection::PartialNodes, 840);
  EXPECT_EQ(partial.running(7), 7);
  EXPECT_EQ(partial.sizes().size(), 32u);
}

TEST(PlannerBatch, PlanOverridesTheElasticitySection) {
  PlanInput in = docsExample();
  in.settings.maxBatch = 4000;
  in.settings.microBatches = std::vector<std::int64_t>{1, 2, 4};
  const config::DsConfig c = effectiveConfig(in);
  EXPECT_EQ(c.elasticity.maxTrainBatchSize, 4000);
  EXPECT_EQ(c.elasticity.microBatchSizes, (std::vector<std::int64_t>{1, 2, 4}));

  in.scenario.job.config.elasticity.enabled = false;
  try {
    effectiveConfig(in);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.detail()->path, "plan.max_batch");
    EXPECT_EQ(e.detail()->value, "4000");
  }
}

TEST(PlannerBatch, FixedBatchKeysWithoutElasticity) {
  PlanInput in = docsExample();
  in.scenario.job.config =
      config::parseConfig(R"({"train_batch_size": 96, "train_micro_batch_size_per_gpu": 4})")
          .config;
  const BatchSection b = section(in);
  EXPECT_FALSE(b.elastic);
  EXPECT_FALSE(b.suggestion);
  ASSERT_EQ(b.versions.size(), 1u);
  const VersionPlan& v = b.versions.front();
  EXPECT_EQ(v.version, "fixed");
  // 96 = 4 x gas x dp: dp in {1, 2, 3, 4, 6, 8, 12, 24}.
  std::vector<std::int64_t> gpus;
  for (const BatchRow& r : v.rows) {
    gpus.push_back(r.gpus);
    EXPECT_EQ(r.batch, 96);
  }
  EXPECT_EQ(gpus, (std::vector<std::int64_t>{1, 2, 3, 4, 6, 8, 12, 24}));
}

}  // namespace
}  // namespace stretch::planner
