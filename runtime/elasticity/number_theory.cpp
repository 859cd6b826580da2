#include "runtime/elasticity/number_theory.hpp"

#include <algorithm>
#include <array>
#include <numeric>

#include "runtime/common/int128.hpp"

namespace stretch::elasticity {

namespace {
constexpr std::array<std::int64_t, 38> kHcn = {
    1,      2,      4,      6,      12,     24,     36,     48,    60,    120,
    180,    240,    360,    720,    840,    1260,   1680,   2520,  5040,  7560,
    10080,  15120,  20160,  25200,  27720,  45360,  50400,  55440, 83160, 110880,
    166320, 221760, 277200, 332640, 498960, 554400, 665280, 720720};
}  // namespace

std::span<const std::int64_t> highlyCompositeNumbers() noexcept {
  return kHcn;
}

std::int64_t largestHcnAtMost(std::int64_t limit) noexcept {
  // upper_bound gives the first entry > limit; the one before it is the answer. limit >= 1, so
  // there is always one (DeepSpeed's argmax trick saturates at the last entry the same way).
  auto it = std::upper_bound(kHcn.begin(), kHcn.end(), limit);
  return *(it - 1);
}

Factorization factorize(std::uint64_t n) {
  Factorization out;
  auto take = [&](std::uint64_t p) {
    if (n % p == 0) {
      int e = 0;
      do {
        n /= p;
        ++e;
      } while (n % p == 0);
      out.push_back({p, e});
    }
  };
  take(2);
  take(3);
  // Wheel over 6k +- 1.
  for (std::uint64_t p = 5; p <= n / p; p += 6) {
    take(p);
    take(p + 2);
  }
  if (n > 1) {
    out.push_back({n, 1});
  }
  return out;
}

Factorization multiply(const Factorization& a, const Factorization& b) {
  Factorization out;
  out.reserve(a.size() + b.size());
  std::size_t i = 0;
  std::size_t j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a[i].prime < b[j].prime)) {
      out.push_back(a[i++]);
    } else if (i == a.size() || b[j].prime < a[i].prime) {
      out.push_back(b[j++]);
    } else {
      out.push_back({a[i].prime, a[i].exponent + b[j].exponent});
      ++i;
      ++j;
    }
  }
  return out;
}

Factorization divide(const Factorization& a, const Factorization& b) {
  Factorization out;
  out.reserve(a.size());
  std::size_t j = 0;
  for (const PrimePower& pp : a) {
    int e = pp.exponent;
    if (j < b.size() && b[j].prime == pp.prime) {
      e -= b[j].exponent;
      ++j;
    }
    if (e > 0) {
      out.push_back({pp.prime, e});
    }
  }
  return out;
}

std::uint64_t divisorCount(const Factorization& f) noexcept {
  std::uint64_t count = 1;
  for (const PrimePower& pp : f) {
    count *= static_cast<std::uint64_t>(pp.exponent + 1);
  }
  return count;
}

std::uint64_t lcmSaturating(std::uint64_t a, std::uint64_t b, std::uint64_t saturate) noexcept {
  const UInt128 l = static_cast<UInt128>(a / std::gcd(a, b)) * static_cast<UInt128>(b);
  return l > saturate ? saturate + 1 : static_cast<std::uint64_t>(l);
}

}  // namespace stretch::elasticity
