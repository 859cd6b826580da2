// The exact solver: count, for every batch B in the search range, the world sizes it supports,
// and take the best. Counting is a sieve: for each micro unit m and node count k, every multiple of
// k*m gains one valid size. Several micro units would double-count a size that works through two
// of them, so the sieve adds inclusion-exclusion terms, aggregated by their LCM (distinct LCMs are
// few even when the subsets of units are many).
//
// Only batches in (hi/2, hi] can be the largest maximiser: B and 2B are both <= hi when B <= hi/2,
// and 2B supports every size B does. With prefer_larger_batch the sieve therefore covers the top
// half of the range only; otherwise it covers all of it.

#include "runtime/elasticity/detail/exact_solver.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "runtime/common/check.hpp"
#include "runtime/common/error.hpp"
#include "runtime/common/int128.hpp"
#include "runtime/elasticity/solver.hpp"

namespace stretch::elasticity {

namespace {

// Most distinct inclusion-exclusion terms kept; far above what real micro-batch lists produce.
constexpr std::size_t kMaxTerms = 1u << 20;

// Inclusion-exclusion coefficients by LCM: for units M, sum over L of coef[L] * [k*L | B] equals
// [exists m in M: k*m | B]. Terms whose LCM exceeds `limit` can never divide a batch in range.
std::map<std::uint64_t, std::int64_t> inclusionExclusionTerms(
    const std::vector<std::uint64_t>& units, std::uint64_t limit) {
  std::map<std::uint64_t, std::int64_t> terms;
  for (std::uint64_t m : units) {
    std::map<std::uint64_t, std::int64_t> next = terms;
    next[m] += 1;
    for (const auto& [l, coef] : terms) {
      const std::uint64_t joined = lcmSaturating(l, m, limit);
      if (joined <= limit) {
        next[joined] -= coef;
      }
    }
    std::erase_if(next, [](const auto& kv) { return kv.second == 0; });
    if (next.size() > kMaxTerms) {
      throw ElasticityConfigError(ErrorDetail{
          "elasticity.micro_batch_sizes", fmt::format("({} entries)", units.size()),
          "a list whose combinations stay below a million distinct LCMs for the exact solver"});
    }
    terms = std::move(next);
  }
  return terms;
}

}  // namespace

BatchRange exactSearchRange(const config::ElasticityConfig& c) {
  if (!c.targetBatchSize) {
    return {1, c.maxTrainBatchSize};
  }
  const auto target = static_cast<long double>(*c.targetBatchSize);
  const long double tol = c.batchTolerance;
  constexpr long double kSlack = 1e-9L;
  const auto lo =
      static_cast<std::int64_t>(std::max<long double>(1, std::ceil(target * (1 - tol) - kSlack)));
  const auto hi = static_cast<std::int64_t>(std::floor(target * (1 + tol) + kSlack));
  return {lo, std::min(hi, c.maxTrainBatchSize)};
}

namespace detail {

BatchChoice solveExact(const config::ElasticityConfig& c) {
  const auto dpPerNode = static_cast<std::uint64_t>(dataParallelPerNode(c));
  const auto gpn = static_cast<std::uint64_t>(c.numGpusPerNode);
  const std::uint64_t nodeLo = (static_cast<std::uint64_t>(c.minGpus) + gpn - 1) / gpn;
  const std::uint64_t nodeHi = static_cast<std::uint64_t>(c.maxGpus) / gpn;
  if (nodeLo > nodeHi) {
    throw ElasticityConfigError(
        ErrorDetail{"elasticity.min_gpus/max_gpus", fmt::format("{}/{}", c.minGpus, c.maxGpus),
                    fmt::format("a range that holds a whole number of nodes of {} GPUs", gpn)});
  }
  const BatchRange band = exactSearchRange(c);
  if (band.lo > band.hi) {
    throw ElasticityConfigError(
        ErrorDetail{"elasticity.target_batch_size", std::to_string(*c.targetBatchSize),
                    fmt::format("a target whose band (batch_tolerance {}) reaches into [1, "
                                "max_train_batch_size {}]; the band is [{}, ...] here",
                                c.batchTolerance, c.maxTrainBatchSize, band.lo)});
  }
  const auto lo = static_cast<std::uint64_t>(band.lo);
  const auto hi = static_cast<std::uint64_t>(band.hi);

  // Micro units: a node count k is valid for B when k * dpPerNode * mb divides B.
  const MicroUnits units(c.microBatchSizes, dpPerNode, hi);
  const std::uint64_t start = c.preferLargerBatch ? std::max(lo, hi / 2 + 1) : lo;
  const std::uint64_t width = hi - start + 1;
  if (width > static_cast<std::uint64_t>(kMaxExactSearchWidth)) {
    throw ElasticityConfigError(ErrorDetail{
        "elasticity.max_train_batch_size", std::to_string(c.maxTrainBatchSize),
        fmt::format("a search range of at most {} batch sizes for the exact solver (this one "
                    "has {}); set target_batch_size and batch_tolerance to narrow it",
                    kMaxExactSearchWidth, width)});
  }

  std::vector<std::int32_t> counts(width, 0);
  if (!units.empty()) {
    const auto terms = inclusionExclusionTerms(units.minimal(), hi / nodeLo);
    for (const auto& [l, coef] : terms) {
      const std::uint64_t kMax = std::min(nodeHi, hi / l);
      const auto add = static_cast<std::int32_t>(coef);
      for (std::uint64_t k = nodeLo; k <= kMax; ++k) {
        const std::uint64_t step = k * l;
        for (std::uint64_t b = (start + step - 1) / step * step; b <= hi; b += step) {
          counts[b - start] += add;
        }
      }
    }
  }

  // Best count; ties to the larger batch (scan downwards) or the smaller one (scan upwards).
  std::int32_t best = 0;
  std::uint64_t bestIndex = 0;
  for (std::uint64_t i = 0; i < width; ++i) {
    const std::uint64_t idx = c.preferLargerBatch ? width - 1 - i : i;
    if (counts[idx] > best) {
      best = counts[idx];
      bestIndex = idx;
    }
  }
  if (best == 0) {
    throw ElasticityError(fmt::format(
        "no valid world size: no batch size in [{}, {}] splits into micro batches [{}] across a "
        "whole number of nodes in [{}, {}]",
        lo, hi, fmt::join(c.microBatchSizes, ", "), nodeLo, nodeHi));
  }

  const std::uint64_t batch = start + bestIndex;
  std::vector<std::int64_t> nodes = listValidSizes(batch, factorize(batch), units, nodeLo, nodeHi);
  // The sieve and the divisor enumeration are independent computations of the same set.
  STRETCH_CHECK_EQ(nodes.size(), static_cast<std::size_t>(best), "exact solver, batch {}", batch);

  for (std::int64_t& k : nodes) {
    k *= static_cast<std::int64_t>(dpPerNode);
  }
  return {static_cast<std::int64_t>(batch), std::move(nodes)};
}

}  // namespace detail
}  // namespace stretch::elasticity
