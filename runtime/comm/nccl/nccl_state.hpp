#pragma once
// Internal to runtime/comm/nccl: the communicator state NcclBackend shares with its Works and
// with the comm::Communicator over the same ncclComm_t (nccl_communicator.cpp), and the helpers
// both .cpp files use. It includes NCCL and CUDA headers, so only this module's .cpp files
// include it; the public headers stay free of those types.

#include <chrono>
#include <cuda_runtime_api.h>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include <nccl.h>

#include "runtime/accel/cuda_device_guard.hpp"
#include "runtime/comm/communicator.hpp"
#include "runtime/comm/nccl/nccl_backend.hpp"

namespace stretch::comm::nccl {

namespace detail {

using Clock = std::chrono::steady_clock;

// "invalid argument (cudaErrorInvalidValue)".
std::string cudaText(cudaError_t error);
// Throws CommError "<context>: <call> failed: <cuda text>" unless `error` is cudaSuccess.
void checkCuda(cudaError_t error, std::string_view context, std::string_view call);

// Makes `device` current for the calling thread until scope exit; failures throw CommError
// naming `context`.
class DeviceGuard : public accel::CudaDeviceGuard {
 public:
  DeviceGuard(int device, std::string_view context)
      : CudaDeviceGuard(device, [context](cudaError_t error, std::string_view call) {
          checkCuda(error, context, call);
        }) {}
};

// "<context>: NCCL error: unhandled system error (2): <last error><suffix>", CommPeerError for
// ncclRemoteError (a peer died or the network failed), CommError otherwise.
std::exception_ptr ncclException(ncclResult_t result, std::string_view context,
                                 std::string_view lastError, std::string_view suffix = {});

// An ncclUniqueId as the hex text that travels through a Store, and back (false when `text`
// is not 2 * sizeof(ncclUniqueId) lowercase hex digits).
std::string uniqueIdText(const ncclUniqueId& id);
bool parseUniqueId(std::string_view text, ncclUniqueId& id);

// Throws CommError "<context>: <who> needs device cuda:<device>, but N CUDA devices are
// visible (why none are)" unless the device exists.
void requireDevice(int device, std::string_view context, std::string_view who);

// Spins briefly, then sleeps: completion usually comes within microseconds, timeouts in seconds.
void pause(int& polls);

}  // namespace detail

// The communicator and its stream, shared by the backend, its Works and the Communicator.
// Every member is guarded by `mutex` once the state is shared (ncclCommAbort must not race with
// another call on the communicator).
struct NcclBackend::State {
  int rank = 0;
  int size = 1;
  int device = 0;
  Duration timeout = kDefaultTimeout;
  std::string label;  // "nccl rank 0 of 2 (cuda:0, group default)"

  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  void* scratch = nullptr;  // one int32 on the device for barrier()

  mutable std::mutex mutex;
  bool aborted = false;
  std::string abortReason;
  bool destroyed = false;  // ncclCommDestroy ran (Communicator::destroy)
  // revoke(): pending and later Works fail with CommPeerError quoting revokeReason.
  // ncclRevoked: ncclCommRevoke was called, so the device work stopped and NCCL's own state goes
  // through ncclInProgress to ncclSuccess when quiescent (ncclCommFinalize is then invalid).
  bool revoked = false;
  bool ncclRevoked = false;
  std::string revokeReason;
  // The parent of an abortive shrink on NCCL 2.31+: ncclCommDestroy would hang, so release
  // aborts it instead.
  bool abortInsteadOfDestroy = false;

  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State();

  // The stream every operation is enqueued on and barrier's scratch word, on `device` (current).
  void createStream();

  // Frees the communicator without waiting on a dead peer: ncclCommDestroy after it has
  // quiesced (ncclCommFinalize, or a revoke that completed), ncclCommAbort when work is still
  // queued or it does not quiesce within min(timeout, 10 s). Caller holds `mutex`.
  void releaseLocked() noexcept;
  // Communicator::destroy: releaseLocked once; later operations throw.
  void destroy();

  // Aborts the communicator once; later calls keep the first reason.
  void abort(const std::string& reason);
  void abortLocked(const std::string& reason);
  bool isAborted() const;

  // Marks the state revoked (first reason kept) and, when `callNccl`, calls ncclCommRevoke
  // (whose failure is appended to the reason: the device work then stays queued).
  void revoke(const std::string& reason, bool callNccl);

  // ncclCommGetAsyncError, or nullopt once aborted or destroyed (the comm is gone). Also
  // returns NCCL's last error text while the comm is still alive.
  std::optional<ncclResult_t> asyncError(std::string* lastError) const;

  // "<what>: the NCCL communicator was aborted earlier (<reason>)" (or destroyed).
  std::exception_ptr abortedException(std::string_view what) const;
  // CommPeerError "<what>: the NCCL communicator was revoked: <reason>", or nullptr when it
  // was not revoked.
  std::exception_ptr revokedException(std::string_view what) const;

  // Waits until a non-blocking call's ncclInProgress has resolved. Throws (after aborting the
  // communicator) on an NCCL error or when `deadline` passes, CommPeerError once revoked. With
  // an `interrupt` (management calls: init, shrink, grow) it polls every millisecond and an
  // interrupt aborts the communicator and throws CommAbortedError.
  void waitReady(detail::Clock::time_point deadline, Duration limit, std::string_view what,
                 std::string_view hint = {}, const Interrupt* interrupt = nullptr);
};

}  // namespace stretch::comm::nccl
