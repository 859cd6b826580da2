#include "runtime/elasticity/detail/valid_sizes.hpp"

#include <algorithm>

namespace stretch::elasticity::detail {

MicroUnits::MicroUnits(const std::vector<std::uint64_t>& values) {
  std::vector<std::uint64_t> sorted = values;
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

// Visits every valid g in [lo, hi] exactly once.
template <typename Visit>
void visitValidSizes(std::uint64_t batch, const Factorization& batchFactors,
                     const MicroUnits& units, std::uint64_t lo, std::uint64_t hi, Visit&& visit) {
  // Units that divide the batch; others can never make a size valid.
  std::size_t first = units.minimal().size();
  std::size_t dividing = 0;
  for (std::size_t i = 0; i < units.minimal().size(); ++i) {
    if (batch % units.minimal()[i] == 0) {
      if (dividing == 0) {
        first = i;
      }
      ++dividing;
    }
  }
  if (dividing == 0) {
    return;
  }
  if (dividing == 1) {
    // The common case (e.g. micro batches [2,4,6,8] reduce to [2]): divisors of batch / m.
    const Factorization quotient = divide(batchFactors, units.factorizations()[first]);
    forEachDivisorInRange(quotient, lo, hi, visit);
    return;
  }
  // Several units: a divisor d of the batch is valid when (batch / d) is divisible by one of them.
  const std::vector<std::uint64_t>& m = units.minimal();
  forEachDivisorInRange(batchFactors, lo, hi, [&](std::uint64_t d) {
    const std::uint64_t rest = batch / d;
    for (std::size_t i = first; i < m.size(); ++i) {
      if (rest % m[i] == 0) {
        visit(d);
        return;
      }
    }
  });
}

}  // namespace

std::uint64_t countValidSizes(std::uint64_t batch, const Factorization& batchFactors,
                              const MicroUnits& units, std::uint64_t lo, std::uint64_t hi) {
  std::uint64_t count = 0;
  visitValidSizes(batch, batchFactors, units, lo, hi, [&count](std::uint64_t) { ++count; });
  return count;
}

std::vector<std::uint64_t> listValidSizes(std::uint64_t batch, const Factorization& batchFactors,
                                          const MicroUnits& units, std::uint64_t lo,
                                          std::uint64_t hi) {
  std::vector<std::uint64_t> out;
  visitValidSizes(batch, batchFactors, units, lo, hi,
                  [&out](std::uint64_t g) { out.push_back(g); });
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace stretch::elasticity::detail
