#pragma once
// Which world sizes a job may run at, and the batch it trains at each: the elastic solver's
// answer turned into rules the agent, the simulator and the planner ask (runtime/agent's
// world_plan.hpp lays a valid world out on nodes).
//
// Contract:
//  - A world size is a number of GPUs, i.e. of worker processes (one per slot used).
//  - Elasticity enabled: a size is valid when the elastic solver lists it. The solver is run
//    once (planWithoutWorldSize); its valid sizes are data-parallel sizes for versions 0.2 and
//    exact and are multiplied here by the section's model_parallel_size (v0.1: GPU counts, as
//    solved). Every valid size trains the solver's final batch; the batch triple of a size is
//    the solver's (the largest configured micro batch that divides, and the gradient
//    accumulation that completes the batch), the one the workers' runtime resolves
//    (resolveTrainingBatch). Version 0.2's fallback (DeepSpeed builds a batch of its own for a
//    size outside the list) is never used: such a size is simply not valid, so the global batch
//    never changes when the job scales.
//  - Elasticity disabled: a size is valid when it is a multiple of the model-parallel size and
//    the batch keys resolve for its data-parallel size (config::resolveBatch does not throw);
//    e.g. train_batch_size 32 with micro batch 4 allows 1, 2, 4 and 8 data-parallel ranks only.
//    Only train_micro_batch_size_per_gpu (with or without gradient_accumulation_steps) allows
//    every size.
// Pure: no I/O, no clock, no global state. WorldSizeRules caches answers (not thread-safe).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/config/batch.hpp"
#include "runtime/config/ds_config.hpp"
#include "runtime/elasticity/solver.hpp"

namespace stretch::elasticity {

// The solver's plan for a section without a world size of its own: the final batch and every
// valid size. Versions 0.1 and exact: the solver as is. Version 0.2, which needs the current
// world size: its list is version 0.1 solved in node units (DeepSpeed's _get_compatible_gpus_v02),
// so a size inside the list is found first and the solver asked at that size. Throws what the
// solver throws for a section it rejects.
ElasticPlan planWithoutWorldSize(const config::ElasticityConfig& section);

class WorldSizeRules {
 public:
  // training: the job's DeepSpeed config (its elasticity section and batch keys).
  // modelParallelSize: GPUs per data-parallel rank when elasticity is disabled (with elasticity
  // the section's model_parallel_size is used). Throws what the elastic solver throws when the
  // section is enabled but has no plan (ElasticityConfigError, ElasticityError), and ConfigError
  // for modelParallelSize < 1.
  explicit WorldSizeRules(const config::DsConfig& training, std::int64_t modelParallelSize = 1);

  bool elastic() const noexcept { return elastic_; }
  // GPUs per data-parallel rank.
  std::int64_t modelParallelSize() const noexcept { return modelParallel_; }
  // Elastic: the global batch every valid size trains. nullopt without elasticity.
  std::optional<std::int64_t> finalBatch() const noexcept { return finalBatch_; }
  // Elastic: every valid GPU count, ascending. Empty without elasticity.
  const std::vector<std::int64_t>& validGpuCounts() const noexcept { return validGpus_; }

  bool isValid(std::int64_t gpus) const { return batchFor(gpus).has_value(); }
  // The batch triple the job trains with at `gpus` GPUs; nullopt when the size is not valid.
  std::optional<config::BatchTriple> batchFor(std::int64_t gpus) const;
  // The largest valid size <= gpus; 0 when there is none.
  std::int64_t largestValidAtMost(std::int64_t gpus) const;
  // The largest valid size <= gpus that is a multiple of `step` (whole nodes of `step` GPUs);
  // 0 when there is none. Remembers each answer for the whole range it holds on, so the agent's
  // repeated questions after failures cost O(log) instead of a walk down the sizes.
  std::int64_t largestValidMultipleAtMost(std::int64_t step, std::int64_t gpus) const;
  // The valid sizes for messages: "[2, 4, 8, 16] GPUs" (long lists shortened), or the rule when
  // elasticity is disabled.
  std::string describeValid() const;

 private:
  bool elastic_ = false;
  std::int64_t modelParallel_ = 1;
  std::optional<std::int64_t> finalBatch_;
  std::vector<std::int64_t> validGpus_;
  std::map<std::int64_t, config::BatchTriple> elasticBatches_;  // by GPU count
  config::BatchKeys keys_;
  mutable std::map<std::int64_t, std::optional<config::BatchTriple>> resolved_;  // non-elastic
  // largestValidMultipleAtMost: by step, upper bound asked -> answer (the answer holds for every
  // bound from it to the one asked).
  mutable std::map<std::int64_t, std::map<std::int64_t, std::int64_t>> multiples_;
};

}  // namespace stretch::elasticity
