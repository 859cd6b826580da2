#include "runtime/engine/sampler.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/randperm.h>
#include <algorithm>
#include <numeric>
#include <string>

#include "runtime/common/error.hpp"

namespace stretch::engine {

namespace {

[[noreturn]] void badArgument(const std::string& name, std::int64_t value,
                              const std::string& expected) {
  throw ConfigError(ErrorDetail{"DistributedSampler." + name, std::to_string(value), expected});
}

}  // namespace

DistributedSampler::DistributedSampler(std::int64_t datasetSize, std::int64_t numReplicas,
                                       std::int64_t rank, bool shuffle, std::uint64_t seed,
                                       bool dropLast)
    : datasetSize_(datasetSize),
      numReplicas_(numReplicas),
      rank_(rank),
      shuffle_(shuffle),
      seed_(seed),
      dropLast_(dropLast) {
  if (datasetSize < 0) {
    badArgument("dataset_size", datasetSize, "a non-negative integer");
  }
  if (numReplicas < 1) {
    badArgument("num_replicas", numReplicas, "a positive integer");
  }
  if (rank < 0 || rank >= numReplicas) {
    // PyTorch: ValueError("Invalid rank 4, rank should be in the interval [0, 3]").
    badArgument("rank", rank,
                "an integer in the interval [0, " + std::to_string(numReplicas - 1) +
                    "] (num_replicas = " + std::to_string(numReplicas) + ")");
  }
  // PyTorch: drop_last and n % R != 0 -> ceil((n - R) / R) == floor(n / R); else ceil(n / R).
  numSamples_ = datasetSize / numReplicas;
  if (!dropLast && datasetSize % numReplicas != 0) {
    ++numSamples_;
  }
}

void DistributedSampler::setEpoch(std::int64_t epoch) {
  if (epoch < 0) {
    badArgument("epoch", epoch, "a non-negative integer");
  }
  epoch_ = epoch;
  consumed_ = 0;
}

void DistributedSampler::setPosition(std::int64_t consumed) {
  if (consumed < 0) {
    badArgument("consumed", consumed,
                "a non-negative number of samples consumed in epoch " + std::to_string(epoch_));
  }
  consumed_ = consumed;
}

void DistributedSampler::loadState(const SamplerState& state) {
  setEpoch(state.epoch);
  setPosition(state.consumed);
}

std::int64_t DistributedSampler::remainingSamples() const noexcept {
  const std::int64_t left = consumed_ >= datasetSize_ ? 0 : datasetSize_ - consumed_;
  // Per rank: floor(left / R) with dropLast (truncate), ceil(left / R) otherwise (pad).
  std::int64_t perRank = left / numReplicas_;
  if (!dropLast_ && left % numReplicas_ != 0) {
    ++perRank;
  }
  return perRank;
}

std::vector<std::int64_t> DistributedSampler::epochPermutation() const {
  std::vector<std::int64_t> order(static_cast<std::size_t>(datasetSize_));
  if (!shuffle_) {
    std::iota(order.begin(), order.end(), std::int64_t{0});
    return order;
  }
  // Python: g = torch.Generator(); g.manual_seed(seed + epoch); torch.randperm(n, generator=g).
  // manual_seed takes the seed modulo 2^64, as the unsigned sum here does.
  at::Generator generator =
      at::detail::createCPUGenerator(seed_ + static_cast<std::uint64_t>(epoch_));
  const at::Tensor perm = at::randperm(datasetSize_, generator, at::TensorOptions(at::kLong));
  const std::int64_t* data = perm.data_ptr<std::int64_t>();
  std::copy(data, data + datasetSize_, order.begin());
  return order;
}

std::vector<std::int64_t> DistributedSampler::indices() const {
  const std::int64_t count = remainingSamples();
  std::vector<std::int64_t> out;
  if (count == 0) {
    return out;
  }
  const std::vector<std::int64_t> order = epochPermutation();
  out.reserve(static_cast<std::size_t>(count));
  // Position consumed_ + rank + i * R of the cyclic global order G (here consumed_ < n, so no
  // position overflows: the last one is below n + R).
  std::int64_t position = consumed_ + rank_;
  for (std::int64_t i = 0; i < count; ++i, position += numReplicas_) {
    out.push_back(order[static_cast<std::size_t>(position % datasetSize_)]);
  }
  return out;
}

}  // namespace stretch::engine
