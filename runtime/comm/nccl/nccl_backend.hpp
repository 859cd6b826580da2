#pragma once
// NCCL collectives on CUDA buffers (c10d's ProcessGroupNCCL, without tensors). This header
// carries no NCCL or CUDA types so that executables can name the backend without those headers.
//
// How it works:
//  - Rank 0 creates an NCCL unique id and publishes it in the Store under "nccl/unique_id"
//    (hex text); the other ranks wait for it within BackendInit::timeout. The Store must be
//    prefixed per group and per generation (initDistributed and ProcessGroup do this), or a rank
//    may pick up a stale id.
//  - The communicator is created non-blocking (ncclCommInitRankConfig, blocking = 0) on device
//    cuda:<localRank> and polled with ncclCommGetAsyncError, so initialisation, like every
//    operation, fails with CommTimeoutError instead of hanging when a peer never arrives.
//  - Every operation is enqueued on the backend's one CUDA stream, in issue order; its Work is a
//    CUDA event recorded after it. The stream is an ordinary (blocking) stream, so it waits for
//    work the caller queued on the legacy default stream; work on the caller's own non-blocking
//    streams must be synchronised by the caller before issuing.
//  - Work::wait polls the event, ncclCommGetAsyncError and the timeout. A timeout or an
//    asynchronous NCCL error aborts the communicator (ncclCommAbort): that Work and every later
//    one fail with CommTimeoutError, CommPeerError (ncclRemoteError: a peer died or the network
//    failed) or CommError, naming the operation, the rank and NCCL's own message. An aborted
//    backend cannot be used again; build a new one (an elastic restart does).
//  - Live recovery's comm::Communicator over the same communicator (nccl_communicator.hpp)
//    shares this state: once it revokes, pending and later Works fail with CommPeerError quoting
//    the reason, and its abort() is abort() here.
//  - Destruction destroys the communicator cleanly when all its work has finished and aborts it
//    otherwise, so it never waits on a dead peer.
//  - Buffers must be CUDA memory on this backend's device (BufferView::device cuda or
//    cuda:<localRank>); host buffers throw CommUnsupportedError (use Gloo for those).
//  - send/recv ignore the tag: NCCL pairs a send with the peer's recv in issue order, as c10d's
//    NCCL backend does. Sending to oneself is rejected (Backend::checkPeer).
//  - createSubgroup builds a new communicator from a new unique id under the sub-group's store
//    prefix (every member calls it, non-members do not: ncclCommSplit would need all ranks).
//
// Thread safety: issue operations from one thread at a time (Backend's contract); Works may be
// polled and waited for from any thread. The CUDA device current on the issuing thread is
// restored after each call.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/comm/backend.hpp"
#include "runtime/comm/backend_registry.hpp"

namespace stretch::comm::nccl {

// The Store key rank 0 publishes the unique id under (relative to the backend's store).
inline constexpr std::string_view kUniqueIdKey = "nccl/unique_id";

class NcclBackend final : public Backend {
 public:
  // Collective: every rank of the group constructs its backend. Blocks until the communicator is
  // ready. Throws CommError when cuda:<init.localRank> does not exist (naming the devices that
  // are visible and why none are), CommTimeoutError when the unique id or the peers do not
  // arrive within init.timeout, CommError for other NCCL or CUDA failures.
  explicit NcclBackend(const BackendInit& init);
  ~NcclBackend() override;
  NcclBackend(const NcclBackend&) = delete;
  NcclBackend& operator=(const NcclBackend&) = delete;

  std::string_view name() const noexcept override { return "nccl"; }
  int rank() const noexcept override;
  int size() const noexcept override;
  Duration defaultTimeout() const noexcept override;
  bool supportsDevice(DeviceType type) const noexcept override { return type == DeviceType::Cuda; }

  // The CUDA device index this backend's buffers live on (init.localRank).
  int device() const noexcept;
  // The cudaStream_t every operation is enqueued on, as void* (no CUDA types in this header).
  void* stream() const noexcept;
  // True once a timeout, an NCCL error or abort() has aborted the communicator.
  bool isAborted() const;
  // Aborts the communicator now (ncclCommAbort): pending Works fail with CommError quoting
  // `reason`, later operations throw. For an elastic restart that must not wait for dead peers.
  void abort(std::string_view reason = "aborted by the caller");

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

  std::shared_ptr<Backend> createSubgroup(const std::vector<int>& ranks,
                                          const std::string& groupName) override;

  // Communicator, stream and abort state, shared with the Works and with the comm::Communicator
  // over the same ncclComm_t. Defined in nccl_state.hpp, which only this module includes.
  struct State;
  // Over a communicator that is already initialised (nccl_communicator.cpp: live recovery's
  // generations, shrunk and grown communicators), sharing its state. Such a backend has no
  // store, so createSubgroup throws.
  explicit NcclBackend(std::shared_ptr<State> state);
  const std::shared_ptr<State>& state() const noexcept { return state_; }

 private:
  void checkDeviceBuffer(OpType op, const BufferView& buffer, std::string_view role) const;

  BackendInit init_;
  std::shared_ptr<State> state_;
};

// Registers "nccl" (DeviceType::Cuda) with comm::registerBackend. Idempotent.
void registerNcclBackend();

// The loaded libnccl's version ("2.28.9", from ncclGetVersion) and the one of the headers this
// module was compiled against.
std::string ncclVersion();
std::string ncclBuildVersion();

}  // namespace stretch::comm::nccl
