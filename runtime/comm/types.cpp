#include "runtime/comm/types.hpp"

#include <array>
#include <charconv>

#include <fmt/format.h>

#include "runtime/common/error.hpp"

namespace stretch::comm {

std::size_t elementSize(DataType dtype) noexcept {
  switch (dtype) {
    case DataType::Float32:
    case DataType::Int32:
      return 4;
    case DataType::Float16:
    case DataType::BFloat16:
      return 2;
    case DataType::Float64:
    case DataType::Int64:
      return 8;
    case DataType::UInt8:
      return 1;
  }
  return 1;
}

std::string_view toString(DataType dtype) noexcept {
  switch (dtype) {
    case DataType::Float32:
      return "fp32";
    case DataType::Float16:
      return "fp16";
    case DataType::BFloat16:
      return "bf16";
    case DataType::Float64:
      return "fp64";
    case DataType::Int32:
      return "int32";
    case DataType::Int64:
      return "int64";
    case DataType::UInt8:
      return "uint8";
  }
  return "?";
}

std::optional<DataType> parseDataType(std::string_view text) noexcept {
  struct Alias {
    std::string_view name;
    DataType dtype;
  };
  static constexpr std::array<Alias, 17> kAliases = {{
      {"fp32", DataType::Float32},
      {"float32", DataType::Float32},
      {"float", DataType::Float32},
      {"fp16", DataType::Float16},
      {"float16", DataType::Float16},
      {"half", DataType::Float16},
      {"bf16", DataType::BFloat16},
      {"bfloat16", DataType::BFloat16},
      {"fp64", DataType::Float64},
      {"float64", DataType::Float64},
      {"double", DataType::Float64},
      {"int32", DataType::Int32},
      {"int", DataType::Int32},
      {"int64", DataType::Int64},
      {"long", DataType::Int64},
      {"uint8", DataType::UInt8},
      {"byte", DataType::UInt8},
  }};
  for (const Alias& alias : kAliases) {
    if (alias.name == text)
      return alias.dtype;
  }
  return std::nullopt;
}

bool isFloatingPoint(DataType dtype) noexcept {
  return dtype == DataType::Float32 || dtype == DataType::Float16 || dtype == DataType::BFloat16 ||
         dtype == DataType::Float64;
}

std::string_view toString(DeviceType type) noexcept {
  return type == DeviceType::Cpu ? "cpu" : "cuda";
}

std::string Device::toString() const {
  if (index < 0 || type == DeviceType::Cpu)
    return std::string(comm::toString(type));
  return fmt::format("{}:{}", comm::toString(type), index);
}

Device parseDevice(std::string_view text, std::string_view what) {
  if (text == "cpu")
    return Device::cpu();
  if (text == "cuda")
    return Device::cuda();
  if (text.starts_with("cuda:")) {
    const std::string_view digits = text.substr(5);
    int index = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && end == digits.data() + digits.size() && index >= 0 && !digits.empty())
      return Device::cuda(index);
  }
  throw ConfigError(ErrorDetail{std::string(what), fmt::format("\"{}\"", text),
                                "a device name: \"cpu\", \"cuda\" or \"cuda:N\""});
}

BufferView BufferView::slice(std::size_t offset, std::size_t n) const noexcept {
  auto* base = static_cast<unsigned char*>(data);
  return {base == nullptr ? nullptr : base + offset * elementSize(dtype), n, dtype, device};
}

std::string_view toString(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Avg:
      return "avg";
    case ReduceOp::Min:
      return "min";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Product:
      return "product";
  }
  return "?";
}

std::optional<ReduceOp> parseReduceOp(std::string_view text) noexcept {
  for (ReduceOp op : kAllReduceOps) {
    if (toString(op) == text)
      return op;
  }
  if (text == "prod")
    return ReduceOp::Product;
  if (text == "mean")
    return ReduceOp::Avg;
  return std::nullopt;
}

std::string_view toString(OpType op) noexcept {
  switch (op) {
    case OpType::AllReduce:
      return "all_reduce";
    case OpType::Broadcast:
      return "broadcast";
    case OpType::AllGather:
      return "all_gather";
    case OpType::ReduceScatter:
      return "reduce_scatter";
    case OpType::AllToAll:
      return "all_to_all";
    case OpType::Send:
      return "send";
    case OpType::Recv:
      return "recv";
    case OpType::Barrier:
      return "barrier";
  }
  return "?";
}

std::optional<OpType> parseOpType(std::string_view text) noexcept {
  for (OpType op : kAllOpTypes) {
    if (toString(op) == text)
      return op;
  }
  return std::nullopt;
}

}  // namespace stretch::comm
