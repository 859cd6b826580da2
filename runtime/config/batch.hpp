#pragma once
// The batch triple: train_batch_size = micro_batch_per_gpu * gradient_accumulation_steps *
// data-parallel world size, with DeepSpeed's inference rules for the keys that are missing
// (DeepSpeedConfig._set_batch_related_parameters and _batch_assertion).

#include <cstdint>
#include <optional>

namespace stretch::config {

// The batch keys as written in the config; absent keys are nullopt.
struct BatchKeys {
  std::optional<std::int64_t> trainBatchSize;        // train_batch_size
  std::optional<std::int64_t> microBatchPerGpu;      // train_micro_batch_size_per_gpu
  std::optional<std::int64_t> gradientAccumulation;  // gradient_accumulation_steps

  bool anySet() const noexcept {
    return trainBatchSize || microBatchPerGpu || gradientAccumulation;
  }
  bool operator==(const BatchKeys&) const = default;
};

struct BatchTriple {
  std::int64_t trainBatchSize = 0;
  std::int64_t microBatchPerGpu = 0;
  std::int64_t gradientAccumulation = 0;
  bool operator==(const BatchTriple&) const = default;
};

// Infers the missing keys for a data-parallel world of dpWorldSize ranks and checks the triple.
// Throws ConfigError naming the key, its (possibly inferred) value and the rule it breaks.
BatchTriple resolveBatch(const BatchKeys& keys, std::int64_t dpWorldSize);

}  // namespace stretch::config
