#pragma once
// DsConfig: a DeepSpeed JSON config parsed into an immutable, validated value.
//
// Parsing accepts standard JSON plus // and /* */ comments and trailing commas. Duplicate keys
// are an error (DeepSpeed loads configs with dict_raise_error_on_duplicate_keys). Every error is
// a ConfigError (or ElasticityConfigError for the elasticity section) whose message names the
// JSON path, the offending value and what was expected. Keys Stretch does not know produce one
// warning listing them, with a "did you mean" hint for near misses; keys DeepSpeed knows but
// Stretch does not use are listed separately as ignored.
//
// Defaults follow DeepSpeed v0.18.2; docs/config.md lists them and the ones that drifted upstream.
// Thread safety: DsConfig is a plain value; parse functions are reentrant.

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "runtime/config/batch.hpp"
#include "runtime/config/elasticity_config.hpp"

namespace stretch::config {

// Free-form optimizer / scheduler parameter: DeepSpeed passes these through as keyword arguments.
// Integral JSON numbers are kept as int64, others as double; lists must hold numbers.
using ParamValue = std::variant<bool, std::int64_t, double, std::string, std::vector<double>>;
using Params = std::map<std::string, ParamValue, std::less<>>;

struct OptimizerConfig {
  std::string type;  // as written ("Adam", "AdamW", "SGD", ...); matched case-insensitively later
  Params params;
  bool legacyFusion = false;
  bool operator==(const OptimizerConfig&) const = default;
};

struct SchedulerConfig {
  std::string type;  // "WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "OneCycle", "LRRangeTest"
  Params params;
  bool operator==(const SchedulerConfig&) const = default;
};

struct Fp16Config {
  bool enabled = false;
  bool autoCast = false;
  double lossScale = 0.0;  // 0 = dynamic loss scaling, > 0 = static scale
  std::int64_t initialScalePower = 16;
  std::int64_t lossScaleWindow = 1000;
  std::int64_t hysteresis = 2;
  bool consecutiveHysteresis = false;
  double minLossScale = 1.0;
  bool dynamicLossScale() const noexcept { return lossScale == 0.0; }
  bool operator==(const Fp16Config&) const = default;
};

struct Bf16Config {
  bool enabled = false;  // key "bf16" (alias "bfloat16")
  bool immediateGradUpdate = false;
  bool checkGradOverflow = false;  // v0.18.2 default; DeepSpeed >= 0.19.3 defaults to true
  bool operator==(const Bf16Config&) const = default;
};

enum class OffloadDevice { None, Cpu, Nvme };

struct OffloadConfig {
  OffloadDevice device = OffloadDevice::None;
  std::optional<std::string> nvmePath;
  bool pinMemory = true;
  std::int64_t bufferCount = 4;
  bool operator==(const OffloadConfig&) const = default;
};

struct ZeroConfig {
  std::int64_t stage = 0;  // 0-3; JSON true/false mean stage 1/0 (older DeepSpeed form)
  bool contiguousGradients = true;
  bool reduceScatter = true;
  std::int64_t reduceBucketSize = 500'000'000;  // elements
  bool allgatherPartitions = true;
  std::int64_t allgatherBucketSize = 500'000'000;  // elements
  std::optional<bool> overlapComm;                 // unset means "stage == 3"
  bool loadFromFp32Weights = true;
  bool elasticCheckpoint = false;
  bool roundRobinGradients = false;
  bool ignoreUnusedParameters = true;
  std::optional<OffloadConfig> offloadOptimizer;
  bool overlapCommEffective() const noexcept { return overlapComm.value_or(stage == 3); }
  bool operator==(const ZeroConfig&) const = default;
};

enum class TagValidation { Ignore, Warn, Fail };

struct CheckpointConfig {
  TagValidation tagValidation = TagValidation::Warn;  // accepted case-insensitively
  bool loadUniversal = false;
  bool useNodeLocalStorage = false;
  bool parallelWritePipelineStage = false;  // "parallel_write": {"pipeline_stage": ...}
  bool operator==(const CheckpointConfig&) const = default;
};

struct CommsLoggerConfig {
  bool enabled = false;
  bool verbose = false;
  bool profAll = true;
  bool debug = false;
  std::vector<std::string> profOps;
  bool operator==(const CommsLoggerConfig&) const = default;
};

// "activation_checkpointing" (deepspeed.checkpointing.configure's keys). As in DeepSpeed, the
// section only configures checkpointing: a model that recomputes its activations reads it
// (examples/gpt does); the engine warns about the options it does not implement.
struct ActivationCheckpointingConfig {
  bool partitionActivations = false;
  bool contiguousMemoryOptimization = false;
  bool cpuCheckpointing = false;
  std::optional<std::int64_t> numberCheckpoints;
  bool synchronizeCheckpointBoundary = false;
  bool profile = false;
  bool operator==(const ActivationCheckpointingConfig&) const = default;
};

enum class GradientAllreduceOp { Mean, Sum };

struct DsConfig {
  BatchKeys batch;
  std::optional<OptimizerConfig> optimizer;
  std::optional<SchedulerConfig> scheduler;
  Fp16Config fp16;
  Bf16Config bf16;
  double gradientClipping = 0.0;  // v0.18.2 default (0 = off); DeepSpeed >= 0.19.3 uses 1.0
  bool prescaleGradients = false;
  double gradientPredivideFactor = 1.0;
  GradientAllreduceOp gradientAllreduceOp = GradientAllreduceOp::Mean;
  ZeroConfig zero;
  ElasticityConfig elasticity;
  CheckpointConfig checkpoint;
  std::optional<std::int64_t> stepsPerPrint;  // unset: no progress line (DeepSpeed >= 0.15.2)
  bool wallClockBreakdown = false;
  CommsLoggerConfig commsLogger;
  std::optional<ActivationCheckpointingConfig> activationCheckpointing;  // present: asked for

  bool operator==(const DsConfig&) const = default;
};

// A parsed config plus the warnings parsing produced (unknown or ignored keys).
struct ParsedConfig {
  DsConfig config;
  std::vector<std::string> warnings;
};

// Parses JSON text. source names the origin in messages ("ds_config.json", "<stdin>").
ParsedConfig parseConfig(std::string_view jsonText, std::string_view source = "<config>");

// Reads and parses a file. Throws IoError when it cannot be read.
ParsedConfig loadConfig(const std::filesystem::path& path);

// Serialises every field explicitly (defaults included) as pretty-printed JSON that parseConfig
// reads back to an equal DsConfig.
std::string toJson(const DsConfig& config);

// The elasticity section alone, every field explicit, as one line of JSON with sorted keys: the
// text `stretch launch` hands its workers, whose runtime compares it with its own
// (ensure_immutable_elastic_config).
std::string elasticityToJson(const ElasticityConfig& elasticity);

}  // namespace stretch::config
