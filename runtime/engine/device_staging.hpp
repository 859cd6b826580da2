#pragma once
// How a job's ranks talk on this machine, for the engine's jobs (docs/comm.md, "Choosing the
// backend"): comm::chooseCommBackend over the accelerator, the launcher's variables, this
// build's backends and STRETCH_COMM_BACKEND; the device this rank trains on; and, when CUDA
// buffers are staged through host memory, the comm::DeviceStaging that moves them (pinned
// memory from the accelerator, copies by LibTorch on the device's current stream).

#include <memory>

#include <torch/types.h>

#include "runtime/accel/accelerator.hpp"
#include "runtime/comm/backend_choice.hpp"
#include "runtime/comm/init_distributed.hpp"
#include "runtime/comm/staged_backend.hpp"

namespace stretch::engine {

class TorchDeviceStaging final : public comm::DeviceStaging {
 public:
  // `memory` is where the buffers of device() really are: kCUDA, or kCPU in tests, whose
  // "CUDA" buffers are host memory.
  explicit TorchDeviceStaging(std::shared_ptr<accel::Accelerator> accelerator,
                              torch::DeviceType memory = torch::kCUDA);

  comm::DeviceType device() const noexcept override { return comm::DeviceType::Cuda; }
  void* allocateHost(std::size_t bytes) override;
  void freeHost(void* host, std::size_t bytes) noexcept override;
  // Through LibTorch's copy_, which orders the copy after the work queued on the device's
  // current stream and returns once it is done.
  void toHost(void* host, const comm::BufferView& from) override;
  void toDevice(const comm::BufferView& to, const void* host) override;

 private:
  torch::Tensor deviceBytes(const comm::BufferView& view) const;

  std::shared_ptr<accel::Accelerator> accelerator_;
  torch::DeviceType memory_;
};

struct JobComm {
  comm::CommChoice choice;
  comm::DeviceComm device;  // for comm::InitOptions::device and LiveRecovery
};

// The ranks as initDistributed discovers them (launcher, OpenMPI or PMI variables),
// LOCAL_WORLD_SIZE (or OMPI_COMM_WORLD_LOCAL_SIZE), the process accelerator, the registered
// backends and STRETCH_COMM_BACKEND, through comm::chooseCommBackend. On CUDA it also makes
// cuda:(local rank mod devices) this thread's current device, where the engine puts the model.
// Rank 0 logs the choice's summary. Throws ConfigError (from the choice, or a variable that is
// not a number) and DistributedInitError (ranks that cannot be discovered).
JobComm jobCommunication();

}  // namespace stretch::engine
