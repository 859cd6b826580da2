#include "runtime/engine/data.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <torch/torch.h>

#include "runtime/common/error.hpp"

namespace stretch::engine {

DataLoader::DataLoader(TensorDataset data, std::int64_t microBatch, int rank, int worldSize,
                       std::uint64_t seed, bool shuffle, bool dropLast)
    : data_(std::move(data)),
      microBatch_(microBatch),
      sampler_(data_.inputs.defined() ? data_.inputs.size(0) : 0, worldSize, rank, shuffle, seed,
               dropLast) {
  if (!data_.inputs.defined() || !data_.targets.defined() || data_.inputs.dim() == 0 ||
      data_.size() == 0) {
    throw ConfigError("training data: the dataset is empty (expected at least one sample)");
  }
  if (data_.targets.dim() == 0 || data_.targets.size(0) != data_.size()) {
    throw ConfigError(
        ErrorDetail{"training data targets",
                    fmt::format("{} rows", data_.targets.dim() == 0 ? 0 : data_.targets.size(0)),
                    fmt::format("as many rows as the inputs ({})", data_.size())});
  }
  if (microBatch < 1) {
    throw ConfigError(ErrorDetail{"train_micro_batch_size_per_gpu", std::to_string(microBatch),
                                  "a positive integer"});
  }
  refill();
}

void DataLoader::refill() {
  indices_ = sampler_.indices();
  cursor_ = 0;
}

std::int64_t DataLoader::batchesPerEpoch() const {
  return (sampler_.numSamples() + microBatch_ - 1) / microBatch_;
}

void DataLoader::setPosition(const SamplerState& position) {
  sampler_.loadState(position);
  refill();
}

void DataLoader::reshard(int rank, int worldSize, std::int64_t microBatch,
                         const SamplerState& position) {
  if (microBatch < 1) {
    throw ConfigError(ErrorDetail{"train_micro_batch_size_per_gpu", std::to_string(microBatch),
                                  "a positive integer"});
  }
  sampler_ = DistributedSampler(data_.size(), worldSize, rank, sampler_.shuffle(), sampler_.seed(),
                                sampler_.dropLast());
  microBatch_ = microBatch;
  setPosition(position);
}

Batch DataLoader::next() {
  if (cursor_ >= indices_.size()) {
    sampler_.setEpoch(sampler_.epoch() + 1);
    refill();
    if (indices_.empty())
      throw ConfigError(
          "training data: this rank's share of an epoch is empty (drop_last with "
          "fewer samples than ranks)");
  }
  const auto take =
      std::min<std::size_t>(static_cast<std::size_t>(microBatch_), indices_.size() - cursor_);
  auto index =
      torch::from_blob(indices_.data() + cursor_, {static_cast<std::int64_t>(take)}, torch::kInt64)
          .clone();
  cursor_ += take;
  // Every rank takes the same number of samples per call, so the job consumed take * R more.
  Batch batch{data_.inputs.index_select(0, index), data_.targets.index_select(0, index),
              sampler_.epoch()};
  sampler_.setPosition(sampler_.consumed() +
                       static_cast<std::int64_t>(take) * sampler_.numReplicas());
  // setPosition recomputes the rest; keep our cursor on the list we are walking.
  return batch;
}

}  // namespace stretch::engine
