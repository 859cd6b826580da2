#pragma once
// What DeepSpeed's runtime does with the elasticity section when a job starts
// (DeepSpeedConfig's elastic override and ensure_immutable_elastic_config).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/common/worker_variables.hpp"
#include "runtime/config/batch.hpp"
#include "runtime/config/ds_config.hpp"

namespace stretch::elasticity {

// The environment variables the elastic runtime reads, captured once so the logic stays pure.
struct ElasticEnvironment {
  std::optional<std::string> worldSize;  // WORLD_SIZE
  // DEEPSPEED_ELASTICITY_CONFIG (or STRETCH_ELASTICITY_CONFIG): the elasticity section the
  // resource scheduler planned with, as JSON. Name records which variable it came from.
  std::optional<std::string> schedulerConfig;
  std::string schedulerConfigName = "DEEPSPEED_ELASTICITY_CONFIG";
  // The launcher's batch contract (docs/launch.md): STRETCH_TRAIN_BATCH_SIZE,
  // STRETCH_MICRO_BATCH_SIZE, STRETCH_GRADIENT_ACCUMULATION_STEPS, the batch `stretch launch`
  // chose for this generation. All three or none (ConfigError naming the missing one).
  std::optional<config::BatchTriple> launcherBatch;
  // What launcherBatch is called in the error when it differs from the worker's batch: the
  // variable, or (live recovery, Engine::rejoin) the live generation record it came from.
  std::string launcherBatchName = worker_env::kTrainBatchSize;

  // Reads the variables of the current process. When both config variables are set they must
  // hold the same text (ElasticityConfigError otherwise).
  static ElasticEnvironment fromProcess();
};

// DeepSpeed's ensure_immutable_elastic_config: the scheduler's elasticity section must agree with
// the runtime's on max_train_batch_size, micro_batch_sizes (order included) and version, or the
// scheduler may scale the job to sizes the runtime's batch does not support. Throws
// ElasticityConfigError on a mismatch (ConfigError when the variable is not valid JSON). Returns
// a warning when no scheduler config is present.
std::optional<std::string> ensureImmutableElasticConfig(const config::ElasticityConfig& runtime,
                                                        const ElasticEnvironment& env);

struct TrainingBatch {
  config::BatchTriple triple;
  std::int64_t dataParallelSize = 0;
  std::vector<std::string> warnings;  // overridden keys, missing scheduler config
};

// The batch a job of worldSize GPUs trains with. With elasticity enabled the solver chooses it
// (for that world size) after the immutability check; the batch keys, if present, are overridden
// with a warning. Otherwise the batch keys are resolved for worldSize / modelParallelSize
// data-parallel ranks (modelParallelSize is ignored when elasticity is on: the section has its
// own model_parallel_size). With the launcher's batch contract in env, the result must be that
// batch: the launcher and the worker solve the same config, and a worker whose config differs
// from the launcher's --config is an ElasticityConfigError naming STRETCH_TRAIN_BATCH_SIZE, not
// a job whose global batch silently differs from what the agent planned.
TrainingBatch resolveTrainingBatch(const config::DsConfig& config, std::int64_t worldSize,
                                   const ElasticEnvironment& env,
                                   std::int64_t modelParallelSize = 1);

}  // namespace stretch::elasticity
