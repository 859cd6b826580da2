#pragma once
// Value types shared by every communication backend: element types, devices, non-owning buffer
// views, reduction operators and operation names. No third-party headers (docs/architecture.md).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "runtime/common/duration.hpp"

namespace stretch::comm {

// Element types a backend may be asked to move or reduce. Names follow DeepSpeed/PyTorch short
// forms in text ("fp32", "bf16", ...).
enum class DataType : std::uint8_t { Float32, Float16, BFloat16, Float64, Int32, Int64, UInt8 };

inline constexpr DataType kAllDataTypes[] = {
    DataType::Float32, DataType::Float16, DataType::BFloat16, DataType::Float64,
    DataType::Int32,   DataType::Int64,   DataType::UInt8};

std::size_t elementSize(DataType dtype) noexcept;
std::string_view toString(DataType dtype) noexcept;
// Accepts the short names ("fp32", "bf16", "int64", ...) and their long forms ("float32",
// "bfloat16", "half"); nullopt for anything else.
std::optional<DataType> parseDataType(std::string_view text) noexcept;
bool isFloatingPoint(DataType dtype) noexcept;

// The C++ element type that carries a DataType in memory. fp16 and bf16 are raw 16-bit words;
// runtime/comm/reduce.hpp converts them.
template <typename T>
constexpr std::optional<DataType> dataTypeOf() {
  if constexpr (std::is_same_v<T, float>)
    return DataType::Float32;
  else if constexpr (std::is_same_v<T, double>)
    return DataType::Float64;
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return DataType::Int32;
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return DataType::Int64;
  else if constexpr (std::is_same_v<T, std::uint8_t>)
    return DataType::UInt8;
  else
    return std::nullopt;
}

enum class DeviceType : std::uint8_t { Cpu, Cuda };

std::string_view toString(DeviceType type) noexcept;

// A device as DeepSpeed names it: "cpu", "cuda", "cuda:1". index -1 means "the current one".
struct Device {
  DeviceType type = DeviceType::Cpu;
  int index = -1;

  static constexpr Device cpu() noexcept { return {DeviceType::Cpu, -1}; }
  static constexpr Device cuda(int index = -1) noexcept { return {DeviceType::Cuda, index}; }
  std::string toString() const;
  bool operator==(const Device&) const = default;
};

// Parses "cpu", "cuda" or "cuda:N"; throws ConfigError naming `what` (e.g. "--device") otherwise.
Device parseDevice(std::string_view text, std::string_view what);

// A non-owning view of `count` elements of `dtype` at `data` on `device`. The caller keeps the
// memory alive and untouched until the Work returned for an operation on it has completed.
struct BufferView {
  void* data = nullptr;
  std::size_t count = 0;
  DataType dtype = DataType::Float32;
  Device device = Device::cpu();

  std::size_t bytes() const noexcept { return count * elementSize(dtype); }
  // The elements [offset, offset + n) of this view.
  BufferView slice(std::size_t offset, std::size_t n) const noexcept;

  template <typename T>
  static BufferView of(std::span<T> elements, Device device = Device::cpu()) {
    constexpr auto dtype = dataTypeOf<std::remove_const_t<T>>();
    static_assert(dtype.has_value(), "use BufferView{ptr, count, dtype} for fp16/bf16 words");
    return {const_cast<std::remove_const_t<T>*>(elements.data()), elements.size(), *dtype, device};
  }
};

// Reductions every backend implements for every DataType. Avg divides the sum by the group size
// (integer types truncate toward zero, as NCCL does).
enum class ReduceOp : std::uint8_t { Sum, Avg, Min, Max, Product };

inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Min,
                                             ReduceOp::Max, ReduceOp::Product};

std::string_view toString(ReduceOp op) noexcept;
std::optional<ReduceOp> parseReduceOp(std::string_view text) noexcept;

// Operation names as nccl-tests and DeepSpeed's comms logger print them ("all_reduce", ...).
enum class OpType : std::uint8_t {
  AllReduce,
  Broadcast,
  AllGather,
  ReduceScatter,
  AllToAll,
  Send,
  Recv,
  Barrier
};

inline constexpr OpType kAllOpTypes[] = {
    OpType::AllReduce, OpType::Broadcast, OpType::AllGather, OpType::ReduceScatter,
    OpType::AllToAll,  OpType::Send,      OpType::Recv,      OpType::Barrier};

std::string_view toString(OpType op) noexcept;
std::optional<OpType> parseOpType(std::string_view text) noexcept;

// Timeouts: Stretch's one Duration (runtime/common/duration.hpp), integer nanoseconds.
using stretch::Duration;

// DeepSpeed's default_pg_timeout: 10 minutes unless DEEPSPEED_TIMEOUT/STRETCH_TIMEOUT say
// otherwise.
inline constexpr Duration kDefaultTimeout = std::chrono::minutes(10);

using stretch::formatDuration;  // "1.5 s", "250 ms", "10 min" in error messages

}  // namespace stretch::comm
