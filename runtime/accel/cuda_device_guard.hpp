#pragma once
// Makes a CUDA device current for the calling thread and restores the caller's device on scope
// exit, so that working on another device does not move the caller. Shared by the CUDA
// accelerator and the NCCL backend (runtime/comm/nccl), each of which reports a failed CUDA call
// in its own error type: `check(error, call)` is called with the result of every CUDA call the
// guard makes ("cudaGetDevice", "cudaSetDevice(N)") and must throw when it is not cudaSuccess.
// Restoring on scope exit ignores errors (a destructor must not throw).
//
// A cuda_* file: it includes the CUDA runtime headers, so only code built with CUDA includes it.

#include <cuda_runtime_api.h>
#include <functional>
#include <string_view>

#include <fmt/format.h>

namespace stretch::accel {

class CudaDeviceGuard {
 public:
  using Check = std::function<void(cudaError_t error, std::string_view call)>;

  CudaDeviceGuard(int device, const Check& check) {
    check(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device) {
      check(cudaSetDevice(device), fmt::format("cudaSetDevice({})", device));
      changed_ = true;
    }
  }
  ~CudaDeviceGuard() {
    if (changed_)
      static_cast<void>(cudaSetDevice(previous_));
  }
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

}  // namespace stretch::accel
