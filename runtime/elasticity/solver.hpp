#pragma once
// The elastic batch-size solver: DeepSpeed's compute_elastic_config, made exact.
//
// Given the elasticity section, it chooses one global train batch that stays valid across as many
// world sizes as possible: a world size g is valid when some configured micro batch mb satisfies
// batch % (g * mb) == 0, so that batch = mb * gradient_accumulation * g.
//
//  * v0.1 and v0.2 reproduce DeepSpeed (HEAD of 2026-08, with PR #8237: the batch never exceeds
//    max_train_batch_size), including its candidate set and tie-breaks. Where DeepSpeed crashes or
//    returns an unusable answer, Stretch throws a typed error or returns the correct answer;
//    docs/compatibility.md lists each case.
//  * exact searches every batch size up to the cap (or within a tolerance band) and returns the
//    one with the most valid world sizes, ties broken like DeepSpeed (larger batch when
//    prefer_larger_batch, else smaller). Without a band it is never worse than v0.1.
//
// Pure functions: no I/O, no clocks, no global state; the environment (WORLD_SIZE) is passed in.
// Errors: ElasticityConfigError (bad or missing input), ElasticityError (no plan exists),
// ElasticityIncompatibleWorldSize (the given world size is not valid).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/config/elasticity_config.hpp"

namespace stretch::elasticity {

// DeepSpeed's MINIMUM_DEEPSPEED_VERSION for elasticity.
inline constexpr std::string_view kMinimumDeepspeedVersion = "0.3.8";
// The DeepSpeed release whose semantics Stretch follows (used when no target version is given).
inline constexpr std::string_view kCompatibleDeepspeedVersion = "0.18.2";
// Largest number of batch sizes the exact solver scans (4 bytes each).
inline constexpr std::int64_t kMaxExactSearchWidth = std::int64_t{1} << 27;

struct SolveRequest {
  // Total GPUs of the job (DeepSpeed's world_size argument); 0 = not given. For v0.2 and exact
  // the data-parallel size is worldSize / model_parallel_size.
  std::int64_t worldSize = 0;
  // Also compute a micro batch when worldSize is 0 (DeepSpeed's return_microbatch). v0.2 then
  // returns its own candidate; v0.1 and exact resolve the world size from WORLD_SIZE.
  bool returnMicroBatch = false;
  // The WORLD_SIZE environment variable as read by the caller (nullopt when unset). v0.2 reads
  // it when worldSize is 0, as DeepSpeed does.
  std::optional<std::string> envWorldSize;
  // The DeepSpeed version a scheduler targets; must be >= kMinimumDeepspeedVersion.
  std::string targetDeepspeedVersion = std::string(kCompatibleDeepspeedVersion);
};

struct ElasticPlan {
  config::ElasticityVersion version = config::ElasticityVersion::V0_1;
  std::int64_t finalBatchSize = 0;
  // Sorted ascending. v0.1: GPU counts. v0.2 and exact: data-parallel sizes (GPUs divided by
  // model_parallel_size), whole nodes only when num_gpus_per_node > 1 - as DeepSpeed reports them.
  std::vector<std::int64_t> validWorldSizes;
  // Micro batch per GPU for the requested world size, or v0.2's candidate; nullopt otherwise.
  std::optional<std::int64_t> microBatch;
  // The world size the micro batch refers to, in the units of validWorldSizes (0 if none).
  std::int64_t resolvedWorldSize = 0;
  bool operator==(const ElasticPlan&) const = default;
};

// DeepSpeed's compute_elastic_config. Checks, in DeepSpeed's order: enabled, model parallelism
// only with v0.2/exact, target version, the solve itself, then world-size membership.
ElasticPlan computeElasticConfig(const config::ElasticityConfig& config,
                                 const SolveRequest& request = {});

// One row of the world-size table: how the final batch splits at a valid world size.
struct WorldSizeRow {
  std::int64_t worldSize;             // in the plan's units (see ElasticPlan::validWorldSizes)
  std::int64_t gpus;                  // worldSize * model_parallel_size
  std::int64_t microBatch;            // largest configured micro batch that fits
  std::int64_t gradientAccumulation;  // finalBatchSize / (microBatch * worldSize)
};

// The micro batch DeepSpeed's runtime picks at a valid world size: the largest configured micro
// batch dividing finalBatchSize / worldSize. nullopt when none divides.
std::optional<std::int64_t> microBatchFor(const config::ElasticityConfig& config,
                                          std::int64_t finalBatchSize, std::int64_t worldSize);

// A row for every valid world size of the plan.
std::vector<WorldSizeRow> worldSizeTable(const config::ElasticityConfig& config,
                                         const ElasticPlan& plan);

// Valid world sizes of one batch: every g in [minSize, maxSize] such that some micro batch mb
// divides batch / g. Sorted ascending. Exposed for tests and the planner.
std::vector<std::int64_t> validWorldSizesForBatch(std::int64_t batch,
                                                  const std::vector<std::int64_t>& microBatches,
                                                  std::int64_t minSize, std::int64_t maxSize);

// The batch sizes the exact solver searches: [1, max_train_batch_size], or with a target the band
// [ceil(target * (1 - tol)), floor(target * (1 + tol))] intersected with it. The band edges allow
// 1e-9 of floating-point slack, so 160 +- 10% is exactly [144, 176]. lo > hi when the band misses.
struct BatchRange {
  std::int64_t lo;
  std::int64_t hi;
};
BatchRange exactSearchRange(const config::ElasticityConfig& config);

// Compares dotted version strings ("0.3.8" < "0.18.2"); a non-numeric suffix on the last part
// ("0.18.2+abc", "0.19.0rc1") is ignored. Throws ConfigError when a part is not a number.
int compareVersions(std::string_view a, std::string_view b);

}  // namespace stretch::elasticity
