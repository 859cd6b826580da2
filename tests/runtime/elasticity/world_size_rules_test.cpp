// elasticity::WorldSizeRules: the valid world sizes of a job and their batch, checked against the
// elastic solver and the workers' own batch resolution.

#include "runtime/elasticity/world_size_rules.hpp"

#include <algorithm>

#include <gtest/gtest.h>

#include "runtime/common/error.hpp"
#include "runtime/elasticity/runtime_batch.hpp"
#include "runtime/elasticity/solver.hpp"

namespace stretch::elasticity {
namespace {

using config::ElasticityVersion;

config::DsConfig elastic(ElasticityVersion version, std::int64_t cap,
                         std::vector<std::int64_t> micro, std::int64_t minGpus,
                         std::int64_t maxGpus, std::int64_t gpusPerNode = 1,
                         std::int64_t modelParallel = 1) {
  config::DsConfig ds;
  ds.elasticity.enabled = true;
  ds.elasticity.version = version;
  ds.elasticity.maxTrainBatchSize = cap;
  ds.elasticity.microBatchSizes = std::move(micro);
  ds.elasticity.minGpus = minGpus;
  ds.elasticity.maxGpus = maxGpus;
  ds.elasticity.numGpusPerNode = gpusPerNode;
  ds.elasticity.modelParallelSize = modelParallel;
  return ds;
}

// Every valid size trains the solver's final batch, with the triple the workers' runtime
// resolves at that size; sizes outside the list are not valid.
void expectAgreesWithRuntime(const config::DsConfig& ds) {
  const WorldSizeRules rules(ds);
  ASSERT_TRUE(rules.elastic());
  ASSERT_FALSE(rules.validGpuCounts().empty());
  const std::int64_t largest = rules.validGpuCounts().back();
  std::size_t valid = 0;
  for (std::int64_t g = 1; g <= largest + 3; ++g) {
    const auto batch = rules.batchFor(g);
    const bool listed =
        std::binary_search(rules.validGpuCounts().begin(), rules.validGpuCounts().end(), g);
    ASSERT_EQ(batch.has_value(), listed) << "gpus " << g;
    if (!batch) {
      continue;
    }
    ++valid;
    EXPECT_EQ(batch->trainBatchSize, *rules.finalBatch()) << "gpus " << g;
    const TrainingBatch runtime = resolveTrainingBatch(ds, g, ElasticEnvironment{});
    EXPECT_EQ(*batch, runtime.triple) << "gpus " << g;
    EXPECT_EQ(g / rules.modelParallelSize(), runtime.dataParallelSize) << "gpus " << g;
    EXPECT_EQ(rules.largestValidAtMost(g), g);
  }
  EXPECT_EQ(valid, rules.validGpuCounts().size());
}

TEST(WorldSizeRules, Version01MatchesTheSolver) {
  // Version 0.1, micro batches [2, 4], cap 16: final batch 16 on [1, 2, 4, 8] GPUs.
  const config::DsConfig ds = elastic(ElasticityVersion::V0_1, 16, {2, 4}, 1, 64);
  const WorldSizeRules rules(ds);
  EXPECT_EQ(rules.validGpuCounts(), (std::vector<std::int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(rules.finalBatch(), 16);
  EXPECT_EQ(rules.batchFor(2), (config::BatchTriple{16, 4, 2}));
  EXPECT_FALSE(rules.batchFor(3).has_value());
  EXPECT_FALSE(rules.batchFor(0).has_value());
  EXPECT_EQ(rules.largestValidAtMost(7), 4);
  EXPECT_EQ(rules.largestValidAtMost(100), 8);
  EXPECT_EQ(rules.largestValidAtMost(0), 0);
  EXPECT_EQ(rules.describeValid(), "[1, 2, 4, 8] GPUs (elastic batch 16)");
  expectAgreesWithRuntime(ds);
  expectAgreesWithRuntime(elastic(ElasticityVersion::V0_1, 2000, {2, 4, 6}, 1, 200));
}

TEST(WorldSizeRules, Version02UsesItsListAndNeverItsFallbackBatch) {
  const config::DsConfig ds = elastic(ElasticityVersion::V0_2, 100, {2, 4}, 4, 64, 4);
  const WorldSizeRules rules(ds);
  for (const std::int64_t g : rules.validGpuCounts()) {
    EXPECT_EQ(g % 4, 0) << g;  // whole nodes
  }
  expectAgreesWithRuntime(ds);
  // A size outside the list, where DeepSpeed's v0.2 would build a batch of its own.
  std::int64_t outside = 4;
  while (rules.isValid(outside)) {
    outside += 4;
  }
  elasticity::SolveRequest request;
  request.worldSize = outside;
  const elasticity::ElasticPlan fallback = elasticity::computeElasticConfig(ds.elasticity, request);
  EXPECT_EQ(fallback.validWorldSizes, (std::vector<std::int64_t>{outside}));
  EXPECT_FALSE(rules.batchFor(outside).has_value());

  expectAgreesWithRuntime(elastic(ElasticityVersion::V0_2, 2000, {2, 4, 6}, 8, 256, 8, 2));
  expectAgreesWithRuntime(elastic(ElasticityVersion::V0_2, 1000, {1, 3}, 1, 12, 1));
}

TEST(WorldSizeRules, ExactSolverSizesMultiplyByModelParallelism) {
  expectAgreesWithRuntime(elastic(ElasticityVersion::Exact, 120, {2, 3, 4}, 1, 16));
  const config::DsConfig mp = elastic(ElasticityVersion::Exact, 256, {2, 4}, 4, 64, 4, 2);
  const WorldSizeRules rules(mp);
  EXPECT_EQ(rules.modelParallelSize(), 2);
  for (const std::int64_t g : rules.validGpuCounts()) {
    EXPECT_EQ(g % 2, 0) << g;
  }
  expectAgreesWithRuntime(mp);
}

TEST(WorldSizeRules, Version02ErrorsAreTheSolvers) {
  config::DsConfig ds = elastic(ElasticityVersion::V0_2, 100, {2, 4}, 4, 2, 4);  // max < 1 node
  try {
    const WorldSizeRules rules(ds);
    FAIL() << "no error";
  } catch (const ElasticityConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("elasticity.max_gpus"), std::string::npos) << e.what();
  }
  ds = elastic(ElasticityVersion::V0_2, 100, {200}, 4, 64, 4);  // micro batch above the cap
  try {
    const WorldSizeRules rules(ds);
    FAIL() << "no error";
  } catch (const ElasticityConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("data-parallel GPUs per node"), std::string::npos)
        << e.what();
  }
}

TEST(WorldSizeRules, WithoutElasticityTheBatchKeysDecide) {
  config::DsConfig ds;
  ds.batch.trainBatchSize = 24;
  ds.batch.microBatchPerGpu = 4;
  const WorldSizeRules rules(ds);
  EXPECT_FALSE(rules.elastic());
  EXPECT_FALSE(rules.finalBatch().has_value());
  std::vector<std::int64_t> valid;
  for (std::int64_t g = 1; g <= 30; ++g) {
    if (rules.isValid(g)) {
      valid.push_back(g);
    }
  }
  EXPECT_EQ(valid, (std::vector<std::int64_t>{1, 2, 3, 6}));
  EXPECT_EQ(rules.batchFor(3), (config::BatchTriple{24, 4, 2}));
  EXPECT_EQ(rules.largestValidAtMost(5), 3);
  EXPECT_EQ(rules.largestValidAtMost(1'000'000), 6);
  EXPECT_NE(rules.describeValid().find("[1, 2, 3, 6] GPUs"), std::string::npos);

  config::DsConfig micro;
  micro.batch.microBatchPerGpu = 2;
  const WorldSizeRules mp(micro, 4);
  EXPECT_FALSE(mp.isValid(6));
  EXPECT_EQ(mp.batchFor(8), (config::BatchTriple{4, 2, 1}));
  EXPECT_EQ(mp.largestValidAtMost(11), 8);
  EXPECT_THROW(WorldSizeRules(micro, 0), ConfigError);
}

}  // namespace
}  // namespace stretch::elasticity
