#include "runtime/accel/cuda_accelerator.hpp"

#include <cstdlib>
#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include "runtime/accel/cuda_device_guard.hpp"

namespace stretch::accel {

namespace {

std::string errorText(cudaError_t error) {
  return fmt::format("{} ({})", cudaGetErrorString(error), cudaGetErrorName(error));
}

// Throws AcceleratorError naming the call; clears the runtime's last error so that a later,
// unrelated check does not see it again.
void check(cudaError_t error, std::string_view call) {
  if (error != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    throw AcceleratorError(fmt::format("cuda: {} failed: {}", call, errorText(error)));
  }
}

// "13.0" from the runtime's 13000.
std::string versionText(int version) {
  return fmt::format("{}.{}", version / 1000, (version % 1000) / 10);
}

struct MemInfo {
  std::size_t free = 0;
  std::size_t total = 0;
};

MemInfo memInfo(int device) {
  // Querying another device must not move the caller.
  const CudaDeviceGuard guard(device, check);
  MemInfo info;
  check(cudaMemGetInfo(&info.free, &info.total), fmt::format("cudaMemGetInfo(cuda:{})", device));
  return info;
}

}  // namespace

int CudaAccelerator::deviceCount() const {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    // No driver, no device, or a driver older than the runtime: nothing usable.
    static_cast<void>(cudaGetLastError());
    return 0;
  }
  return count;
}

int CudaAccelerator::currentDevice() const {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  return device;
}

void CudaAccelerator::setDevice(int index) {
  resolveDevice(index, "setDevice");
  check(cudaSetDevice(index), fmt::format("cudaSetDevice({})", index));
}

void CudaAccelerator::synchronize(std::optional<int> device) {
  const int index = resolveDevice(device, "synchronize");
  const CudaDeviceGuard guard(index, check);
  check(cudaDeviceSynchronize(), fmt::format("cudaDeviceSynchronize(cuda:{})", index));
}

std::uint64_t CudaAccelerator::memoryAllocated(std::optional<int> device) const {
  const MemInfo info = memInfo(resolveDevice(device, "memoryAllocated"));
  return info.total - info.free;
}

std::uint64_t CudaAccelerator::memoryReserved(std::optional<int> device) const {
  const MemInfo info = memInfo(resolveDevice(device, "memoryReserved"));
  return info.total - info.free;
}

std::uint64_t CudaAccelerator::totalMemory(std::optional<int> device) const {
  return deviceProperties(resolveDevice(device, "totalMemory")).totalMemory;
}

std::uint64_t CudaAccelerator::availableMemory(std::optional<int> device) const {
  return memInfo(resolveDevice(device, "availableMemory")).free;
}

DeviceProperties CudaAccelerator::deviceProperties(int index) const {
  resolveDevice(index, "deviceProperties");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, index), fmt::format("cudaGetDeviceProperties({})", index));
  DeviceProperties out;
  out.index = index;
  out.name = prop.name;
  out.totalMemory = prop.totalGlobalMem;
  out.details = fmt::format("compute capability {}.{}, {} SMs", prop.major, prop.minor,
                            prop.multiProcessorCount);
  // As nvidia-smi -L prints it: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
  out.uuid = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10)
      out.uuid += '-';
    out.uuid += fmt::format("{:02x}", static_cast<unsigned char>(prop.uuid.bytes[i]));
  }
  return out;
}

bool CudaAccelerator::onAccelerator(const void* ptr) const {
  if (ptr == nullptr)
    return false;
  cudaPointerAttributes attrs{};
  if (cudaPointerGetAttributes(&attrs, ptr) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    return false;
  }
  return attrs.type == cudaMemoryTypeDevice || attrs.type == cudaMemoryTypeManaged;
}

void* CudaAccelerator::allocatePinned(std::size_t bytes) {
  if (bytes == 0)
    return nullptr;
  void* ptr = nullptr;
  check(cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable),
        fmt::format("cudaHostAlloc({} bytes)", bytes));
  return ptr;
}

void CudaAccelerator::freePinned(void* ptr) noexcept {
  if (ptr != nullptr)
    static_cast<void>(cudaFreeHost(ptr));
}

CudaStatus probeCudaRuntime() {
  CudaStatus status;
  status.built = true;
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess)
    status.runtimeVersion = versionText(runtime);
  int driver = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0)
    status.driverVersion = versionText(driver);
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    status.unavailableReason = errorText(error);
  } else if (count == 0) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    status.unavailableReason =
        visible != nullptr ? fmt::format("no device visible (CUDA_VISIBLE_DEVICES={})", visible)
                           : std::string("no device visible");
  }
  status.deviceCount = error == cudaSuccess ? count : 0;
  return status;
}

}  // namespace stretch::accel
