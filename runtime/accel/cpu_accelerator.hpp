#pragma once
// The host as an accelerator: one device, "cpu", the Gloo backend. Memory statistics come from
// the operating system (Linux /proc; elsewhere only totals from sysconf):
//  - memoryAllocated: this process's resident set (VmRSS), what DeepSpeed's CPU accelerator
//    reports through psutil.
//  - memoryReserved: this process's address space (VmSize): reserved, not necessarily backed,
//    so it is always >= memoryAllocated.
//  - totalMemory / availableMemory: the machine's MemTotal / MemAvailable.
// Values are 0 where the OS does not tell.

#include "runtime/accel/accelerator.hpp"

namespace stretch::accel {

class CpuAccelerator final : public Accelerator {
 public:
  std::string name() const override { return "cpu"; }
  std::string deviceName(std::optional<int> index = std::nullopt) const override;

  // One device: the host. setDevice() accepts any non-negative index (every local rank of a CPU
  // job shares the host, as DeepSpeed's CPU accelerator does) and keeps the current device 0.
  int deviceCount() const override { return 1; }
  int currentDevice() const override { return 0; }
  void setDevice(int index) override;
  void synchronize(std::optional<int> device = std::nullopt) override;
  bool isAvailable() const override { return true; }

  std::uint64_t memoryAllocated(std::optional<int> device = std::nullopt) const override;
  std::uint64_t memoryReserved(std::optional<int> device = std::nullopt) const override;
  std::uint64_t totalMemory(std::optional<int> device = std::nullopt) const override;
  std::uint64_t availableMemory(std::optional<int> device = std::nullopt) const override;
  DeviceProperties deviceProperties(int index) const override;

  std::string communicationBackendName() const override { return "gloo"; }
  // Every non-null pointer: the CPU cannot tell host memory from a device address.
  bool onAccelerator(const void* ptr) const override { return ptr != nullptr; }

  // Page-aligned (4096 bytes) memory, size rounded up to whole pages. Not page-locked.
  void* allocatePinned(std::size_t bytes) override;
  void freePinned(void* ptr) noexcept override;
};

// Parses /proc/meminfo-style text ("MemTotal:  16318480 kB") and returns the value of `key` in
// bytes; nullopt when the key is missing. Exposed for tests.
std::optional<std::uint64_t> parseMeminfoValue(std::string_view text, std::string_view key);

}  // namespace stretch::accel
