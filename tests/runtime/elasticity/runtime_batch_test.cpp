#include "runtime/elasticity/runtime_batch.hpp"

#include <stdlib.h>

#include <gtest/gtest.h>

#include "runtime/common/error.hpp"
#include "runtime/config/ds_config.hpp"

namespace stretch::elasticity {
namespace {

const char* kElasticSection =
    R"({"enabled": true, "max_train_batch_size": 10000, "micro_batch_sizes": [8, 12, 16, 17],
        "min_gpus": 32, "max_gpus": 1500, "min_time": 20, "version": 0.1})";

config::DsConfig elasticConfig(const std::string& extraTopLevel = "",
                               const std::string& section = kElasticSection) {
  return config::parseConfig("{" + extraTopLevel + "\"elasticity\": " + section + "}").config;
}

ElasticEnvironment schedulerSaw(const std::string& section) {
  ElasticEnvironment env;
  env.schedulerConfig = section;
  return env;
}

TEST(RuntimeBatch, ElasticOverrideAtAValidWorldSize) {
  // DeepSpeed's config at world size 64: (9792, 17, 9).
  const TrainingBatch b = resolveTrainingBatch(elasticConfig(), 64, schedulerSaw(kElasticSection));
  EXPECT_EQ(b.triple, (config::BatchTriple{9792, 17, 9}));
  EXPECT_EQ(b.dataParallelSize, 64);
  EXPECT_TRUE(b.warnings.empty());
}

TEST(RuntimeBatch, ElasticV02WithModelParallelism) {
  const std::string section =
      R"({"enabled": true, "max_train_batch_size": 100000, "micro_batch_sizes": [8, 12, 16, 17],
          "min_gpus": 32, "max_gpus": 1500, "num_gpus_per_node": 8, "model_parallel_size": 2,
          "version": 0.2})";
  const auto cfg = elasticConfig("", section);
  // Reference: data-parallel size 16 (32 GPUs) trains (80640, 16, 315).
  EXPECT_EQ(resolveTrainingBatch(cfg, 32, schedulerSaw(section)).triple,
            (config::BatchTriple{80640, 16, 315}));
  // 16 GPUs = data-parallel 8, below min_gpus: v0.2's fallback builds a batch for this size alone,
  // the largest multiple of 8 * mb within the cap (8 * 16 * 781 = 99968).
  const TrainingBatch fallback = resolveTrainingBatch(cfg, 16, schedulerSaw(section));
  EXPECT_EQ(fallback.triple, (config::BatchTriple{99968, 16, 781}));
  EXPECT_EQ(fallback.dataParallelSize, 8);
}

TEST(RuntimeBatch, InvalidElasticWorldSizeIsTyped) {
  EXPECT_THROW(resolveTrainingBatch(elasticConfig(), 128, schedulerSaw(kElasticSection)),
               ElasticityIncompatibleWorldSize);
  EXPECT_THROW(resolveTrainingBatch(elasticConfig(), 0, schedulerSaw(kElasticSection)),
               ConfigError);
}

TEST(RuntimeBatch, IgnoredBatchKeysAreOverriddenWithWarnings) {
  const std::string section =
      R"({"enabled": true, "max_train_batch_size": 4, "micro_batch_sizes": [1, 2, 3, 4],
          "min_gpus": 1, "max_gpus": 4, "version": 0.1, "ignore_non_elastic_batch_info": true})";
  const auto cfg = elasticConfig(R"("train_batch_size": 2,)", section);
  const TrainingBatch b = resolveTrainingBatch(cfg, 2, schedulerSaw(section));
  // DeepSpeed's TestNonElasticBatchParamsWithOverride at HEAD: (4, 2, 1).
  EXPECT_EQ(b.triple, (config::BatchTriple{4, 2, 1}));
  ASSERT_EQ(b.warnings.size(), 1u);
  EXPECT_EQ(b.warnings[0], "[Elasticity] overriding train_batch_size: 2 -> 4");
}

