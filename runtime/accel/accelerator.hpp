#pragma once
// The accelerator abstraction (DeepSpeed's get_accelerator()): device names and counts, the
// current device, synchronisation, memory statistics, pinned host memory and the name of the
// communication backend that suits the device. Code written against Accelerator runs unchanged
// on the CPU and on CUDA, and an extension (a fake in tests, another vendor later) plugs in with
// setAccelerator() or registerAccelerator().
//
// No CUDA headers here: the CUDA implementation lives in cuda_accelerator.{hpp,cpp}, compiled
// only when the CUDA toolkit was found (docs/architecture.md, "third-party rooms").

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/error.hpp"

namespace stretch::accel {

// A device runtime call failed (bad device index, allocation failure, driver error). The
// message names the call, the device and the runtime's own error text.
STRETCH_DECLARE_ERROR(AcceleratorError, Error);

// What one device is, for reports and logs.
struct DeviceProperties {
  int index = 0;
  std::string name;               // "NVIDIA H100 80GB HBM3", or the CPU model name
  std::uint64_t totalMemory = 0;  // bytes
  std::string details;            // "compute capability 9.0, 132 SMs"; "16 logical cores"
  std::string uuid;               // "GPU-8c3f...": the physical device, whatever index a
                                  // process sees it at; "" for the CPU
};

class PinnedBuffer;

// Every method may be called from any thread. Like CUDA, the current device is per thread:
// setDevice() affects the calling thread only. Methods taking `std::optional<int> device` use
// the current device when it is nullopt and throw AcceleratorError for an index outside
// [0, deviceCount()).
class Accelerator {
 public:
  virtual ~Accelerator();

  // The accelerator's name, also the value STRETCH_ACCELERATOR accepts: "cpu", "cuda".
  virtual std::string name() const = 0;
  // The device type used in device names: "cpu", "cuda". Defaults to name().
  virtual std::string deviceType() const { return name(); }
  // "cuda" for nullopt, "cuda:1" for 1 (DeepSpeed's device_name). Devices without indices
  // (the CPU) return deviceType() for every index.
  virtual std::string deviceName(std::optional<int> index = std::nullopt) const;
  std::string currentDeviceName() const { return deviceName(currentDevice()); }

  // Devices this process can use; 0 when none is visible (no driver counts as none).
  virtual int deviceCount() const = 0;
  virtual int currentDevice() const = 0;
  virtual void setDevice(int index) = 0;
  // Blocks until all work queued on the device has finished.
  virtual void synchronize(std::optional<int> device = std::nullopt) = 0;
  // True when the accelerator can run work in this process (at least one device).
  virtual bool isAvailable() const = 0;

  // Memory statistics in bytes; what each counts is documented per implementation.
  virtual std::uint64_t memoryAllocated(std::optional<int> device = std::nullopt) const = 0;
  virtual std::uint64_t memoryReserved(std::optional<int> device = std::nullopt) const = 0;
  virtual std::uint64_t totalMemory(std::optional<int> device = std::nullopt) const = 0;
  virtual std::uint64_t availableMemory(std::optional<int> device = std::nullopt) const = 0;
  virtual DeviceProperties deviceProperties(int index) const = 0;

  // "gloo" for the CPU, "nccl" for CUDA: the backend initDistributed picks by default.
  virtual std::string communicationBackendName() const = 0;

  // True when `ptr` points into memory this accelerator's devices address directly (DeepSpeed's
  // on_accelerator(tensor), by pointer because accel sits below the comm layer).
  virtual bool onAccelerator(const void* ptr) const = 0;

  // Page-locked host memory for fast device transfers (CPU: page-aligned ordinary memory).
  // allocatePinned(0) returns nullptr; freePinned(nullptr) does nothing. Throws AcceleratorError
  // when the allocation fails. Memory must be freed by the accelerator that allocated it.
  virtual void* allocatePinned(std::size_t bytes) = 0;
  virtual void freePinned(void* ptr) noexcept = 0;
  // RAII form. The accelerator must outlive the buffer (the registered ones live as long as the
  // process, or until setAccelerator() replaces them and the last shared_ptr goes).
  PinnedBuffer pinned(std::size_t bytes);

