#pragma once
// CUDA devices through the CUDA runtime (cudart, linked dynamically so that a binary built with
// CUDA still starts on a machine without a driver). Built only when the CUDA toolkit was found
// (STRETCH_WITH_NCCL_ENABLED); this header carries no CUDA types so that accelerator.cpp can
// name the class without the CUDA headers.
//
// A missing driver or device is not an error here: deviceCount() is 0 and isAvailable() false.
// Calls that need a device then throw AcceleratorError with the runtime's own message.
//
// Memory statistics: Stretch has no caching allocator of its own (LibTorch's engine reports
// its allocator separately), so memoryAllocated and memoryReserved both report the device's
// used memory (total - free from cudaMemGetInfo), which includes other processes and the CUDA
// context. Those calls create the device's primary context if it does not exist yet.

#include "runtime/accel/accelerator.hpp"

namespace stretch::accel {

class CudaAccelerator final : public Accelerator {
 public:
  std::string name() const override { return "cuda"; }

  int deviceCount() const override;
  int currentDevice() const override;
  void setDevice(int index) override;
  void synchronize(std::optional<int> device = std::nullopt) override;
  bool isAvailable() const override { return deviceCount() > 0; }

  std::uint64_t memoryAllocated(std::optional<int> device = std::nullopt) const override;
  std::uint64_t memoryReserved(std::optional<int> device = std::nullopt) const override;
  std::uint64_t totalMemory(std::optional<int> device = std::nullopt) const override;
  std::uint64_t availableMemory(std::optional<int> device = std::nullopt) const override;
  DeviceProperties deviceProperties(int index) const override;

  std::string communicationBackendName() const override { return "nccl"; }
  // Device and managed memory; false for host memory (pinned or not) and for nullptr.
  bool onAccelerator(const void* ptr) const override;

  // cudaHostAlloc(portable): page-locked and usable from every device's context.
  void* allocatePinned(std::size_t bytes) override;
  void freePinned(void* ptr) noexcept override;
};

// cudaStatus() of a build with CUDA: runtime and driver versions and the visible devices.
CudaStatus probeCudaRuntime();

}  // namespace stretch::accel
