#include "runtime/elasticity/runtime_batch.hpp"

#include <cstdlib>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/common/error.hpp"
#include "runtime/elasticity/solver.hpp"
#include "runtime/common/worker_variables.hpp"

namespace stretch::elasticity {

namespace {
std::optional<std::string> readEnv(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::nullopt : std::optional<std::string>(value);
}
}  // namespace

ElasticEnvironment ElasticEnvironment::fromProcess() {
  ElasticEnvironment env;
  env.worldSize = readEnv("WORLD_SIZE");
  const auto deepspeed = readEnv("DEEPSPEED_ELASTICITY_CONFIG");
  const auto stretch = readEnv(worker_env::kElasticityConfig);
  if (deepspeed && stretch && *deepspeed != *stretch) {
    throw ElasticityConfigError(
        ErrorDetail{worker_env::kElasticityConfig, *stretch,
                    "the same text as DEEPSPEED_ELASTICITY_CONFIG when both are set"});
  }
  const char* names[3] = {worker_env::kTrainBatchSize, worker_env::kMicroBatchSize,
                          worker_env::kGradientAccumulationSteps};
  std::optional<std::string> values[3];
  int present = 0;
  for (int i = 0; i < 3; ++i) {
    values[i] = readEnv(names[i]);
    present += values[i] ? 1 : 0;
  }
  if (present > 0) {
    std::int64_t numbers[3] = {0, 0, 0};
    for (int i = 0; i < 3; ++i) {
      if (!values[i]) {
        throw ConfigError(ErrorDetail{names[i], "unset",
                                      "set together with the other two STRETCH_*_BATCH_SIZE / "
                                      "STRETCH_GRADIENT_ACCUMULATION_STEPS variables"});
      }
      std::size_t used = 0;
      try {
        numbers[i] = std::stoll(*values[i], &used);
      } catch (...) {
        used = 0;
      }
      if (used == 0 || used != values[i]->size() || numbers[i] < 1)
        throw ConfigError(ErrorDetail{names[i], *values[i], "a positive integer"});
    }
    env.launcherBatch = config::BatchTriple{numbers[0], numbers[1], numbers[2]};
  }
  if (deepspeed) {
    env.schedulerConfig = deepspeed;
  } else if (stretch) {
    env.schedulerConfig = stretch;
    env.schedulerConfigName = worker_env::kElasticityConfig;
  }
  return env;
}

std::optional<std::string> ensureImmutableElasticConfig(const config::ElasticityConfig& runtime,
                                                        const ElasticEnvironment& env) {
  if (!env.schedulerConfig) {
    return fmt::format(
        "Unable to find DEEPSPEED_ELASTICITY_CONFIG environment variable, cannot guarantee "
        "resource scheduler will scale this job using compatible GPU counts.");
  }
  const config::ElasticityConfig scheduler =
      config::parseElasticitySection(*env.schedulerConfig, env.schedulerConfigName);
  auto mismatch = [&](const char* key, const std::string& seen, const std::string& ours) {
    throw ElasticityConfigError(ErrorDetail{
        fmt::format("{}.{}", env.schedulerConfigName, key), seen,
        fmt::format("{} as in the runtime config: the resource scheduler must plan with the "
                    "same elastic config the job runs with",
                    ours)});
  };
  if (scheduler.maxTrainBatchSize != runtime.maxTrainBatchSize) {
    mismatch("max_train_batch_size", std::to_string(scheduler.maxTrainBatchSize),
             std::to_string(runtime.maxTrainBatchSize));
  }
  if (scheduler.microBatchSizes != runtime.microBatchSizes) {
    mismatch("micro_batch_sizes", fmt::format("[{}]", fmt::join(scheduler.microBatchSizes, ", ")),
             fmt::format("[{}]", fmt::join(runtime.microBatchSizes, ", ")));
  }
  if (scheduler.version != runtime.version) {
    mismatch("version", std::string(config::toString(scheduler.version)),
             std::string(config::toString(runtime.version)));
  }
  return std::nullopt;
}

namespace {

TrainingBatch solveTrainingBatch(const config::DsConfig& config, std::int64_t worldSize,
                                 const ElasticEnvironment& env, std::int64_t modelParallelSize) {
  if (worldSize < 1) {
    throw ConfigError(
        ErrorDetail{"world_size", std::to_string(worldSize), "a positive number of GPUs"});
  }
  TrainingBatch out;
  const config::ElasticityConfig& elastic = config.elasticity;
  if (!elastic.enabled) {
    if (modelParallelSize < 1 || worldSize % modelParallelSize != 0) {
      throw ConfigError(
          ErrorDetail{"world_size", std::to_string(worldSize),
                      fmt::format("a multiple of the model-parallel size {}", modelParallelSize)});
    }
    out.dataParallelSize = worldSize / modelParallelSize;
    out.triple = config::resolveBatch(config.batch, out.dataParallelSize);
    return out;
  }

  SolveRequest request;
  request.worldSize = worldSize;
  request.envWorldSize = env.worldSize;
  const ElasticPlan plan = computeElasticConfig(elastic, request);
  if (auto warning = ensureImmutableElasticConfig(elastic, env)) {
    out.warnings.push_back(*warning);
  }
  out.dataParallelSize = plan.resolvedWorldSize;
  const std::int64_t micro = plan.microBatch.value_or(0);
  out.triple = {plan.finalBatchSize, micro, plan.finalBatchSize / (micro * out.dataParallelSize)};

  // The config layer already rejected batch keys unless ignore_non_elastic_batch_info is set.
  auto overriding = [&](const char* key, const std::optional<std::int64_t>& old, std::int64_t now) {
    if (old) {
      out.warnings.push_back(fmt::format("[Elasticity] overriding {}: {} -> {}", key, *old, now));
    }
  };
  overriding("train_batch_size", config.batch.trainBatchSize, out.triple.trainBatchSize);
  overriding("train_micro_batch_size_per_gpu", config.batch.microBatchPerGpu,
             out.triple.microBatchPerGpu);
  overriding("gradient_accumulation_steps", config.batch.gradientAccumulation,
             out.triple.gradientAccumulation);
  return out;
}

}  // namespace

TrainingBatch resolveTrainingBatch(const config::DsConfig& config, std::int64_t worldSize,
                                   const ElasticEnvironment& env, std::int64_t modelParallelSize) {
  TrainingBatch out = solveTrainingBatch(config, worldSize, env, modelParallelSize);
  if (env.launcherBatch && *env.launcherBatch != out.triple) {
    const auto& l = *env.launcherBatch;
    throw ElasticityConfigError(ErrorDetail{
        env.launcherBatchName,
        fmt::format("{} = micro {} x accumulation {} x {} ranks", l.trainBatchSize,
                    l.microBatchPerGpu, l.gradientAccumulation, out.dataParallelSize),
        fmt::format("the batch this worker's config gives for world size {}: {} = micro {} x "
                    "accumulation {}; the launcher's --config and the worker's config differ",
                    worldSize, out.triple.trainBatchSize, out.triple.microBatchPerGpu,
                    out.triple.gradientAccumulation)});
  }
  return out;
}

}  // namespace stretch::elasticity
