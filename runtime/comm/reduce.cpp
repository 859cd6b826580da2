#include "runtime/comm/reduce.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

namespace stretch::comm {

float halfToFloat(std::uint16_t bits) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  std::uint32_t exponent = (bits >> 10) & 0x1fu;
  std::uint32_t mantissa = bits & 0x3ffu;
  std::uint32_t out;
  if (exponent == 0) {
    if (mantissa == 0) {
      out = sign;
    } else {  // subnormal: normalise
      exponent = 127 - 15 + 1;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        --exponent;
      }
      mantissa &= 0x3ffu;
      out = sign | (exponent << 23) | (mantissa << 13);
    }
  } else if (exponent == 0x1f) {
    out = sign | 0x7f800000u | (mantissa << 13);
  } else {
    out = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(out);
}

std::uint16_t floatToHalf(float value) noexcept {
  const std::uint32_t f = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((f >> 16) & 0x8000u);
  const std::uint32_t absf = f & 0x7fffffffu;
  if (absf >= 0x47800000u)  // >= 2^16 (or inf/NaN): inf, NaN stays a quiet NaN
    return static_cast<std::uint16_t>(sign | (absf > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (absf < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    // Add 0.5 in the subnormal scale and let the FPU round to nearest even.
    const float shifted = std::bit_cast<float>(absf) + 0.5f;
    return static_cast<std::uint16_t>(sign | (std::bit_cast<std::uint32_t>(shifted) - 0x3f000000u));
  }
  const std::uint32_t mantissaOdd = (absf >> 13) & 1u;
  std::uint32_t rounded = absf + 0xc8000fffu + mantissaOdd;  // rebias (-112 << 23) + round bias
  return static_cast<std::uint16_t>(sign | (rounded >> 13));
}

float bfloat16ToFloat(std::uint16_t bits) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

std::uint16_t floatToBfloat16(float value) noexcept {
  const std::uint32_t f = std::bit_cast<std::uint32_t>(value);
  if ((f & 0x7fffffffu) > 0x7f800000u)  // NaN: keep it a quiet NaN
    return static_cast<std::uint16_t>((f >> 16) | 0x40u);
  const std::uint32_t rounding = 0x7fffu + ((f >> 16) & 1u);
  return static_cast<std::uint16_t>((f + rounding) >> 16);
}

namespace {

template <typename T>
void reduceTyped(ReduceOp op, T* __restrict acc, const T* __restrict in, std::size_t n) noexcept {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      for (std::size_t i = 0; i < n; ++i)
        acc[i] = static_cast<T>(acc[i] + in[i]);
      break;
    case ReduceOp::Min:
      for (std::size_t i = 0; i < n; ++i)
        acc[i] = std::min(acc[i], in[i]);
      break;
    case ReduceOp::Max:
      for (std::size_t i = 0; i < n; ++i)
        acc[i] = std::max(acc[i], in[i]);
      break;
    case ReduceOp::Product:
      for (std::size_t i = 0; i < n; ++i)
        acc[i] = static_cast<T>(acc[i] * in[i]);
      break;
  }
}

// 16-bit floats: widen, reduce in fp32, round back; in blocks so the fp32 loops vectorise.
template <float (*ToFloat)(std::uint16_t) noexcept, std::uint16_t (*FromFloat)(float) noexcept>
void reduceHalfLike(ReduceOp op, std::uint16_t* acc, const std::uint16_t* in,
                    std::size_t n) noexcept {
  constexpr std::size_t kBlock = 256;
  float a[kBlock];
  float b[kBlock];
  for (std::size_t start = 0; start < n; start += kBlock) {
    const std::size_t m = std::min(kBlock, n - start);
    for (std::size_t i = 0; i < m; ++i) {
      a[i] = ToFloat(acc[start + i]);
      b[i] = ToFloat(in[start + i]);
    }
    reduceTyped<float>(op, a, b, m);
    for (std::size_t i = 0; i < m; ++i)
      acc[start + i] = FromFloat(a[i]);
  }
}

template <typename T>
void divideTyped(T* buffer, std::size_t n, int divisor) noexcept {
  if constexpr (std::is_floating_point_v<T>) {
    const T d = static_cast<T>(divisor);
    for (std::size_t i = 0; i < n; ++i)
      buffer[i] = buffer[i] / d;
  } else {
    const T d = static_cast<T>(divisor);
    for (std::size_t i = 0; i < n; ++i)
      buffer[i] = static_cast<T>(buffer[i] / d);
  }
}

template <float (*ToFloat)(std::uint16_t) noexcept, std::uint16_t (*FromFloat)(float) noexcept>
void divideHalfLike(std::uint16_t* buffer, std::size_t n, int divisor) noexcept {
  const float d = static_cast<float>(divisor);
  for (std::size_t i = 0; i < n; ++i)
    buffer[i] = FromFloat(ToFloat(buffer[i]) / d);
}

}  // namespace

void reduceInto(DataType dtype, ReduceOp op, void* accumulator, const void* input,
                std::size_t count) noexcept {
  switch (dtype) {
    case DataType::Float32:
      reduceTyped(op, static_cast<float*>(accumulator), static_cast<const float*>(input), count);
      break;
    case DataType::Float64:
      reduceTyped(op, static_cast<double*>(accumulator), static_cast<const double*>(input), count);
      break;
    case DataType::Int32:
      reduceTyped(op, static_cast<std::int32_t*>(accumulator),
                  static_cast<const std::int32_t*>(input), count);
      break;
    case DataType::Int64:
      reduceTyped(op, static_cast<std::int64_t*>(accumulator),
                  static_cast<const std::int64_t*>(input), count);
      break;
    case DataType::UInt8:
      reduceTyped(op, static_cast<std::uint8_t*>(accumulator),
                  static_cast<const std::uint8_t*>(input), count);
      break;
    case DataType::Float16:
      reduceHalfLike<halfToFloat, floatToHalf>(op, static_cast<std::uint16_t*>(accumulator),
                                               static_cast<const std::uint16_t*>(input), count);
      break;
    case DataType::BFloat16:
      reduceHalfLike<bfloat16ToFloat, floatToBfloat16>(op, static_cast<std::uint16_t*>(accumulator),
                                                       static_cast<const std::uint16_t*>(input),
                                                       count);
      break;
  }
}

void finishAverage(DataType dtype, void* buffer, std::size_t count, int divisor) noexcept {
  if (divisor <= 1)
    return;
  switch (dtype) {
    case DataType::Float32:
      divideTyped(static_cast<float*>(buffer), count, divisor);
      break;
    case DataType::Float64:
      divideTyped(static_cast<double*>(buffer), count, divisor);
      break;
    case DataType::Int32:
      divideTyped(static_cast<std::int32_t*>(buffer), count, divisor);
      break;
    case DataType::Int64:
      divideTyped(static_cast<std::int64_t*>(buffer), count, divisor);
      break;
    case DataType::UInt8:
      divideTyped(static_cast<std::uint8_t*>(buffer), count, divisor);
      break;
    case DataType::Float16:
      divideHalfLike<halfToFloat, floatToHalf>(static_cast<std::uint16_t*>(buffer), count, divisor);
      break;
    case DataType::BFloat16:
      divideHalfLike<bfloat16ToFloat, floatToBfloat16>(static_cast<std::uint16_t*>(buffer), count,
                                                       divisor);
      break;
  }
}

}  // namespace stretch::comm