 protected:
  // Resolves an optional device index against the current one and checks its range; `what`
  // names the calling method in the error.
  int resolveDevice(std::optional<int> device, std::string_view what) const;
};

// Owns pinned host memory from Accelerator::allocatePinned. Move-only.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(Accelerator* owner, void* data, std::size_t bytes) noexcept
      : owner_(owner), data_(data), bytes_(bytes) {}
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer();

  void* data() const noexcept { return data_; }
  std::size_t bytes() const noexcept { return bytes_; }
  explicit operator bool() const noexcept { return data_ != nullptr; }
  void reset() noexcept;

 private:
  Accelerator* owner_ = nullptr;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// ---- What this build and machine offer ----------------------------------------------------

// The CUDA facts `stretch report` and selection need, gathered without requiring a device.
struct CudaStatus {
  bool built = false;          // compiled against the CUDA runtime
  std::string runtimeVersion;  // "13.0" (the loaded cudart); empty when not built
  std::string driverVersion;   // "12.4"; empty when no driver is installed
  int deviceCount = 0;
  std::string unavailableReason;  // why deviceCount is 0 ("CUDA support not built", the
                                  // runtime's error text); empty when devices are visible
};

// Probes the CUDA runtime (cheap, no context is created); the result is not cached.
CudaStatus cudaStatus();

// ---- Selection ----------------------------------------------------------------------------

inline constexpr std::string_view kAcceleratorEnv = "STRETCH_ACCELERATOR";
inline constexpr std::string_view kDeepSpeedAcceleratorEnv = "DS_ACCELERATOR";

enum class SelectionSource : std::uint8_t {
  Environment,  // STRETCH_ACCELERATOR or DS_ACCELERATOR named it
  Detection,    // nothing named one: CUDA when a device is visible, else the CPU
  Override,     // setAccelerator() installed it
};

std::string_view toString(SelectionSource source) noexcept;

struct AcceleratorChoice {
  std::string name;  // "cpu", "cuda" or a registered extension's name
  SelectionSource source = SelectionSource::Detection;
  std::string reason;  // "STRETCH_ACCELERATOR=cpu", "2 CUDA devices visible", ...
};

// Everything selection looks at, so that it is a pure function tests can drive.
struct SelectionInput {
  // Environment variables; only kAcceleratorEnv and kDeepSpeedAcceleratorEnv are read. Empty
  // values count as unset.
  std::map<std::string, std::string> env;
  CudaStatus cuda;
  std::vector<std::string> extensions;  // names registered with registerAccelerator()
};

// STRETCH_ACCELERATOR wins over DS_ACCELERATOR; values are case-insensitive. Throws ConfigError
// naming the variable, the value and the accepted names for an unknown value, and for "cuda"
// when CUDA support was not built or no device is visible (with the reason).
AcceleratorChoice selectAccelerator(const SelectionInput& input);

// The process environment's STRETCH_ACCELERATOR and DS_ACCELERATOR, as selectAccelerator reads.
std::map<std::string, std::string> acceleratorEnvironment();

// ---- The process-wide accelerator ---------------------------------------------------------

using AcceleratorFactory = std::function<std::shared_ptr<Accelerator>()>;

// Makes `name` a value STRETCH_ACCELERATOR accepts (DeepSpeed's accelerator extensions).
// Registering "cpu" or "cuda" replaces the built-in. Thread-safe.
void registerAccelerator(const std::string& name, AcceleratorFactory factory);
std::vector<std::string> registeredAccelerators();
// A new accelerator named `name`: the registered factory, else the built-in "cpu" or "cuda".
// Throws ConfigError for a name that is neither (e.g. "cuda" in a build without CUDA).
std::shared_ptr<Accelerator> createAccelerator(const std::string& name);

// The accelerator of this process: the one setAccelerator() installed, else the one
// selectAccelerator() picks from the process environment, created on first use and cached.
// Thread-safe. Throws ConfigError when the environment names an unknown or unusable one (the
// next call tries again).
std::shared_ptr<Accelerator> getAccelerator();
// How getAccelerator() chose the current accelerator (selects one if none is chosen yet).
AcceleratorChoice acceleratorChoice();
// Installs `accelerator` for the whole process (DeepSpeed's set_accelerator). nullptr forgets
// the current one so that the next getAccelerator() selects again. Thread-safe.
void setAccelerator(std::shared_ptr<Accelerator> accelerator);

}  // namespace stretch::accel
