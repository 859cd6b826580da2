#pragma once
// Element-wise reduction kernels on raw buffers for every DataType and ReduceOp, shared by the
// CPU backends (in-process, Gloo) and the tests that check their results. fp16 and bf16 are
// reduced in fp32 and rounded back to nearest-even, as PyTorch's CPU kernels do.

#include <cstddef>
#include <cstdint>

#include "runtime/comm/types.hpp"

namespace stretch::comm {

float halfToFloat(std::uint16_t bits) noexcept;
std::uint16_t floatToHalf(float value) noexcept;
float bfloat16ToFloat(std::uint16_t bits) noexcept;
std::uint16_t floatToBfloat16(float value) noexcept;

// accumulator[i] = op(accumulator[i], input[i]) for i < count. Avg accumulates like Sum; call
// finishAverage() once all inputs are in. accumulator and input may not overlap partially.
void reduceInto(DataType dtype, ReduceOp op, void* accumulator, const void* input,
                std::size_t count) noexcept;

// Divides each element by `divisor` (integers truncate toward zero): turns a Sum into an Avg.
void finishAverage(DataType dtype, void* buffer, std::size_t count, int divisor) noexcept;

}  // namespace stretch::comm
