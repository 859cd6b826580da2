#pragma once
// The "elasticity" section of a DeepSpeed config, validated.
//
// Keys, defaults and validation follow DeepSpeed (deepspeed/elasticity/constants.py and
// config.py; see docs/compatibility.md for where Stretch is stricter). Two keys are Stretch's own
// and only used by the exact solver: "target_batch_size" and "batch_tolerance".

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stretch::config {

// Which solver computes the elastic batch.
//  V0_1  : DeepSpeed v0.1, valid sizes are GPU counts.
//  V0_2  : DeepSpeed v0.2, node granularity and model parallelism; needs the current world size.
//  Exact : Stretch, searches every batch size up to the cap (or in a tolerance band).
enum class ElasticityVersion { V0_1, V0_2, Exact };

// Largest accepted max_train_batch_size (2^40): keeps every product exact in 64 bits and
// factorisation cheap. Far above any real global batch.
inline constexpr std::int64_t kMaxTrainBatchLimit = std::int64_t{1} << 40;
// Most entries accepted in micro_batch_sizes.
inline constexpr std::size_t kMaxMicroBatchCount = 1024;

std::string_view toString(ElasticityVersion version) noexcept;  // "0.1", "0.2", "exact"

struct ElasticityConfig {
  bool enabled = false;
  std::int64_t maxTrainBatchSize = 2000;                  // key max_train_batch_size
  std::vector<std::int64_t> microBatchSizes = {2, 4, 6};  // key micro_batch_sizes, as written
  std::int64_t minGpus = 1;
  std::int64_t maxGpus = 10000;
  std::int64_t numGpusPerNode = 1;
  std::int64_t modelParallelSize = 1;
  double minTime = 0;  // minutes; informational, never used by the solver (as in DeepSpeed)
  bool preferLargerBatch = true;  // key prefer_larger_batch
  bool ignoreNonElasticBatchInfo = false;
  ElasticityVersion version = ElasticityVersion::V0_2;  // DeepSpeed's default (latest)
  // Exact solver only: search batches within targetBatchSize * (1 ± batchTolerance), capped by
  // maxTrainBatchSize. Without a target the whole range [1, maxTrainBatchSize] is searched.
  std::optional<std::int64_t> targetBatchSize;
  double batchTolerance = 0.0;

  bool operator==(const ElasticityConfig&) const = default;
};

// Parses and validates a JSON object holding only the elasticity section (the form DeepSpeed puts
// in DEEPSPEED_ELASTICITY_CONFIG), or a whole config whose "elasticity" object is read instead
// (the form DeepSpeed's own test put there). source names the origin in error messages. Throws
// ElasticityConfigError (bad values) or ConfigError (malformed JSON).
ElasticityConfig parseElasticitySection(std::string_view jsonText, std::string_view source);

// Same, and appends the unknown-key warning (at most one string, as in ParsedConfig::warnings) to
// warnings, which is left untouched when parsing throws.
ElasticityConfig parseElasticitySection(std::string_view jsonText, std::string_view source,
                                        std::vector<std::string>& warnings);

}  // namespace stretch::config