TEST(RuntimeBatch, NonElasticConfigsUseTheBatchKeys) {
  const auto cfg =
      config::parseConfig(R"({"train_batch_size": 32, "gradient_accumulation_steps": 2})").config;
  const TrainingBatch b = resolveTrainingBatch(cfg, 8, ElasticEnvironment{}, 2);
  EXPECT_EQ(b.dataParallelSize, 4);
  EXPECT_EQ(b.triple, (config::BatchTriple{32, 4, 2}));
  EXPECT_THROW(resolveTrainingBatch(cfg, 7, ElasticEnvironment{}, 2), ConfigError);
}

TEST(ImmutableElasticConfig, MissingSchedulerConfigWarns) {
  const auto warning =
      ensureImmutableElasticConfig(elasticConfig().elasticity, ElasticEnvironment{});
  ASSERT_TRUE(warning.has_value());
  EXPECT_NE(warning->find("DEEPSPEED_ELASTICITY_CONFIG"), std::string::npos);
  // The warning reaches the caller of resolveTrainingBatch too.
  EXPECT_EQ(resolveTrainingBatch(elasticConfig(), 64, ElasticEnvironment{}).warnings.size(), 1u);
}

TEST(ImmutableElasticConfig, MismatchesAreErrorsNamingTheKey) {
  const auto runtime = elasticConfig().elasticity;
  const std::pair<const char*, const char*> cases[] = {
      {R"({"enabled": true, "max_train_batch_size": 27, "micro_batch_sizes": [8, 12, 16, 17], "version": 0.1})",
       "max_train_batch_size"},
      {R"({"enabled": true, "max_train_batch_size": 10000, "micro_batch_sizes": [17, 16, 12, 8], "version": 0.1})",
       "micro_batch_sizes"},
      {R"({"enabled": true, "max_train_batch_size": 10000, "micro_batch_sizes": [8, 12, 16, 17], "version": 0.2})",
       "version"},
      // DeepSpeed's TestElasticConfigChanged puts the whole ds_config in the variable: its
      // elasticity section is what is compared (DeepSpeed compared the defaults instead).
      {R"({"train_batch_size": 2, "elasticity": {"enabled": true, "max_train_batch_size": 27,
           "micro_batch_sizes": [8, 12, 16, 17], "version": 0.1}})",
       "max_train_batch_size = 27"},
  };
  for (const auto& [env, key] : cases) {
    try {
      ensureImmutableElasticConfig(runtime, schedulerSaw(env));
      ADD_FAILURE() << "no error for " << env;
    } catch (const ElasticityConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("DEEPSPEED_ELASTICITY_CONFIG.") + key),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(ImmutableElasticConfig, SameValuesMatchWhateverTheSpelling) {
  const auto runtime = elasticConfig().elasticity;
  EXPECT_FALSE(ensureImmutableElasticConfig(
                   runtime, schedulerSaw(R"({"enabled": true, "max_train_batch_size": 10000,
                       "micro_batch_sizes": [8, 12, 16, 17], "version": "0.1", "min_gpus": 1})"))
                   .has_value());
  // A whole config in the variable matches by its elasticity section.
  EXPECT_FALSE(ensureImmutableElasticConfig(
                   runtime, schedulerSaw(R"({"train_batch_size": 2, "elasticity": {"enabled": true,
                       "max_train_batch_size": 10000, "micro_batch_sizes": [8, 12, 16, 17],
                       "version": 0.1}})"))
                   .has_value());
  EXPECT_THROW(ensureImmutableElasticConfig(runtime, schedulerSaw("{not json")), ConfigError);
}

