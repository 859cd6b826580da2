#include "runtime/engine/device_staging.hpp"

#include <cstdlib>
#include <string>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "runtime/comm/backend_registry.hpp"
#include "runtime/common/environment.hpp"
#include "runtime/common/error.hpp"

namespace stretch::engine {

TorchDeviceStaging::TorchDeviceStaging(std::shared_ptr<accel::Accelerator> accelerator,
                                       torch::DeviceType memory)
    : accelerator_(std::move(accelerator)), memory_(memory) {
  if (!accelerator_)
    throw InternalError("TorchDeviceStaging: no accelerator");
}

void* TorchDeviceStaging::allocateHost(std::size_t bytes) {
  return accelerator_->allocatePinned(bytes);
}

void TorchDeviceStaging::freeHost(void* host, std::size_t) noexcept {
  accelerator_->freePinned(host);
}

torch::Tensor TorchDeviceStaging::deviceBytes(const comm::BufferView& view) const {
  const auto device =
      memory_ == torch::kCPU || view.device.index < 0
          ? torch::Device(memory_)
          : torch::Device(memory_, static_cast<c10::DeviceIndex>(view.device.index));
  return torch::from_blob(view.data, {static_cast<std::int64_t>(view.bytes())},
                          torch::TensorOptions().dtype(torch::kUInt8).device(device));
}

void TorchDeviceStaging::toHost(void* host, const comm::BufferView& from) {
  auto target = torch::from_blob(host, {static_cast<std::int64_t>(from.bytes())}, torch::kUInt8);
  target.copy_(deviceBytes(from));
}

void TorchDeviceStaging::toDevice(const comm::BufferView& to, const void* host) {
  auto source = torch::from_blob(const_cast<void*>(host), {static_cast<std::int64_t>(to.bytes())},
                                 torch::kUInt8);
  deviceBytes(to).copy_(source);
}

JobComm jobCommunication() {
  const auto accelerator = accel::getAccelerator();
  comm::CommChoiceInput input;
  const bool cuda = accelerator->deviceType() == "cuda";
  input.device = cuda ? comm::DeviceType::Cuda : comm::DeviceType::Cpu;
  input.devicesVisible = cuda ? accelerator->deviceCount() : 0;
  // Ranks as initDistributed will find them (the launcher's variables, OpenMPI's or PMI's).
  const comm::DistributedEnv ranks =
      comm::discoverEnvironment(comm::InitOptions{}, comm::processEnvironment());
  input.worldSize = ranks.worldSize;
  input.localRanks = static_cast<int>(integerVariable(
      "LOCAL_WORLD_SIZE", integerVariable("OMPI_COMM_WORLD_LOCAL_SIZE", ranks.worldSize, 1), 1));
  for (const comm::BackendInfo& info : comm::registeredBackends())
    input.built.push_back(info.name);
  if (const char* chosen = std::getenv(std::string(comm::kCommBackendEnv).c_str()))
    input.override = chosen;

  JobComm job;
  job.choice = comm::chooseCommBackend(input);
  job.device.backend = job.choice.deviceBackend;
  // NCCL unless forced: staging stays ready for a group whose ranks turn out to share a device
  // (several local "nodes" on one machine; comm::anyDeviceShared decides when it is built).
  if (job.choice.staged || (!job.device.backend.empty() && !job.choice.forced))
    job.device.staging = std::make_shared<TorchDeviceStaging>(accelerator);
  if (cuda) {
    const int device = ranks.localRank % input.devicesVisible;
    accelerator->setDevice(device);
    if (!job.device.backend.empty())
      job.device.identity = accelerator->deviceProperties(device).uuid;
  }
  if (ranks.rank == 0)
    spdlog::info("{}", job.choice.summary);
  return job;
}

}  // namespace stretch::engine
