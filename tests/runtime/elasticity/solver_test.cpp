#include "runtime/elasticity/solver.hpp"

#include <vector>

#include <gtest/gtest.h>

#include "runtime/common/error.hpp"

namespace stretch::elasticity {
namespace {

using config::ElasticityConfig;
using config::ElasticityVersion;

ElasticityConfig deepspeedFixture() {
  ElasticityConfig c;
  c.enabled = true;
  c.maxTrainBatchSize = 10000;
  c.microBatchSizes = {8, 12, 16, 17};
  c.minGpus = 32;
  c.maxGpus = 1500;
  c.minTime = 20;
  c.version = ElasticityVersion::V0_1;
  return c;
}

const std::vector<std::int64_t> kFixtureValid = {32,  34,  36,  48,  51,  64,  68,  72,
                                                 96,  102, 136, 144, 153, 192, 204, 272,
                                                 288, 306, 408, 576, 612, 816, 1224};

TEST(SolverV01, DeepSpeedUnitTestFixture) {
  const ElasticPlan plan = computeElasticConfig(deepspeedFixture());
  EXPECT_EQ(plan.finalBatchSize, 9792);
  EXPECT_EQ(plan.validWorldSizes, kFixtureValid);
  EXPECT_FALSE(plan.microBatch.has_value());
}

TEST(SolverV01, WorldSizePicksLargestDividingMicroBatch) {
  SolveRequest request;
  request.worldSize = 64;
  const ElasticPlan plan = computeElasticConfig(deepspeedFixture(), request);
  EXPECT_EQ(plan.microBatch, 17);
  EXPECT_EQ(plan.resolvedWorldSize, 64);
}

TEST(SolverV01, InvalidWorldSizeIsTyped) {
  SolveRequest request;
  request.worldSize = 128;
  try {
    computeElasticConfig(deepspeedFixture(), request);
    FAIL() << "no error";
  } catch (const ElasticityIncompatibleWorldSize& e) {
    EXPECT_NE(std::string(e.what()).find("world_size = 128"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("1224]"), std::string::npos) << e.what();
  }
}

TEST(SolverV01, DocsExample) {
  ElasticityConfig c;
  c.enabled = true;
  c.version = ElasticityVersion::V0_1;
  c.maxTrainBatchSize = 2000;
  c.microBatchSizes = {2, 4, 6};
  const ElasticPlan plan = computeElasticConfig(c);
  EXPECT_EQ(plan.finalBatchSize, 1680);
  EXPECT_EQ(plan.validWorldSizes.size(), 32u);
}

TEST(SolverV01, NeverExceedsTheCap_PR8237) {
  ElasticityConfig c = deepspeedFixture();
  c.maxTrainBatchSize = 100;
  c.microBatchSizes = {8, 10, 12};
  c.minGpus = 1;
  const ElasticPlan plan = computeElasticConfig(c);
  EXPECT_EQ(plan.finalBatchSize, 96);
  EXPECT_EQ(plan.validWorldSizes, (std::vector<std::int64_t>{1, 2, 3, 4, 6, 8, 12}));
}

TEST(SolverV01, ReferenceTimingConfigs) {
  // Answers DeepSpeed gave for its timing table (reference §2.2).
  ElasticityConfig c;
  c.enabled = true;
  c.version = ElasticityVersion::V0_1;
  c.microBatchSizes = {2, 4, 6, 8, 12, 16};
  struct Case {
    std::int64_t cap, maxGpus, batch;
    std::size_t count;
  };
  for (const Case& k :
       {Case{100'000, 10'000, 90720, 96}, Case{720'720, 10'000, 665280, 167},
        Case{10'000'000, 10'000, 8648640, 271}, Case{10'000'000, 1'000'000, 8648640, 380},
        Case{10'000'000, 10'000'000, 8648640, 384}}) {
    c.maxTrainBatchSize = k.cap;
    c.maxGpus = k.maxGpus;
    const ElasticPlan plan = computeElasticConfig(c);
    EXPECT_EQ(plan.finalBatchSize, k.batch) << k.cap;
    EXPECT_EQ(plan.validWorldSizes.size(), k.count) << k.cap << " " << k.maxGpus;
  }
}

TEST(SolverV01, NoValidSizeIsAnErrorNotAnEmptyList) {
  ElasticityConfig c = deepspeedFixture();
  c.microBatchSizes = {4};
  c.maxTrainBatchSize = 8;
  c.minGpus = 5;
  c.maxGpus = 5;
  EXPECT_THROW(computeElasticConfig(c), ElasticityError);
}

TEST(SolverV01, MicroBatchAboveCapNamesTheEntry) {
  ElasticityConfig c = deepspeedFixture();
  c.maxTrainBatchSize = 16;
  try {
    computeElasticConfig(c);
    FAIL();
  } catch (const ElasticityConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("elasticity.micro_batch_sizes[3] = 17"), std::string::npos)
        << e.what();
  }
}

TEST(SolverV01, ReturnMicroBatchWithoutWorldSizeReadsEnvironment_Issue8156) {
  ElasticityConfig c = deepspeedFixture();
  SolveRequest request;
  request.returnMicroBatch = true;
  EXPECT_THROW(computeElasticConfig(c, request),
               ElasticityConfigError);  // DeepSpeed: ZeroDivisionError
  request.envWorldSize = "64";
  EXPECT_EQ(computeElasticConfig(c, request).microBatch, 17);
  request.envWorldSize = "128";
  EXPECT_THROW(computeElasticConfig(c, request), ElasticityIncompatibleWorldSize);
}

TEST(SolverChecks, DisabledModelParallelAndOldTargetVersion) {
  ElasticityConfig c = deepspeedFixture();
  c.enabled = false;
  EXPECT_THROW(computeElasticConfig(c), ElasticityConfigError);
  c.enabled = true;
  c.modelParallelSize = 4;
  c.numGpusPerNode = 8;
  EXPECT_THROW(computeElasticConfig(c), ElasticityConfigError);
  c.modelParallelSize = 1;
  SolveRequest old;
  old.targetDeepspeedVersion = "0.2";
  EXPECT_THROW(computeElasticConfig(c, old), ElasticityError);
  old.targetDeepspeedVersion = "0.3.8";
  EXPECT_NO_THROW(computeElasticConfig(c, old));
}

TEST(CompareVersions, DottedAndSuffixed) {
  EXPECT_LT(compareVersions("0.3.8", "0.18.2"), 0);
  EXPECT_EQ(compareVersions("0.3", "0.3.0"), 0);
  EXPECT_GT(compareVersions("0.19.0rc1", "0.18.2"), 0);
  EXPECT_GT(compareVersions("1.0+local", "0.99"), 0);
  EXPECT_THROW(compareVersions("x.1", "0.3.8"), ConfigError);
  EXPECT_THROW(compareVersions("0.a.1", "0.3.8"), ConfigError);
}

ElasticityConfig v02(std::int64_t cap, std::vector<std::int64_t> mbs, std::int64_t gpn,
                     std::int64_t mp) {
  ElasticityConfig c = deepspeedFixture();
  c.version = ElasticityVersion::V0_2;
  c.maxTrainBatchSize = cap;
  c.microBatchSizes = std::move(mbs);
  c.numGpusPerNode = gpn;
  c.modelParallelSize = mp;
  return c;
}

TEST(SolverV02, NeedsAWorldSize) {
  const ElasticityConfig c = v02(10000, {8, 12, 16, 17}, 8, 4);
  EXPECT_THROW(computeElasticConfig(c), ElasticityConfigError);
  SolveRequest bad;
  bad.envWorldSize = "sixteen";
  EXPECT_THROW(computeElasticConfig(c, bad), ElasticityConfigError);
  bad.envWorldSize = "0";  // DeepSpeed: ZeroDivisionError
  EXPECT_THROW(computeElasticConfig(c, bad), ElasticityConfigError);
}

TEST(SolverV02, DeepSpeedFallbackFixtureWithCorrectMicroBatch_PR8395) {
  // DeepSpeed: (9996, [4]) and micro batch 16, which does not divide 9996 / 4 = 2499.
  const ElasticityConfig c = v02(10000, {8, 12, 16, 17}, 8, 4);
  SolveRequest request;
  request.envWorldSize = "16";
  const ElasticPlan plan = computeElasticConfig(c, request);
  EXPECT_EQ(plan.finalBatchSize, 9996);
  EXPECT_EQ(plan.validWorldSizes, (std::vector<std::int64_t>{4}));
  EXPECT_EQ(plan.microBatch, 17);  // 2499 = 17 * 147
}

TEST(SolverV02, ModelParallelTwoAtDataParallelSixteen) {
  // Reference §3: gpn 8, mp 2, cap 100000 at data-parallel size 16 trains (80640, 16, 315).
  const ElasticityConfig c = v02(100000, {8, 12, 16, 17}, 8, 2);
  SolveRequest request;
  request.worldSize = 32;  // GPUs; data-parallel size 16
  const ElasticPlan plan = computeElasticConfig(c, request);
  EXPECT_EQ(plan.finalBatchSize, 80640);
  EXPECT_EQ(plan.resolvedWorldSize, 16);
  EXPECT_EQ(plan.microBatch, 16);
  EXPECT_EQ(plan.finalBatchSize / (*plan.microBatch * plan.resolvedWorldSize), 315);
  for (std::int64_t dp : plan.validWorldSizes) {
    EXPECT_EQ(dp % 4, 0) << dp;
  }
}

TEST(SolverV02, FallbackThatWouldBeBatchZeroIsAnError) {
  // DeepSpeed returns (0, [16], 16).
  ElasticityConfig c = v02(128, {16}, 8, 1);
  c.minGpus = 1;
  SolveRequest request;
  request.envWorldSize = "16";
  EXPECT_THROW(computeElasticConfig(c, request), ElasticityIncompatibleWorldSize);
}

TEST(SolverV02, MaxGpusBelowOneNodeIsAnError) {
  ElasticityConfig c = v02(10000, {8}, 8, 1);
  c.minGpus = 1;
  c.maxGpus = 4;
  SolveRequest request;
  request.envWorldSize = "8";
  EXPECT_THROW(computeElasticConfig(c, request), ElasticityConfigError);
}

TEST(SolverV02, WorldSizeMustBeAMultipleOfModelParallel) {
  const ElasticityConfig c = v02(100000, {8, 12, 16, 17}, 8, 2);
  SolveRequest request;
  request.worldSize = 17;
  EXPECT_THROW(computeElasticConfig(c, request), ElasticityIncompatibleWorldSize);
}

TEST(SolverV02, GpusPerNodeMustBeDivisibleByModelParallel) {
  const ElasticityConfig c = v02(10000, {8, 12, 16, 17}, 8, 16);
  SolveRequest request;
  request.worldSize = 16;
  EXPECT_THROW(computeElasticConfig(c, request), ElasticityError);
}

TEST(SolverExact, BeatsV01OnTheDeepSpeedFixture) {
  ElasticityConfig c = deepspeedFixture();
  const ElasticPlan v01 = computeElasticConfig(c);
  c.version = ElasticityVersion::Exact;
  const ElasticPlan exact = computeElasticConfig(c);
  EXPECT_LE(exact.finalBatchSize, 10000);
  EXPECT_GE(exact.validWorldSizes.size(), v01.validWorldSizes.size());
  EXPECT_EQ(exact.validWorldSizes,
            validWorldSizesForBatch(exact.finalBatchSize, c.microBatchSizes, 32, 1500));
}

TEST(SolverExact, ToleranceBandIsRespected) {
  ElasticityConfig c = deepspeedFixture();
  c.version = ElasticityVersion::Exact;
  c.targetBatchSize = 4096;
  c.batchTolerance = 0.05;
  const ElasticPlan plan = computeElasticConfig(c);
  EXPECT_GE(plan.finalBatchSize, 3892);  // ceil(4096 * 0.95)
  EXPECT_LE(plan.finalBatchSize, 4300);  // floor(4096 * 1.05)
  c.targetBatchSize = 20000;             // band entirely above the cap
  EXPECT_THROW(computeElasticConfig(c), ElasticityConfigError);
}

TEST(SolverExact, ToleranceBandEdgesAreExactDecimals) {
  ElasticityConfig c = deepspeedFixture();
  c.version = ElasticityVersion::Exact;
  c.targetBatchSize = 160;
  c.batchTolerance = 0.1;  // 160 * 0.9 is 144.0000000000000035 in binary floating point
  EXPECT_EQ(exactSearchRange(c).lo, 144);
  EXPECT_EQ(exactSearchRange(c).hi, 176);
  c.targetBatchSize = 4096;
  c.batchTolerance = 0.05;
  EXPECT_EQ(exactSearchRange(c).lo, 3892);  // ceil(3891.2)
  EXPECT_EQ(exactSearchRange(c).hi, 4300);  // floor(4300.8)
  c.targetBatchSize = 9900;
  EXPECT_EQ(exactSearchRange(c).hi, 10000);  // capped by max_train_batch_size
  c.targetBatchSize = std::nullopt;
  EXPECT_EQ(exactSearchRange(c).lo, 1);
  EXPECT_EQ(exactSearchRange(c).hi, 10000);
}

TEST(SolverExact, TenMillionCapSolves) {
  ElasticityConfig c;
  c.enabled = true;
  c.version = ElasticityVersion::Exact;
  c.maxTrainBatchSize = 10'000'000;
  c.microBatchSizes = {2, 4, 6, 8, 12, 16};
  c.maxGpus = 10'000'000;
  const ElasticPlan plan = computeElasticConfig(c);
  EXPECT_LE(plan.finalBatchSize, 10'000'000);
  EXPECT_GE(plan.validWorldSizes.size(), 384u);  // v0.1's answer on this config
}

TEST(SolverExact, HugeRangeAsksForABand) {
  ElasticityConfig c = deepspeedFixture();
  c.version = ElasticityVersion::Exact;
  c.maxTrainBatchSize = config::kMaxTrainBatchLimit;
  EXPECT_THROW(computeElasticConfig(c), ElasticityConfigError);
  c.targetBatchSize = 1'000'000'000;
  c.batchTolerance = 0.001;
  EXPECT_NO_THROW(computeElasticConfig(c));
}

TEST(SolverExact, ManyMicroBatchesWithSharedLcmsStayFast) {
  // 40 divisors of 720720 that form an antichain: 2^40 subsets but few distinct LCMs.
  ElasticityConfig c = deepspeedFixture();
  c.version = ElasticityVersion::Exact;
  c.maxTrainBatchSize = 1'000'000;
  c.minGpus = 1;
  c.microBatchSizes.clear();
  for (std::int64_t d = 1000; d <= 720720 && c.microBatchSizes.size() < 40; ++d) {
    if (720720 % d == 0 && d > 720720 / d / 8)
      c.microBatchSizes.push_back(d);
  }
  EXPECT_NO_THROW(computeElasticConfig(c));
}

TEST(WorldSizeTable, RowsMultiplyBackToTheBatch) {
  const ElasticityConfig c = deepspeedFixture();
  const ElasticPlan plan = computeElasticConfig(c);
  const auto rows = worldSizeTable(c, plan);
  ASSERT_EQ(rows.size(), kFixtureValid.size());
  for (const auto& row : rows) {
    EXPECT_EQ(row.microBatch * row.gradientAccumulation * row.worldSize, plan.finalBatchSize);
  }
  EXPECT_EQ(rows[5].worldSize, 64);
  EXPECT_EQ(rows[5].microBatch, 17);
  EXPECT_EQ(rows[5].gradientAccumulation, 9);
}

}  // namespace
}  // namespace stretch::elasticity
