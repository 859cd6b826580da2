// Reduction kernels and 16-bit float conversions against slow, obviously-correct references.

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <rapidcheck.h>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "runtime/comm/reduce.hpp"

namespace stretch::comm {
namespace {

// Round-to-nearest-even to a format with `mantissaBits` explicit bits and exponent range
// [minExp, maxExp] (normal numbers), computed in long double: the reference for the bit tricks.
double roundToFormat(double x, int mantissaBits, int minExp, int maxExp) {
  if (std::isnan(x) || std::isinf(x) || x == 0.0)
    return x;
  int e = std::ilogb(x);
  if (e < minExp)
    e = minExp;  // subnormal spacing
  const double ulp = std::ldexp(1.0, e - mantissaBits);
  const double q = x / ulp;
  double r = std::nearbyint(q);  // default rounding mode: to nearest even
  const double out = r * ulp;
  const double maxFinite = std::ldexp(2.0 - std::ldexp(1.0, -mantissaBits), maxExp);
  if (std::fabs(out) > maxFinite)
    return std::copysign(std::numeric_limits<double>::infinity(), x);
  return out;
}

TEST(HalfConversion, EveryHalfRoundTripsThroughFloat) {
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    const float f = halfToFloat(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(f))));
      continue;
    }
    ASSERT_EQ(floatToHalf(f), h) << "bits " << bits;
  }
  EXPECT_EQ(halfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(halfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24));
}

TEST(BFloat16Conversion, EveryBFloat16RoundTripsThroughFloat) {
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    const float f = bfloat16ToFloat(h);
    if (std::isnan(f))
      continue;
    ASSERT_EQ(floatToBfloat16(f), h) << "bits " << bits;
  }
}

RC_GTEST_PROP(HalfConversion, RoundsToNearestEven, (std::uint32_t bits)) {
  const float f = std::bit_cast<float>(bits);
  RC_PRE(!std::isnan(f));
  const double expected = roundToFormat(f, 10, -14, 15);
  RC_ASSERT(static_cast<double>(halfToFloat(floatToHalf(f))) == expected);
}

// Arbitrary bit patterns are mostly far outside fp16's range; these land in and around it,
// subnormals and the overflow edge included.
RC_GTEST_PROP(HalfConversion, RoundsToNearestEvenInItsRange,
              (std::uint32_t mantissa, std::uint8_t exponent, bool negative)) {
  const std::uint32_t biased = 100u + exponent % 46u;  // 2^-27 .. 2^18
  const std::uint32_t bits =
      (negative ? 0x80000000u : 0u) | (biased << 23) | (mantissa & 0x7fffffu);
  const float f = std::bit_cast<float>(bits);
  const double expected = roundToFormat(f, 10, -14, 15);
  RC_ASSERT(static_cast<double>(halfToFloat(floatToHalf(f))) == expected);
}

RC_GTEST_PROP(BFloat16Conversion, RoundsToNearestEven, (std::uint32_t bits)) {
  const float f = std::bit_cast<float>(bits);
  RC_PRE(!std::isnan(f) && !std::isinf(f));
  const double expected = roundToFormat(f, 7, -126, 127);
  RC_ASSERT(static_cast<double>(bfloat16ToFloat(floatToBfloat16(f))) == expected);
}

RC_GTEST_PROP(ReduceInto, MatchesElementwiseReferenceForIntegers,
              (std::vector<std::int32_t> a, std::vector<std::int32_t> b)) {
  const std::size_t n = std::min(a.size(), b.size());
  a.resize(n);
  b.resize(n);
  for (auto& x : a)
    x %= 1000;
  for (auto& x : b)
    x %= 1000;
  for (ReduceOp op : kAllReduceOps) {
    std::vector<std::int32_t> acc = a;
    reduceInto(DataType::Int32, op, acc.data(), b.data(), n);
    if (op == ReduceOp::Avg)
      finishAverage(DataType::Int32, acc.data(), n, 2);
    for (std::size_t i = 0; i < n; ++i) {
      std::int32_t want = 0;
      switch (op) {
        case ReduceOp::Sum:
          want = a[i] + b[i];
          break;
        case ReduceOp::Avg:
          want = (a[i] + b[i]) / 2;
          break;
        case ReduceOp::Min:
          want = std::min(a[i], b[i]);
          break;
        case ReduceOp::Max:
          want = std::max(a[i], b[i]);
          break;
        case ReduceOp::Product:
          want = a[i] * b[i];
          break;
      }
      RC_ASSERT(acc[i] == want);
    }
  }
}

RC_GTEST_PROP(ReduceInto, HalfSumsAreRoundedFloatSums, (std::vector<std::int16_t> raw)) {
  // Small integers and halves are exact in fp16, so sums are exact until rounding.
  std::vector<std::uint16_t> a;
  std::vector<std::uint16_t> b;
  for (std::int16_t v : raw) {
    a.push_back(floatToHalf(static_cast<float>(v % 2048) * 0.5f));
    b.push_back(floatToHalf(static_cast<float>((v / 3) % 2048)));
  }
  std::vector<std::uint16_t> acc = a;
  reduceInto(DataType::Float16, ReduceOp::Sum, acc.data(), b.data(), a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    const float want = halfToFloat(floatToHalf(halfToFloat(a[i]) + halfToFloat(b[i])));
    RC_ASSERT(halfToFloat(acc[i]) == want);
  }
}

TEST(ReduceInto, FloatOpsAndAverage) {
  std::vector<double> acc = {1.0, -2.0, 3.0};
  const std::vector<double> in = {4.0, 5.0, -6.0};
  auto run = [&](ReduceOp op) {
    std::vector<double> a = acc;
    reduceInto(DataType::Float64, op, a.data(), in.data(), a.size());
    return a;
  };
  EXPECT_EQ(run(ReduceOp::Sum), (std::vector<double>{5.0, 3.0, -3.0}));
  EXPECT_EQ(run(ReduceOp::Min), (std::vector<double>{1.0, -2.0, -6.0}));
  EXPECT_EQ(run(ReduceOp::Max), (std::vector<double>{4.0, 5.0, 3.0}));
  EXPECT_EQ(run(ReduceOp::Product), (std::vector<double>{4.0, -10.0, -18.0}));
  std::vector<double> avg = run(ReduceOp::Avg);
  finishAverage(DataType::Float64, avg.data(), avg.size(), 2);
  EXPECT_EQ(avg, (std::vector<double>{2.5, 1.5, -1.5}));

  std::vector<std::uint16_t> bf = {floatToBfloat16(1.5f), floatToBfloat16(-3.0f)};
  const std::vector<std::uint16_t> bfIn = {floatToBfloat16(2.5f), floatToBfloat16(1.0f)};
  reduceInto(DataType::BFloat16, ReduceOp::Max, bf.data(), bfIn.data(), 2);
  EXPECT_EQ(bfloat16ToFloat(bf[0]), 2.5f);
  EXPECT_EQ(bfloat16ToFloat(bf[1]), 1.0f);
}

}  // namespace
}  // namespace stretch::comm