TEST(ElasticEnvironment, ReadsBothVariableNamesAndRejectsDisagreement) {
  ::unsetenv("DEEPSPEED_ELASTICITY_CONFIG");
  ::setenv("STRETCH_ELASTICITY_CONFIG", kElasticSection, 1);
  ::setenv("WORLD_SIZE", "64", 1);
  ElasticEnvironment env = ElasticEnvironment::fromProcess();
  EXPECT_EQ(env.schedulerConfig, kElasticSection);
  EXPECT_EQ(env.schedulerConfigName, "STRETCH_ELASTICITY_CONFIG");
  EXPECT_EQ(env.worldSize, "64");
  ::setenv("DEEPSPEED_ELASTICITY_CONFIG", "{}", 1);
  EXPECT_THROW(ElasticEnvironment::fromProcess(), ElasticityConfigError);
  ::setenv("DEEPSPEED_ELASTICITY_CONFIG", kElasticSection, 1);
  EXPECT_EQ(ElasticEnvironment::fromProcess().schedulerConfigName, "DEEPSPEED_ELASTICITY_CONFIG");
  ::unsetenv("DEEPSPEED_ELASTICITY_CONFIG");
  ::unsetenv("STRETCH_ELASTICITY_CONFIG");
  ::unsetenv("WORLD_SIZE");
}

}  // namespace
}  // namespace stretch::elasticity

namespace stretch::elasticity {
namespace {

// The launcher's batch contract (STRETCH_TRAIN_BATCH_SIZE, ...): read all three or none, and the
// worker's own solution must be that batch.
TEST(LauncherBatchContract, TheWorkersBatchMustBeTheOneTheLauncherChose) {
  ElasticEnvironment env = schedulerSaw(kElasticSection);
  env.launcherBatch = config::BatchTriple{9792, 17, 9};
  EXPECT_EQ(resolveTrainingBatch(elasticConfig(), 64, env).triple,
            (config::BatchTriple{9792, 17, 9}));
  env.launcherBatch = config::BatchTriple{9792, 17, 9};
  try {
    resolveTrainingBatch(elasticConfig(), 32, env);  // another world size, another batch
    FAIL() << "a batch other than the launcher's was accepted";
  } catch (const ElasticityConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("STRETCH_TRAIN_BATCH_SIZE"), std::string::npos)
        << e.what();
  }
  // Non-elastic configs are held to the contract too.
  const auto cfg =
      config::parseConfig(R"({"train_batch_size": 32, "gradient_accumulation_steps": 2})").config;
  ElasticEnvironment plain;
  plain.launcherBatch = config::BatchTriple{32, 4, 2};
  EXPECT_EQ(resolveTrainingBatch(cfg, 4, plain).triple, (config::BatchTriple{32, 4, 2}));
  plain.launcherBatch = config::BatchTriple{32, 8, 1};
  EXPECT_THROW(resolveTrainingBatch(cfg, 4, plain), ElasticityConfigError);
}

TEST(LauncherBatchContract, FromProcessReadsAllThreeOrNone) {
  const auto clear = [] {
    ::unsetenv("STRETCH_TRAIN_BATCH_SIZE");
    ::unsetenv("STRETCH_MICRO_BATCH_SIZE");
    ::unsetenv("STRETCH_GRADIENT_ACCUMULATION_STEPS");
  };
  clear();
  EXPECT_FALSE(ElasticEnvironment::fromProcess().launcherBatch);
  ::setenv("STRETCH_TRAIN_BATCH_SIZE", "48", 1);
  ::setenv("STRETCH_MICRO_BATCH_SIZE", "8", 1);
  ::setenv("STRETCH_GRADIENT_ACCUMULATION_STEPS", "3", 1);
  EXPECT_EQ(ElasticEnvironment::fromProcess().launcherBatch, (config::BatchTriple{48, 8, 3}));
  ::setenv("STRETCH_MICRO_BATCH_SIZE", "eight", 1);
  EXPECT_THROW(ElasticEnvironment::fromProcess(), ConfigError);
  ::setenv("STRETCH_MICRO_BATCH_SIZE", "0", 1);
  EXPECT_THROW(ElasticEnvironment::fromProcess(), ConfigError);
  ::unsetenv("STRETCH_MICRO_BATCH_SIZE");
  try {
    ElasticEnvironment::fromProcess();
    FAIL() << "two of the three variables were accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("STRETCH_MICRO_BATCH_SIZE"), std::string::npos)
        << e.what();
  }
  clear();
}

}  // namespace
}  // namespace stretch::elasticity
