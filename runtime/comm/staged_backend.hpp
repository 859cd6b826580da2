#pragma once
// StagedBackend: a host backend (Gloo) serving another device's buffers by staging them through
// page-locked host memory, the way PyTorch's Gloo process group accepts CUDA tensors. It is what
// carries a CUDA job's gradients when its ranks share a device or the build has no NCCL
// (runtime/comm/backend_choice.hpp). Each operation copies its input to a host buffer (after the
// work already queued on the device), runs the host backend's operation on host buffers, and
// copies the result back when the Work completes (wait(), or isCompleted() turning true), so
// the caller's contract is the host backend's. Host buffers come from a pool kept per backend
// and reused across operations of the same size (the engine's gradient buckets).
//
// The device copies and the pinned memory come from a DeviceStaging: the engine's over LibTorch
// and the accelerator (runtime/engine/device_staging.hpp); tests use one whose "device" memory
// is host memory.

#include <cstddef>
#include <memory>
#include <string>

#include "runtime/comm/backend.hpp"

namespace stretch::comm {

class DeviceStaging {
 public:
  virtual ~DeviceStaging();
  // The device type whose buffers it moves (DeviceType::Cuda).
  virtual DeviceType device() const noexcept = 0;
  // Page-locked host memory of `bytes` (> 0); freeHost releases it. May throw.
  virtual void* allocateHost(std::size_t bytes) = 0;
  virtual void freeHost(void* host, std::size_t bytes) noexcept = 0;
  // Copies `from` (on device()) into `host`, after the work queued on its device before the
  // call; returns when the bytes are in host memory.
  virtual void toHost(void* host, const BufferView& from) = 0;
  // Copies `host` into `to` (on device()); returns when work queued on the device after the call
  // sees the new bytes.
  virtual void toDevice(const BufferView& to, const void* host) = 0;
};

class StagedBackend final : public Backend {
 public:
  StagedBackend(std::shared_ptr<Backend> host, std::shared_ptr<DeviceStaging> staging);
  ~StagedBackend() override;

  // "gloo staged".
  std::string_view name() const noexcept override { return name_; }
  int rank() const noexcept override { return host_->rank(); }
  int size() const noexcept override { return host_->size(); }
  Duration defaultTimeout() const noexcept override { return host_->defaultTimeout(); }
  bool supportsDevice(DeviceType type) const noexcept override;

  std::shared_ptr<Work> allReduce(BufferView buffer, ReduceOp op,
                                  const CollectiveOptions& options = {}) override;
  std::shared_ptr<Work> broadcast(BufferView buffer, int root,
                                  const CollectiveOptions& options = {}) override;
  std::shared_ptr<Work> allGather(BufferView input, BufferView output,
                                  const CollectiveOptions& options = {}) override;
  std::shared_ptr<Work> reduceScatter(BufferView input, BufferView output, ReduceOp op,
                                      const CollectiveOptions& options = {}) override;
  std::shared_ptr<Work> allToAll(BufferView input, BufferView output,
                                 const CollectiveOptions& options = {}) override;
  std::shared_ptr<Work> send(BufferView buffer, int peer, int tag = 0,
                             const CollectiveOptions& options = {}) override;
  std::shared_ptr<Work> recv(BufferView buffer, int peer, int tag = 0,
                             const CollectiveOptions& options = {}) override;
  std::shared_ptr<Work> barrier(const CollectiveOptions& options = {}) override;
  void abort(std::string_view reason) override;
  // The host backend's subgroup, staged the same way. ProcessGroup::newGroup uses withHost()
  // instead when the group's CPU backend is this backend's host, so that one host subgroup
  // serves both device types.
  std::shared_ptr<Backend> createSubgroup(const std::vector<int>& ranks,
                                          const std::string& groupName) override;

  const std::shared_ptr<Backend>& host() const noexcept { return host_; }
  // A backend over `host` (a subgroup of this one's host) staging through the same pool.
  std::shared_ptr<StagedBackend> withHost(std::shared_ptr<Backend> host) const;

  // Host buffers the pool holds now (free and lent), for tests and the memory report.
  std::size_t pooledBytes() const;

  class Pool;

 private:
  StagedBackend(std::shared_ptr<Backend> host, std::shared_ptr<DeviceStaging> staging,
                std::shared_ptr<Pool> pool);
  // CommError unless `buffer` (and `output`, when given) is on the staged device or empty.
  void checkDevice(OpType op, const BufferView& buffer, std::string_view role,
                   const BufferView* output = nullptr) const;

  std::shared_ptr<Backend> host_;
  std::shared_ptr<DeviceStaging> staging_;
  std::shared_ptr<Pool> pool_;
  std::string name_;
};

}  // namespace stretch::comm
