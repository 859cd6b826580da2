#pragma once
// comm::BufferView of a LibTorch tensor: the bridge between the engine's tensors and the
// communication layer, which knows nothing of LibTorch.

#include <string>

#include <torch/types.h>

#include "runtime/comm/types.hpp"
#include "runtime/common/error.hpp"

namespace stretch::engine {

inline comm::DataType toCommDataType(torch::ScalarType type) {
  switch (type) {
    case torch::kFloat32:
      return comm::DataType::Float32;
    case torch::kFloat16:
      return comm::DataType::Float16;
    case torch::kBFloat16:
      return comm::DataType::BFloat16;
    case torch::kFloat64:
      return comm::DataType::Float64;
    case torch::kInt32:
      return comm::DataType::Int32;
    case torch::kInt64:
      return comm::DataType::Int64;
    case torch::kUInt8:
      return comm::DataType::UInt8;
    default:
      throw Error(std::string("tensor dtype ") + c10::toString(type) +
                  " has no communication data type (expected fp32, fp16, bf16, fp64, int32, "
                  "int64 or uint8)");
  }
}

// The tensor's elements as a BufferView; the tensor must be contiguous and outlive the view.
inline comm::BufferView toBufferView(const torch::Tensor& t) {
  if (!t.is_contiguous())
    throw InternalError("toBufferView: the tensor is not contiguous");
  const comm::Device device =
      t.is_cuda() ? comm::Device{comm::DeviceType::Cuda, static_cast<int>(t.get_device())}
                  : comm::Device::cpu();
  return comm::BufferView{t.data_ptr(), static_cast<std::size_t>(t.numel()),
                          toCommDataType(t.scalar_type()), device};
}

}  // namespace stretch::engine
