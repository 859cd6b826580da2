#pragma once
// Training data for the engine: an in-memory TensorDataset and a DataLoader that yields this
// rank's micro batches in torch.utils.data.DistributedSampler's order (runtime/engine/sampler.hpp),
// epoch after epoch, and that can resume mid-epoch, at the same or another world size, so that a
// restarted job consumes every sample of the epoch exactly once.

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/types.h>

#include "runtime/engine/sampler.hpp"

namespace stretch::engine {

struct TensorDataset {
  torch::Tensor inputs;   // [N, ...]
  torch::Tensor targets;  // [N, ...]
  std::int64_t size() const { return inputs.size(0); }
};

struct Batch {
  torch::Tensor inputs;
  torch::Tensor targets;
  std::int64_t epoch = 0;
};

class DataLoader {
 public:
  // Throws ConfigError when the dataset is empty, inputs and targets disagree in length, or
  // microBatch < 1.
  DataLoader(TensorDataset data, std::int64_t microBatch, int rank, int worldSize,
             std::uint64_t seed = 0, bool shuffle = true, bool dropLast = false);

  // The next micro batch of this rank; at the end of an epoch the next one starts (the last
  // micro batch of an epoch may be smaller, as with PyTorch's DataLoader).
  Batch next();

  std::int64_t microBatch() const noexcept { return microBatch_; }
  std::int64_t epoch() const noexcept { return sampler_.epoch(); }
  // Micro batches of this rank in a whole epoch.
  std::int64_t batchesPerEpoch() const;
  // Where the loader stands: the epoch and the samples of it all ranks consumed together.
  SamplerState position() const noexcept { return sampler_.state(); }
  // Continues from `position`, possibly written by a job of another world size: every sample
  // of the epoch is still consumed exactly once (sampler.hpp).
  void setPosition(const SamplerState& position);
  // The same data split over `worldSize` ranks as `rank` with `microBatch` samples per call,
  // from `position` (live recovery: a new generation of another size). Throws like the
  // constructor.
  void reshard(int rank, int worldSize, std::int64_t microBatch, const SamplerState& position);

 private:
  void refill();

  TensorDataset data_;
  std::int64_t microBatch_;
  DistributedSampler sampler_;
  std::vector<std::int64_t> indices_;  // this rank's rest of the epoch, from the sampler
  std::size_t cursor_ = 0;
};

}  // namespace stretch::engine
