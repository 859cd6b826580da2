#include "runtime/elasticity/detail/valid_sizes.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "runtime/common/error.hpp"
#include "runtime/common/int128.hpp"

namespace stretch::elasticity::detail {

std::int64_t dataParallelPerNode(const config::ElasticityConfig& c) {
  if (c.numGpusPerNode % c.modelParallelSize != 0) {
    // DeepSpeed's v0.2 wording.
    throw ElasticityError(fmt::format(
        "In Elasticity v{}, number of GPUs per node:{} should be divisible by model parallel "
        "size {}",
        config::toString(c.version), c.numGpusPerNode, c.modelParallelSize));
  }
  return c.numGpusPerNode / c.modelParallelSize;
}

MicroUnits::MicroUnits(std::span<const std::int64_t> values, std::uint64_t scale,
                       std::uint64_t limit) {
  thread_local std::vector<std::uint64_t> sorted;  // scratch, reused across calls
  sorted.clear();
  for (std::int64_t v : values) {
    const auto unit = static_cast<UInt128>(v) * scale;
    if (unit <= limit) {
      sorted.push_back(static_cast<std::uint64_t>(unit));
    }
  }
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  for (std::uint64_t v : sorted) {
    const bool redundant =
        std::any_of(minimal_.begin(), minimal_.end(), [v](std::uint64_t m) { return v % m == 0; });
    if (!redundant) {
      minimal_.push_back(v);
      factors_.push_back(factorize(v));
    }
  }
}

namespace {

// The units that divide the batch (only they can make a size valid): how many, and the first.
struct Dividing {
  std::size_t count = 0;
  std::size_t first = 0;
};

Dividing dividingUnits(std::uint64_t batch, const MicroUnits& units) {
  Dividing out;
  for (std::size_t i = units.minimal().size(); i-- > 0;) {
    if (batch % units.minimal()[i] == 0) {
      ++out.count;
      out.first = i;
    }
  }
  return out;
}

// Several dividing units: a divisor d of the batch is valid when batch / d is divisible by one.
bool validThroughAny(std::uint64_t batch, std::uint64_t d, const MicroUnits& units,
                     std::size_t first) {
  const std::uint64_t rest = batch / d;
  const std::vector<std::uint64_t>& m = units.minimal();
  return std::any_of(m.begin() + static_cast<std::ptrdiff_t>(first), m.end(),
                     [rest](std::uint64_t unit) { return rest % unit == 0; });
}

}  // namespace

std::uint64_t countValidSizes(std::uint64_t batch, const Factorization& batchFactors,
                              const MicroUnits& units, std::uint64_t lo, std::uint64_t hi) {
  const Dividing dividing = dividingUnits(batch, units);
  if (dividing.count == 0) {
    return 0;
  }
  if (dividing.count == 1) {
    // The common case (micro batches [2,4,6,8] reduce to [2]): divisors of batch / m, counted
    // without listing them.
    const std::size_t i = dividing.first;
    return countDivisorsInRange(batch / units.minimal()[i],
                                divide(batchFactors, units.factorizations()[i]), lo, hi);
  }
  std::uint64_t count = 0;
  forEachDivisorInRange(batchFactors, lo, hi, [&](std::uint64_t d) {
    count += validThroughAny(batch, d, units, dividing.first) ? 1 : 0;
  });
  return count;
}

std::vector<std::int64_t> listValidSizes(std::uint64_t batch, const Factorization& batchFactors,
                                         const MicroUnits& units, std::uint64_t lo,
                                         std::uint64_t hi) {
  const Dividing dividing = dividingUnits(batch, units);
  std::vector<std::int64_t> out;
  if (dividing.count == 0) {
    return out;
  }
  const bool single = dividing.count == 1;
  const std::vector<std::uint64_t> divisors =
      single ? sortedDivisorsInRange(divide(batchFactors, units.factorizations()[dividing.first]),
                                     lo, hi)
             : sortedDivisorsInRange(batchFactors, lo, hi);
  out.reserve(divisors.size());
  for (std::uint64_t d : divisors) {
    if (single || validThroughAny(batch, d, units, dividing.first)) {
      out.push_back(static_cast<std::int64_t>(d));
    }
  }
  return out;
}

}  // namespace stretch::elasticity::detail
