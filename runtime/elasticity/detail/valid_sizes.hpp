#pragma once
// Private to runtime/elasticity: counting and listing the valid world sizes of one batch.
//
// A world size g in [lo, hi] is valid for batch B when g * m divides B for some m in a set of
// "micro units" M (micro batches, times the data-parallel GPUs per node for node granularity).
// Only the divisibility-minimal elements of M matter (if m1 | m2, any g valid through m2 is valid
// through m1), so callers pass MicroUnits, which keeps that antichain with its factorisations.

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/config/elasticity_config.hpp"
#include "runtime/elasticity/number_theory.hpp"

namespace stretch::elasticity::detail {

class MicroUnits {
 public:
  // The units value * scale for each value >= 1 (any order, duplicates allowed), leaving out
  // those above limit (they can never divide a batch <= limit).
  MicroUnits(std::span<const std::int64_t> values, std::uint64_t scale, std::uint64_t limit);

  const std::vector<std::uint64_t>& minimal() const noexcept { return minimal_; }
  const std::vector<Factorization>& factorizations() const noexcept { return factors_; }
  bool empty() const noexcept { return minimal_.empty(); }

 private:
  std::vector<std::uint64_t> minimal_;  // ascending, pairwise non-dividing
  std::vector<Factorization> factors_;
};

// Number of valid g in [lo, hi] for batch (factorised as batchFactors).
std::uint64_t countValidSizes(std::uint64_t batch, const Factorization& batchFactors,
                              const MicroUnits& units, std::uint64_t lo, std::uint64_t hi);

// The valid g in [lo, hi], ascending.
std::vector<std::int64_t> listValidSizes(std::uint64_t batch, const Factorization& batchFactors,
                                         const MicroUnits& units, std::uint64_t lo,
                                         std::uint64_t hi);

// num_gpus_per_node / model_parallel_size: the data-parallel ranks one node holds, the step of
// the valid sizes for v0.2 and exact. Throws ElasticityError when the division is not exact.
std::int64_t dataParallelPerNode(const config::ElasticityConfig& config);

// The result of one solver run: the chosen batch and its valid sizes (in the units searched).
struct BatchChoice {
  std::int64_t batch = 0;
  std::vector<std::int64_t> valid;
};

}  // namespace stretch::elasticity::detail
