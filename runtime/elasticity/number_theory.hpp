#pragma once
// Integer helpers for the elasticity solver. Everything is exact 64-bit arithmetic; products that
// could overflow are computed in 128 bits and saturate.

#include <cstdint>
#include <span>
#include <vector>

namespace stretch::elasticity {

// The 38 smallest highly composite numbers, exactly DeepSpeed's HCN_LIST (OEIS A002182 up to
// 720720). DeepSpeed scales each base by the largest entry <= cap / base and saturates at 720720;
// Stretch keeps the list unchanged so that v0.1/v0.2 answers are identical.
std::span<const std::int64_t> highlyCompositeNumbers() noexcept;

// Largest entry of highlyCompositeNumbers() that is <= limit (limit >= 1).
std::int64_t largestHcnAtMost(std::int64_t limit) noexcept;

struct PrimePower {
  std::uint64_t prime;
  int exponent;
  bool operator==(const PrimePower&) const = default;
};
// Prime factorisation, primes ascending. factorize(1) is empty.
using Factorization = std::vector<PrimePower>;

// Trial division; n >= 1. Cost O(sqrt(largest-but-one prime factor)).
Factorization factorize(std::uint64_t n);

// Product of two factorisations (merge, adding exponents).
Factorization multiply(const Factorization& a, const Factorization& b);

// a / b as factorisations; b must divide a.
Factorization divide(const Factorization& a, const Factorization& b);

// Number of divisors of the number described by f.
std::uint64_t divisorCount(const Factorization& f) noexcept;

// Calls visit(d) for every divisor d of the number described by f with lo <= d <= hi, in no
// particular order. Prunes branches above hi, so the cost is bounded by the divisors <= hi.
template <typename Visit>
void forEachDivisorInRange(const Factorization& f, std::uint64_t lo, std::uint64_t hi,
                           Visit&& visit);

// Least common multiple, saturating at `saturate` (any result > saturate is returned as
// saturate + 1). Inputs >= 1.
std::uint64_t lcmSaturating(std::uint64_t a, std::uint64_t b, std::uint64_t saturate) noexcept;

// ---- implementation of the template ----

namespace detail {
template <typename Visit>
void divisorsRec(const Factorization& f, std::size_t i, std::uint64_t d, std::uint64_t lo,
                 std::uint64_t hi, Visit& visit) {
  if (i == f.size()) {
    if (d >= lo) {
      visit(d);
    }
    return;
  }
  const std::uint64_t p = f[i].prime;
  for (int e = 0;; ++e) {
    divisorsRec(f, i + 1, d, lo, hi, visit);
    if (e == f[i].exponent || d > hi / p) {
      return;
    }
    d *= p;
  }
}
}  // namespace detail

template <typename Visit>
void forEachDivisorInRange(const Factorization& f, std::uint64_t lo, std::uint64_t hi,
                           Visit&& visit) {
  if (lo > hi || hi == 0) {
    return;
  }
  detail::divisorsRec(f, 0, 1, lo, hi, visit);
}

}  // namespace stretch::elasticity
