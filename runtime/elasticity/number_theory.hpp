#pragma once
// Integer helpers for the elasticity solver. Everything is exact 64-bit arithmetic; products that
// could overflow are computed in 128 bits and saturate.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/common/int128.hpp"

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
// Prime factorisation, primes ascending; factorize(1) is empty. Held inline (no heap): a 64-bit
// number has at most 15 distinct prime factors (2*3*...*47 < 2^64 < 2*3*...*53).
class Factorization {
 public:
  static constexpr std::size_t kMaxPrimes = 15;

  void push_back(PrimePower p) noexcept { items_[size_++] = p; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  const PrimePower& operator[](std::size_t i) const noexcept { return items_[i]; }
  const PrimePower* begin() const noexcept { return items_.data(); }
  const PrimePower* end() const noexcept { return items_.data() + size_; }
  bool operator==(const Factorization& other) const noexcept {
    return std::equal(begin(), end(), other.begin(), other.end());
  }

 private:
  std::array<PrimePower, kMaxPrimes> items_{};
  std::uint8_t size_ = 0;
};

// Trial division; n >= 1. Cost O(sqrt(largest-but-one prime factor)).
Factorization factorize(std::uint64_t n);

// Product of two factorisations (merge, adding exponents).
Factorization multiply(const Factorization& a, const Factorization& b);

// a / b as factorisations; b must divide a.
Factorization divide(const Factorization& a, const Factorization& b);

// Least common multiple as factorisations (max exponent per prime).
Factorization lcmOf(const Factorization& a, const Factorization& b);

// The factorisation of a highly composite number from highlyCompositeNumbers() (precomputed).
const Factorization& hcnFactorization(std::int64_t hcn);

// Number of divisors of the number described by f.
std::uint64_t divisorCount(const Factorization& f) noexcept;

// Number of divisors d of n (factorised as f) with lo <= d <= hi, without listing them: by meet
// in the middle (about sqrt(d(n)) work) when n has many divisors, else by walking the range or its
// complement, whichever is shorter.
std::uint64_t countDivisorsInRange(std::uint64_t n, const Factorization& f, std::uint64_t lo,
                                   std::uint64_t hi);

// Calls visit(d) for every divisor d of the number described by f with lo <= d <= hi, in no
// particular order. Prunes branches above hi, so the cost is bounded by the divisors <= hi.
template <typename Visit>
void forEachDivisorInRange(const Factorization& f, std::uint64_t lo, std::uint64_t hi,
                           Visit&& visit);

// The divisors d of the number described by f with lo <= d <= hi, ascending. Built by merging
// sorted lists prime by prime (no sort), pruned above hi.
std::vector<std::uint64_t> sortedDivisorsInRange(const Factorization& f, std::uint64_t lo,
                                                 std::uint64_t hi);

// Least common multiple, saturating at `saturate` (any result > saturate is returned as
// saturate + 1). Inputs >= 1.
std::uint64_t lcmSaturating(std::uint64_t a, std::uint64_t b, std::uint64_t saturate) noexcept;

// ---- implementation of the template ----

namespace detail {
// Visits d (when >= lo), then every divisor d * q with q built from primes f[i..]. Each divisor is
// reached by exactly one call; primes ascend, so the first prime that overshoots ends the loop.
template <typename Visit>
void divisorsRec(const Factorization& f, std::size_t i, std::uint64_t d, std::uint64_t lo,
                 std::uint64_t hi, Visit& visit) {
  if (d >= lo) {
    visit(d);
  }
  for (std::size_t j = i; j < f.size(); ++j) {
    const std::uint64_t p = f[j].prime;
    // Products compared in 128 bits: a multiply is far cheaper than the division hi / p.
    if (static_cast<UInt128>(d) * p > hi) {
      return;
    }
    std::uint64_t q = d;
    for (int e = 1; e <= f[j].exponent && static_cast<UInt128>(q) * p <= hi; ++e) {
      q *= p;
      divisorsRec(f, j + 1, q, lo, hi, visit);
    }
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
