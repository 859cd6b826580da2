#pragma once
// torch.utils.data.DistributedSampler (torch 1.13) with mid-epoch resume at any world size.
//
// PyTorch's order (reproduced exactly, index for index):
//   P      = randperm(n, Generator().manual_seed(seed + epoch))   (shuffle; else 0, 1, ..., n-1)
//   padded = P followed by P repeated cyclically up to total_size (dropLast = false), or
//            P[0, total_size) (dropLast = true)
//   rank r = padded[r :: numReplicas]
// with num_samples = ceil(n / R) (dropLast: floor(n / R)) and total_size = num_samples * R.
// LibTorch's CPU generator seeded with seed + epoch gives the same randperm as Python's.
//
// Resume. The epoch's global order is the sequence G = P, P, P, ... (P cycled), which does not
// depend on the world size; PyTorch's `padded` is G[0, total_size) (dropLast: P[0, total_size)).
// The ranks consume G in rank-interleaved steps: after each rank has taken k samples the job has
// consumed exactly G[0, k * R). A position `consumed` (samples of the epoch consumed by all ranks
// together, a count of G's prefix; it need not be a multiple of R) therefore says which samples
// are done, whatever world wrote it. From position C, a sampler of R' ranks splits the rest of
// the epoch with PyTorch's rule applied to the rest:
//   m    = max(0, n - C)                         real samples left
//   rest = G[C, C + ceil(m / R') * R')           dropLast = false (pads cyclically, as PyTorch)
//          P[C, C + floor(m / R') * R')          dropLast = true  (truncates, as PyTorch)
//   rank r gets rest[r :: R']
// Guarantees, for any C >= 0 and any R, R' (the samples consumed before the resume being G[0, C)):
//   - dropLast = false: the concatenation G[0, C) + rest is G[0, K) with K >= n, so every index
//     of the epoch is consumed at least once, the first n consumed positions are each index
//     exactly once, and the extra positions (padding) are fewer than R' when C < n (when
//     C >= n the old world had finished the epoch and nothing is left);
//   - dropLast = true: every index is consumed at most once; the ones never consumed are the
//     last (n - C) mod R' of P, fewer than R' (none are left when C >= n);
//   - C = 0 is PyTorch's split at R'; R' = R with C a multiple of R gives exactly the rest of
//     PyTorch's split at R (rank r's list from position C / R on).
// What differs from PyTorch: only the split of the rest after a resume at another world size
// (PyTorch has no resume): which rank sees which of the remaining samples, how many padding
// duplicates there are, and with dropLast which tail of P is dropped ((n - C) mod R' samples
// rather than PyTorch's n mod R).

#include <cstdint>
#include <vector>

namespace stretch::engine {

// Where a sampler stands, for checkpoints.
struct SamplerState {
  std::int64_t epoch = 0;
  std::int64_t consumed = 0;  // samples of this epoch consumed by all ranks together (G's prefix)
  friend bool operator==(const SamplerState&, const SamplerState&) = default;
};

class DistributedSampler {
 public:
  // Throws ConfigError naming the argument when datasetSize < 0, numReplicas < 1 or rank is
  // outside [0, numReplicas - 1] (PyTorch: "Invalid rank 4, rank should be in the interval
  // [0, 3]"). An empty dataset is allowed, as in PyTorch: every epoch is empty.
  DistributedSampler(std::int64_t datasetSize, std::int64_t numReplicas, std::int64_t rank,
                     bool shuffle = true, std::uint64_t seed = 0, bool dropLast = false);

  // PyTorch's set_epoch; also rewinds to the start of the epoch (consumed = 0).
  // Throws ConfigError for a negative epoch.
  void setEpoch(std::int64_t epoch);
  // Continues the current epoch after `consumed` samples (see the header comment); any value
  // >= datasetSize() leaves nothing in the epoch. Throws ConfigError when negative.
  void setPosition(std::int64_t consumed);
  SamplerState state() const noexcept { return {epoch_, consumed_}; }
  // setEpoch(state.epoch) then setPosition(state.consumed).
  void loadState(const SamplerState& state);

  // This rank's indices for the rest of the current epoch, in order. At position 0 this is
  // exactly list(torch DistributedSampler) after set_epoch(epoch).
  std::vector<std::int64_t> indices() const;
  // The epoch's order P (randperm(n) seeded with seed + epoch, or 0..n-1 without shuffle).
  std::vector<std::int64_t> epochPermutation() const;

  // PyTorch's len(sampler) and total_size: per-rank and all-rank samples of a whole epoch.
  std::int64_t numSamples() const noexcept { return numSamples_; }
  std::int64_t totalSize() const noexcept { return numSamples_ * numReplicas_; }
  // Per-rank samples left in the current epoch from the current position (indices().size()).
  std::int64_t remainingSamples() const noexcept;

  std::int64_t datasetSize() const noexcept { return datasetSize_; }
  std::int64_t numReplicas() const noexcept { return numReplicas_; }
  std::int64_t rank() const noexcept { return rank_; }
  std::int64_t epoch() const noexcept { return epoch_; }
  std::int64_t consumed() const noexcept { return consumed_; }
  bool shuffle() const noexcept { return shuffle_; }
  bool dropLast() const noexcept { return dropLast_; }
  std::uint64_t seed() const noexcept { return seed_; }

 private:
  std::int64_t datasetSize_;
  std::int64_t numReplicas_;
  std::int64_t rank_;
  bool shuffle_;
  std::uint64_t seed_;
  bool dropLast_;
  std::int64_t numSamples_;
  std::int64_t epoch_ = 0;
  std::int64_t consumed_ = 0;
};

}  // namespace stretch::engine
