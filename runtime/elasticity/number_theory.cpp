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

namespace {
// Merges two factorisations prime by prime; combine(ea, eb) gives the exponent of a shared prime.
template <typename Combine>
Factorization mergeFactorizations(const Factorization& a, const Factorization& b, Combine combine) {
  Factorization out;
  std::size_t i = 0;
  std::size_t j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a[i].prime < b[j].prime)) {
      out.push_back(a[i++]);
    } else if (i == a.size() || b[j].prime < a[i].prime) {
      out.push_back(b[j++]);
    } else {
      out.push_back({a[i].prime, combine(a[i].exponent, b[j].exponent)});
      ++i;
      ++j;
    }
  }
  return out;
}
}  // namespace

Factorization multiply(const Factorization& a, const Factorization& b) {
  return mergeFactorizations(a, b, [](int x, int y) { return x + y; });
}

Factorization lcmOf(const Factorization& a, const Factorization& b) {
  return mergeFactorizations(a, b, [](int x, int y) { return std::max(x, y); });
}

const Factorization& hcnFactorization(std::int64_t hcn) {
  static const std::array<Factorization, kHcn.size()> kFactors = [] {
    std::array<Factorization, kHcn.size()> out;
    for (std::size_t i = 0; i < kHcn.size(); ++i) {
      out[i] = factorize(static_cast<std::uint64_t>(kHcn[i]));
    }
    return out;
  }();
  const auto it = std::lower_bound(kHcn.begin(), kHcn.end(), hcn);
  return kFactors[static_cast<std::size_t>(it - kHcn.begin())];
}

Factorization divide(const Factorization& a, const Factorization& b) {
  Factorization out;
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

namespace {

// Number of divisors of n (factorised as f) that are <= x, by meet in the middle: split the primes
// into two groups whose divisor counts are each about sqrt(d(n)), list both groups' divisors <= x
// sorted, and count the pairs a * b <= x with two pointers. O(sqrt(d(n)) log) instead of O(d(n)).
std::uint64_t countDivisorsAtMost(std::uint64_t n, const Factorization& f, std::uint64_t x) {
  if (x == 0) {
    return 0;
  }
  if (x >= n) {
    return divisorCount(f);
  }
  if (static_cast<UInt128>(x) * x > n) {
    // d > x exactly when its cofactor n/d is <= (n-1)/x, which is below sqrt(n): count those.
    return divisorCount(f) - countDivisorsAtMost(n, f, (n - 1) / x);
  }
  // Greedy balance: each prime power goes to the group with fewer divisors so far.
  Factorization left;
  Factorization right;
  std::uint64_t leftCount = 1;
  std::uint64_t rightCount = 1;
  for (const PrimePower& pp : f) {
    const auto choices = static_cast<std::uint64_t>(pp.exponent + 1);
    if (leftCount <= rightCount) {
      left.push_back(pp);
      leftCount *= choices;
    } else {
      right.push_back(pp);
      rightCount *= choices;
    }
  }
  // Scratch lists reused across calls on this thread: no allocation in the steady state.
  thread_local std::vector<std::uint64_t> a;
  thread_local std::vector<std::uint64_t> b;
  a.clear();
  b.clear();
  forEachDivisorInRange(left, 1, x, [](std::uint64_t d) { a.push_back(d); });
  forEachDivisorInRange(right, 1, x, [](std::uint64_t d) { b.push_back(d); });
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  std::uint64_t count = 0;
  std::size_t j = b.size();
  for (std::uint64_t d : a) {
    while (j > 0 && static_cast<UInt128>(d) * b[j - 1] > x) {
      --j;
    }
    if (j == 0) {
      break;
    }
    count += j;
  }
  return count;
}

// Below this many divisors, walking them is cheaper than splitting.
constexpr std::uint64_t kMeetInTheMiddleFrom = 48;

}  // namespace

std::uint64_t countDivisorsInRange(std::uint64_t n, const Factorization& f, std::uint64_t lo,
                                   std::uint64_t hi) {
  lo = std::max<std::uint64_t>(lo, 1);
  hi = std::min(hi, n);
  if (lo > hi) {
    return 0;
  }
  if (divisorCount(f) >= kMeetInTheMiddleFrom) {
    return countDivisorsAtMost(n, f, hi) - countDivisorsAtMost(n, f, lo - 1);
  }
  // Few divisors: walk the range or its complement - the divisors below lo and the cofactors n/d
  // of those above hi (d > hi exactly when e = n/d satisfies e * hi < n, i.e. e <= (n-1)/hi).
  const std::uint64_t cofactorLimit = (n - 1) / hi;
  std::uint64_t count = 0;
  if (hi - lo <= (lo - 1) + cofactorLimit) {
    forEachDivisorInRange(f, lo, hi, [&count](std::uint64_t) { ++count; });
    return count;
  }
  std::uint64_t excluded = 0;
  forEachDivisorInRange(f, 1, lo - 1, [&excluded](std::uint64_t) { ++excluded; });
  forEachDivisorInRange(f, 1, cofactorLimit, [&excluded](std::uint64_t) { ++excluded; });
  return divisorCount(f) - excluded;
}

std::vector<std::uint64_t> sortedDivisorsInRange(const Factorization& f, std::uint64_t lo,
                                                 std::uint64_t hi) {
  std::vector<std::uint64_t> out;
  if (lo > hi || hi == 0) {
    return out;
  }
  const std::uint64_t bound = std::min<std::uint64_t>(divisorCount(f), hi);
  out.reserve(bound);
  out.push_back(1);
  // Scratch reused across calls on this thread: the previous block times p, and the merge target.
  thread_local std::vector<std::uint64_t> power;
  thread_local std::vector<std::uint64_t> merged;
  for (const PrimePower& pp : f) {
    // out holds the divisors <= hi of the primes so far; fold in p, p^2, ... one merge each.
    power.assign(out.begin(), out.end());
    const std::uint64_t limit = hi / pp.prime;
    for (int e = 0; e < pp.exponent; ++e) {
      const auto end = std::upper_bound(power.begin(), power.end(), limit);
      power.resize(static_cast<std::size_t>(end - power.begin()));
      if (power.empty()) {
        break;
      }
      for (std::uint64_t& d : power) {
        d *= pp.prime;
      }
      merged.resize(out.size() + power.size());
      std::merge(out.begin(), out.end(), power.begin(), power.end(), merged.begin());
      out.swap(merged);
    }
  }
  out.erase(out.begin(), std::lower_bound(out.begin(), out.end(), lo));
  return out;
}

std::uint64_t lcmSaturating(std::uint64_t a, std::uint64_t b, std::uint64_t saturate) noexcept {
  const UInt128 l = static_cast<UInt128>(a / std::gcd(a, b)) * static_cast<UInt128>(b);
  return l > saturate ? saturate + 1 : static_cast<std::uint64_t>(l);
}

}  // namespace stretch::elasticity
