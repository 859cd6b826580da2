#include "runtime/elasticity/number_theory.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

namespace stretch::elasticity {
namespace {

std::uint64_t product(const Factorization& f) {
  std::uint64_t n = 1;
  for (const auto& [p, e] : f) {
    for (int i = 0; i < e; ++i)
      n *= p;
  }
  return n;
}

TEST(NumberTheory, HcnListIsDeepSpeeds) {
  const auto hcn = highlyCompositeNumbers();
  ASSERT_EQ(hcn.size(), 38u);
  EXPECT_EQ(hcn.front(), 1);
  EXPECT_EQ(hcn[14], 840);
  EXPECT_EQ(hcn.back(), 720720);
  // Each entry has more divisors than every smaller number (the defining property).
  std::uint64_t record = 0;
  for (std::int64_t h : hcn) {
    const std::uint64_t d = divisorCount(factorize(static_cast<std::uint64_t>(h)));
    EXPECT_GT(d, record) << h;
    record = d;
  }
}

TEST(NumberTheory, LargestHcnAtMostSaturates) {
  EXPECT_EQ(largestHcnAtMost(1), 1);
  EXPECT_EQ(largestHcnAtMost(5), 4);
  EXPECT_EQ(largestHcnAtMost(50000), 45360);
  EXPECT_EQ(largestHcnAtMost(720720), 720720);
  EXPECT_EQ(largestHcnAtMost(5'000'000'000), 720720);
}

TEST(NumberTheory, FactorizeRoundTripsAndFindsLargePrimes) {
  for (std::uint64_t n :
       {1ull, 2ull, 12ull, 720720ull, 999983ull, 1ull << 40, 999983ull * 999979ull, 8648640ull}) {
    const Factorization f = factorize(n);
    EXPECT_EQ(product(f), n);
    EXPECT_TRUE(
        std::is_sorted(f.begin(), f.end(), [](auto a, auto b) { return a.prime < b.prime; }));
  }
  EXPECT_EQ(divisorCount(factorize(720720)), 240u);
  EXPECT_EQ(divisorCount(factorize(8648640)), 448u);
}

TEST(NumberTheory, MultiplyAndDivideAreInverse) {
  const Factorization a = factorize(720720);
  const Factorization b = factorize(17 * 8);
  EXPECT_EQ(product(multiply(a, b)), 720720ull * 136);
  EXPECT_EQ(divide(multiply(a, b), b), a);
}

TEST(NumberTheory, DivisorsInRangeMatchLinearScan) {
  for (std::uint64_t n : {1ull, 36ull, 9792ull, 720720ull}) {
    for (auto [lo, hi] : std::vector<std::pair<std::uint64_t, std::uint64_t>>{
             {1, n}, {32, 1500}, {5, 5}, {n + 1, n + 5}, {7, 3}}) {
      std::vector<std::uint64_t> fast;
      forEachDivisorInRange(factorize(n), lo, hi, [&](std::uint64_t d) { fast.push_back(d); });
      std::sort(fast.begin(), fast.end());
      std::vector<std::uint64_t> slow;
      for (std::uint64_t d = std::max<std::uint64_t>(lo, 1); d <= std::min(hi, n); ++d) {
        if (n % d == 0)
          slow.push_back(d);
      }
      EXPECT_EQ(fast, slow) << n << " in [" << lo << ", " << hi << "]";
      EXPECT_EQ(sortedDivisorsInRange(factorize(n), lo, hi), slow) << n;
      EXPECT_EQ(countDivisorsInRange(n, factorize(n), lo, hi), slow.size()) << n;
    }
  }
}

TEST(NumberTheory, CountDivisorsInRangeMatchesListingOnManyDivisors) {
  // Numbers with many divisors take the meet-in-the-middle path; ranges hit both edges.
  for (std::uint64_t n : {720720ull, 8648640ull, 2ull * 3 * 5 * 7 * 11 * 13 * 17 * 19 * 23,
                          1ull << 40, 735134400ull}) {
    const Factorization f = factorize(n);
    for (auto [lo, hi] : std::vector<std::pair<std::uint64_t, std::uint64_t>>{
             {1, n}, {1, 1}, {2, 1000}, {1000, 1000000}, {n / 7, n}, {n, n}, {5, 4}}) {
      std::uint64_t slow = 0;
      forEachDivisorInRange(f, lo, hi, [&slow](std::uint64_t) { ++slow; });
      EXPECT_EQ(countDivisorsInRange(n, f, lo, hi), slow) << n << " [" << lo << ", " << hi << "]";
    }
  }
}

TEST(NumberTheory, LcmSaturates) {
  EXPECT_EQ(lcmSaturating(4, 6, 100), 12u);
  EXPECT_EQ(lcmSaturating(1ull << 40, (1ull << 40) - 1, 1ull << 40), (1ull << 40) + 1);
}

}  // namespace
}  // namespace stretch::elasticity
