#include "runtime/comm/nccl/nccl_backend.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cuda_runtime_api.h>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nccl.h>

#include "runtime/accel/accelerator.hpp"
#include "runtime/comm/errors.hpp"
#include "runtime/comm/nccl/nccl_communicator.hpp"
#include "runtime/comm/nccl/nccl_state.hpp"
#include "runtime/comm/store.hpp"

// Non-blocking init (ncclCommInitRankConfig), ncclCommFinalize and ncclGetLastError.
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "the NCCL backend needs NCCL 2.14 or newer"
#endif

namespace stretch::comm::nccl {

using detail::checkCuda;
using detail::Clock;
using detail::cudaText;
using detail::DeviceGuard;
using detail::ncclException;
using detail::pause;

// ---- Helpers shared with nccl_communicator.cpp (nccl_state.hpp) ---------------------------

namespace detail {

std::string cudaText(cudaError_t error) {
  return fmt::format("{} ({})", cudaGetErrorString(error), cudaGetErrorName(error));
}

void checkCuda(cudaError_t error, std::string_view context, std::string_view call) {
  if (error != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    throw CommError(fmt::format("{}: {} failed: {}", context, call, cudaText(error)));
  }
}

std::exception_ptr ncclException(ncclResult_t result, std::string_view context,
                                 std::string_view lastError, std::string_view suffix) {
  std::string message = fmt::format("{}: NCCL error: {} ({})", context, ncclGetErrorString(result),
                                    static_cast<int>(result));
  if (!lastError.empty())
    message += fmt::format(": {}", lastError);
  message += suffix;
  if (result == ncclRemoteError)
    return std::make_exception_ptr(CommPeerError(message));
  return std::make_exception_ptr(CommError(message));
}

std::string uniqueIdText(const ncclUniqueId& id) {
  static constexpr char kDigits[] = "0123456789abcdef";
  const auto* in = reinterpret_cast<const unsigned char*>(id.internal);
  std::string out;
  out.reserve(sizeof(id.internal) * 2);
  for (std::size_t i = 0; i < sizeof(id.internal); ++i) {
    out.push_back(kDigits[in[i] >> 4]);
    out.push_back(kDigits[in[i] & 0xf]);
  }
  return out;
}

bool parseUniqueId(std::string_view text, ncclUniqueId& id) {
  if (text.size() != sizeof(id.internal) * 2)
    return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    return -1;
  };
  auto* out = reinterpret_cast<unsigned char*>(id.internal);
  for (std::size_t i = 0; i < sizeof(id.internal); ++i) {
    const int hi = nibble(text[2 * i]);
    const int lo = nibble(text[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return false;
    out[i] = static_cast<unsigned char>(hi * 16 + lo);
  }
  return true;
}

void requireDevice(int device, std::string_view context, std::string_view who) {
  const accel::CudaStatus cuda = accel::cudaStatus();
  if (device < 0 || device >= cuda.deviceCount) {
    throw CommError(fmt::format(
        "{}: {} needs device cuda:{}, but {} CUDA device{} visible{}", context, who, device,
        cuda.deviceCount, cuda.deviceCount == 1 ? " is" : "s are",
        cuda.unavailableReason.empty() ? std::string() : " (" + cuda.unavailableReason + ")"));
  }
}

void pause(int& polls) {
  if (++polls < 200)
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(100));
}

}  // namespace detail

namespace {

ncclDataType_t toNccl(DataType dtype) {
  switch (dtype) {
    case DataType::Float32:
      return ncclFloat32;
    case DataType::Float16:
      return ncclFloat16;
    case DataType::BFloat16:
      return ncclBfloat16;
    case DataType::Float64:
      return ncclFloat64;
    case DataType::Int32:
      return ncclInt32;
    case DataType::Int64:
      return ncclInt64;
    case DataType::UInt8:
      return ncclUint8;
  }
  throw CommError(
      fmt::format("nccl: data type {} has no NCCL equivalent", static_cast<int>(dtype)));
}

ncclRedOp_t toNccl(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return ncclSum;
    case ReduceOp::Avg:
      return ncclAvg;
    case ReduceOp::Min:
      return ncclMin;
    case ReduceOp::Max:
      return ncclMax;
    case ReduceOp::Product:
      return ncclProd;
  }
  throw CommError(fmt::format("nccl: reduce op {} has no NCCL equivalent", static_cast<int>(op)));
}

// Polls ncclCommGetAsyncError until it leaves ncclInProgress or `deadline` passes; returns the
// last state (ncclInProgress on timeout).
ncclResult_t waitQuiescent(ncclComm_t comm, Clock::time_point deadline) {
  ncclResult_t async = ncclInProgress;
  int polls = 0;
  while (ncclCommGetAsyncError(comm, &async) == ncclSuccess && async == ncclInProgress &&
         Clock::now() < deadline) {
    pause(polls);
  }
  return async;
}

}  // namespace

// ---- State: the communicator and its stream, shared by the backend and its Works ----------

NcclBackend::State::~State() {
  {
    const std::lock_guard lock(mutex);
    if (comm != nullptr && !aborted)
      releaseLocked();
  }
  if (scratch != nullptr)
    static_cast<void>(cudaFree(scratch));
  if (stream != nullptr)
    static_cast<void>(cudaStreamDestroy(stream));
}

void NcclBackend::State::createStream() {
  checkCuda(cudaStreamCreate(&stream), label, "cudaStreamCreate");
  checkCuda(cudaMalloc(&scratch, sizeof(std::int32_t)), label, "cudaMalloc(4 bytes)");
  checkCuda(cudaMemset(scratch, 0, sizeof(std::int32_t)), label, "cudaMemset");
}

void NcclBackend::State::releaseLocked() noexcept {
  constexpr Duration kReleaseTimeout = std::chrono::seconds(10);
  if (comm == nullptr)
    return;
  int previous = device;
  static_cast<void>(cudaGetDevice(&previous));
  static_cast<void>(cudaSetDevice(device));
  const auto deadline = Clock::now() + std::min(timeout, kReleaseTimeout);
  bool clean = false;
  if (abortInsteadOfDestroy) {
    clean = false;  // ncclCommDestroy of the parent of an abortive shrink hangs on 2.31+
  } else if (ncclRevoked) {
    // After ncclCommRevoke, finalize is invalid: destroy once the revoke has quiesced.
    clean = waitQuiescent(comm, deadline) == ncclSuccess;
  } else {
    // Work still queued would keep a flush waiting on a peer that may have gone.
    const bool idle = cudaStreamQuery(stream) == cudaSuccess;
    static_cast<void>(cudaGetLastError());
    const ncclResult_t result = idle && !revoked ? ncclCommFinalize(comm) : ncclInvalidUsage;
    if (result == ncclSuccess || result == ncclInProgress)
      clean = waitQuiescent(comm, deadline) == ncclSuccess;
  }
  if (clean)
    static_cast<void>(ncclCommDestroy(comm));
  else
    static_cast<void>(ncclCommAbort(comm));
  comm = nullptr;
  static_cast<void>(cudaSetDevice(previous));
}

void NcclBackend::State::destroy() {
  const std::lock_guard lock(mutex);
  if (aborted || destroyed)
    return;
  releaseLocked();
  destroyed = true;
}

void NcclBackend::State::abort(const std::string& reason) {
  const std::lock_guard lock(mutex);
  abortLocked(reason);
}

void NcclBackend::State::abortLocked(const std::string& reason) {
  if (aborted)
    return;
  aborted = true;
  abortReason = reason;
  if (comm != nullptr) {
    static_cast<void>(ncclCommAbort(comm));
    comm = nullptr;
  }
}

bool NcclBackend::State::isAborted() const {
  const std::lock_guard lock(mutex);
  return aborted;
}

std::optional<ncclResult_t> NcclBackend::State::asyncError(std::string* lastError) const {
  const std::lock_guard lock(mutex);
  if (aborted || comm == nullptr)
    return std::nullopt;
  ncclResult_t async = ncclSuccess;
  const ncclResult_t result = ncclCommGetAsyncError(comm, &async);
  const ncclResult_t effective = result != ncclSuccess ? result : async;
  if (lastError != nullptr && effective != ncclSuccess && effective != ncclInProgress)
    *lastError = ncclGetLastError(comm);
  return effective;
}

std::exception_ptr NcclBackend::State::abortedException(std::string_view what) const {
  const std::lock_guard lock(mutex);
  if (destroyed && !aborted) {
    return std::make_exception_ptr(
        CommError(fmt::format("{}: the NCCL communicator was destroyed earlier", what)));
  }
  return std::make_exception_ptr(CommError(
      fmt::format("{}: the NCCL communicator was aborted earlier ({})", what, abortReason)));
}

std::exception_ptr NcclBackend::State::revokedException(std::string_view what) const {
  const std::lock_guard lock(mutex);
  if (!revoked)
    return nullptr;
  return std::make_exception_ptr(
      CommPeerError(fmt::format("{}: the NCCL communicator was revoked: {}", what, revokeReason)));
}

void NcclBackend::State::waitReady(Clock::time_point deadline, Duration limit,
                                   std::string_view what, std::string_view hint,
                                   const Interrupt* interrupt) {
  int polls = 0;
  while (true) {
    if (auto error = revokedException(what))
      std::rethrow_exception(error);
    std::string lastError;
    const auto async = asyncError(&lastError);
    if (!async)
      std::rethrow_exception(abortedException(what));
    if (*async == ncclSuccess)
      return;
    if (*async != ncclInProgress) {
      const auto error = ncclException(*async, what, lastError, "; communicator aborted");
      abort(fmt::format("NCCL error {} during {}", ncclGetErrorString(*async), what));
      std::rethrow_exception(error);
    }
    if (Clock::now() >= deadline) {
      const std::string message =
          fmt::format("{} did not complete within {}{}; NCCL communicator aborted", what,
                      formatDuration(limit), hint);
      abort(message);
      throw CommTimeoutError(message);
    }
    if (interrupt != nullptr && *interrupt && (*interrupt)()) {
      const std::string message =
          fmt::format("{} was interrupted by its caller; NCCL communicator aborted", what);
      abort(message);
      throw CommAbortedError(message);
    }
    if (interrupt != nullptr)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    else
      pause(polls);
  }
}

namespace {

// The Work of one NCCL operation: a CUDA event recorded on the backend's stream after it.
class NcclWork final : public Work {
 public:
  NcclWork(OpType op, Duration timeout, std::string description,
           std::shared_ptr<NcclBackend::State> state, cudaEvent_t event)
      : Work(op, timeout, std::move(description)), state_(std::move(state)), event_(event) {}

  ~NcclWork() override { static_cast<void>(cudaEventDestroy(event_)); }

  bool isCompleted() override {
    const std::lock_guard lock(mutex_);
    return pollLocked();
  }

  void wait(std::optional<Duration> timeout) override {
    const Duration limit = timeout.value_or(this->timeout());
    const auto deadline = Clock::now() + limit;
    int polls = 0;
    std::unique_lock lock(mutex_);
    while (!pollLocked()) {
      if (Clock::now() >= deadline) {
        const std::string message =
            fmt::format("{} did not complete within {}; NCCL communicator aborted", description(),
                        formatDuration(limit));
        state_->abort(message);
        error_ = std::make_exception_ptr(CommTimeoutError(message));
        completed_ = true;
        break;
      }
      lock.unlock();
      pause(polls);
      lock.lock();
    }
    if (error_)
      std::rethrow_exception(error_);
  }

  std::exception_ptr exception() override {
    const std::lock_guard lock(mutex_);
    pollLocked();
    return error_;
  }

 private:
  // One look at the event and the communicator; true once finished (well or not).
  bool pollLocked() {
    if (completed_)
      return true;
    // Revoked (live recovery gave up on a peer): fail even when the event completed, since a
    // revoke ends the kernels early and leaves the buffer's contents undefined.
    if (auto revoked = state_->revokedException(description())) {
      fail(std::move(revoked));
      return true;
    }
    const cudaError_t query = cudaEventQuery(event_);
    if (query == cudaSuccess) {
      completed_ = true;
      return true;
    }
    if (query != cudaErrorNotReady) {
      static_cast<void>(cudaGetLastError());
      const std::string message =
          fmt::format("{}: CUDA error while waiting: {}; NCCL communicator aborted", description(),
                      cudaText(query));
      state_->abort(message);
      fail(std::make_exception_ptr(CommError(message)));
      return true;
    }
    std::string lastError;
    const auto async = state_->asyncError(&lastError);
    if (!async) {
      fail(state_->abortedException(description()));
      return true;
    }
    if (*async != ncclSuccess && *async != ncclInProgress) {
      fail(ncclException(*async, description(), lastError, "; communicator aborted"));
      state_->abort(
          fmt::format("NCCL error {} during {}", ncclGetErrorString(*async), description()));
      return true;
    }
    return false;
  }

  void fail(std::exception_ptr error) {
    error_ = std::move(error);
    completed_ = true;
  }

  std::shared_ptr<NcclBackend::State> state_;
  cudaEvent_t event_;
  std::mutex mutex_;
  bool completed_ = false;
  std::exception_ptr error_;
};

// Enqueues one NCCL call (or group) on the backend's stream and returns its Work.
template <typename Launch>
std::shared_ptr<Work> enqueue(NcclBackend::State& state,
                              const std::shared_ptr<NcclBackend::State>& shared, OpType op,
                              Duration timeout, const std::string& what, Launch&& launch) {
  const DeviceGuard guard(state.device, what);
  const auto deadline = Clock::now() + timeout;
  {
    std::unique_lock lock(state.mutex);
    if (state.aborted || state.comm == nullptr) {
      lock.unlock();
      std::rethrow_exception(state.abortedException(what));
    }
    if (state.revoked) {
      lock.unlock();
      std::rethrow_exception(state.revokedException(what));
    }
    const ncclResult_t result = launch(state.comm, state.stream);
    if (result != ncclSuccess && result != ncclInProgress) {
      const std::string lastError = ncclGetLastError(state.comm);
      const auto error = ncclException(result, what, lastError, "; communicator aborted");
      state.abortLocked(fmt::format("NCCL error {} issuing {}", ncclGetErrorString(result), what));
      std::rethrow_exception(error);
    }
  }
  // A non-blocking communicator may still be enqueueing (connecting peers): the event must be
  // recorded after the kernels are on the stream.
  state.waitReady(deadline, timeout, what);
  cudaEvent_t event = nullptr;
  checkCuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), what, "cudaEventCreate");
  const cudaError_t recorded = cudaEventRecord(event, state.stream);
  if (recorded != cudaSuccess) {
    static_cast<void>(cudaEventDestroy(event));
    checkCuda(recorded, what, "cudaEventRecord");
  }
  return std::make_shared<NcclWork>(op, timeout, what, shared, event);
}

}  // namespace

// ---- NcclBackend --------------------------------------------------------------------------

NcclBackend::NcclBackend(const BackendInit& init) : init_(init), state_(std::make_shared<State>()) {
  State& s = *state_;
  s.rank = init.rank;
  s.size = init.size;
  s.device = init.localRank;
  s.timeout = init.timeout;
  s.label = fmt::format("nccl rank {} of {} (cuda:{}, group {})", init.rank, init.size,
                        init.localRank, init.groupName);
  if (init.size < 1 || init.rank < 0 || init.rank >= init.size) {
    throw CommError(
        fmt::format("{}: rank = {}: expected a rank in [0, {})", s.label, init.rank, init.size));
  }
  if (!init.store)
    throw CommError(fmt::format("{}: no store to exchange the NCCL unique id through", s.label));

  detail::requireDevice(init.localRank, s.label, fmt::format("local rank {}", init.localRank));

  const DeviceGuard guard(s.device, s.label);
  s.createStream();

  const auto deadline = Clock::now() + init.timeout;
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  const std::string key(kUniqueIdKey);
  if (init.rank == 0) {
    const ncclResult_t result = ncclGetUniqueId(&id);
    if (result != ncclSuccess) {
      std::rethrow_exception(ncclException(result, fmt::format("{}: ncclGetUniqueId", s.label),
                                           ncclGetLastError(nullptr)));
    }
    init.store->set(key, detail::uniqueIdText(id));
  } else {
    try {
      init.store->wait({key}, init.timeout);
    } catch (const StoreTimeoutError& e) {
      throw CommTimeoutError(
          fmt::format("{}: rank 0 did not publish the NCCL unique id within {}: {}", s.label,
                      formatDuration(init.timeout), e.what()));
    }
    const std::string text = init.store->get(key);
    if (!detail::parseUniqueId(text, id)) {
      throw CommError(fmt::format(
          "{}: store key {} holds {} bytes: expected {} hex digits of an NCCL unique id", s.label,
          key, text.size(), 2 * sizeof(id.internal)));
    }
  }

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t result = ncclCommInitRankConfig(&s.comm, init.size, id, init.rank, &config);
  if (result != ncclSuccess && result != ncclInProgress) {
    const std::string lastError = ncclGetLastError(s.comm);
    if (s.comm != nullptr) {
      static_cast<void>(ncclCommAbort(s.comm));
      s.comm = nullptr;
    }
    std::rethrow_exception(
        ncclException(result, fmt::format("{}: ncclCommInitRankConfig", s.label), lastError));
  }
  s.waitReady(deadline, init.timeout, fmt::format("{}: communicator initialisation", s.label),
              fmt::format(" (are all {} ranks running?)", init.size));
}

NcclBackend::NcclBackend(std::shared_ptr<State> state) : state_(std::move(state)) {
  init_.rank = state_->rank;
  init_.size = state_->size;
  init_.timeout = state_->timeout;
  init_.localRank = state_->device;
  init_.groupName = "communicator";
}

NcclBackend::~NcclBackend() = default;

int NcclBackend::rank() const noexcept {
  return state_->rank;
}
int NcclBackend::size() const noexcept {
  return state_->size;
}
Duration NcclBackend::defaultTimeout() const noexcept {
  return state_->timeout;
}
int NcclBackend::device() const noexcept {
  return state_->device;
}
void* NcclBackend::stream() const noexcept {
  return state_->stream;
}
bool NcclBackend::isAborted() const {
  return state_->isAborted();
}
void NcclBackend::abort(std::string_view reason) {
  state_->abort(fmt::format("{}: {}", state_->label, reason));
}

void NcclBackend::checkDeviceBuffer(OpType op, const BufferView& buffer,
                                    std::string_view role) const {
  checkBuffer(op, buffer, role);
  if (buffer.device.index >= 0 && buffer.device.index != state_->device) {
    throw CommError(fmt::format("{}: {} buffer is on {}: expected cuda:{} (this rank's device)",
                                describe(op, &buffer), role, buffer.device.toString(),
                                state_->device));
  }
  if (buffer.count == 0)
    return;
  cudaPointerAttributes attrs{};
  const cudaError_t error = cudaPointerGetAttributes(&attrs, buffer.data);
  if (error != cudaSuccess)
    static_cast<void>(cudaGetLastError());
  if (error != cudaSuccess ||
      (attrs.type != cudaMemoryTypeDevice && attrs.type != cudaMemoryTypeManaged)) {
    throw CommError(fmt::format(
        "{}: {} buffer at {} is host memory although its view says {}: expected device memory",
        describe(op, &buffer), role, buffer.data, buffer.device.toString()));
  }
}

std::shared_ptr<Work> NcclBackend::allReduce(BufferView buffer, ReduceOp op,
                                             const CollectiveOptions& options) {
  checkDeviceBuffer(OpType::AllReduce, buffer, "in-place");
  const std::string what = describe(OpType::AllReduce, &buffer);
  if (buffer.count == 0)
    return completedWork(OpType::AllReduce, what);
  const ncclDataType_t dtype = toNccl(buffer.dtype);
  const ncclRedOp_t redOp = toNccl(op);
  return enqueue(*state_, state_, OpType::AllReduce, timeoutOf(options), what,
                 [&](ncclComm_t comm, cudaStream_t stream) {
                   return ncclAllReduce(buffer.data, buffer.data, buffer.count, dtype, redOp, comm,
                                        stream);
                 });
}

std::shared_ptr<Work> NcclBackend::broadcast(BufferView buffer, int root,
                                             const CollectiveOptions& options) {
  checkDeviceBuffer(OpType::Broadcast, buffer, "in-place");
  checkRoot(OpType::Broadcast, root);
  const std::string what = describe(OpType::Broadcast, &buffer);
  if (buffer.count == 0)
    return completedWork(OpType::Broadcast, what);
  const ncclDataType_t dtype = toNccl(buffer.dtype);
  return enqueue(*state_, state_, OpType::Broadcast, timeoutOf(options), what,
                 [&](ncclComm_t comm, cudaStream_t stream) {
                   return ncclBroadcast(buffer.data, buffer.data, buffer.count, dtype, root, comm,
                                        stream);
                 });
}

std::shared_ptr<Work> NcclBackend::allGather(BufferView input, BufferView output,
                                             const CollectiveOptions& options) {
  checkAllGather(input, output);
  checkDeviceBuffer(OpType::AllGather, input, "input");
  checkDeviceBuffer(OpType::AllGather, output, "output");
  const std::string what = describe(OpType::AllGather, &input);
  if (input.count == 0)
    return completedWork(OpType::AllGather, what);
  const ncclDataType_t dtype = toNccl(input.dtype);
  return enqueue(*state_, state_, OpType::AllGather, timeoutOf(options), what,
                 [&](ncclComm_t comm, cudaStream_t stream) {
                   return ncclAllGather(input.data, output.data, input.count, dtype, comm, stream);
                 });
}

std::shared_ptr<Work> NcclBackend::reduceScatter(BufferView input, BufferView output, ReduceOp op,
                                                 const CollectiveOptions& options) {
  checkReduceScatter(input, output);
  checkDeviceBuffer(OpType::ReduceScatter, input, "input");
  checkDeviceBuffer(OpType::ReduceScatter, output, "output");
  const std::string what = describe(OpType::ReduceScatter, &input);
  if (output.count == 0)
    return completedWork(OpType::ReduceScatter, what);
  const ncclDataType_t dtype = toNccl(input.dtype);
  const ncclRedOp_t redOp = toNccl(op);
  return enqueue(*state_, state_, OpType::ReduceScatter, timeoutOf(options), what,
                 [&](ncclComm_t comm, cudaStream_t stream) {
                   return ncclReduceScatter(input.data, output.data, output.count, dtype, redOp,
                                            comm, stream);
                 });
}

std::shared_ptr<Work> NcclBackend::allToAll(BufferView input, BufferView output,
                                            const CollectiveOptions& options) {
  checkAllToAll(input, output);
  checkDeviceBuffer(OpType::AllToAll, input, "input");
  checkDeviceBuffer(OpType::AllToAll, output, "output");
  const std::string what = describe(OpType::AllToAll, &input);
  if (input.count == 0)
    return completedWork(OpType::AllToAll, what);
  const ncclDataType_t dtype = toNccl(input.dtype);
  const std::size_t block = input.count / static_cast<std::size_t>(size());
  const std::size_t blockBytes = block * elementSize(input.dtype);
  return enqueue(*state_, state_, OpType::AllToAll, timeoutOf(options), what,
                 [&](ncclComm_t comm, cudaStream_t stream) {
                   ncclResult_t result = ncclGroupStart();
                   for (int peer = 0; peer < size() && result == ncclSuccess; ++peer) {
                     const std::size_t offset = static_cast<std::size_t>(peer) * blockBytes;
                     result = ncclSend(static_cast<const char*>(input.data) + offset, block, dtype,
                                       peer, comm, stream);
                     if (result == ncclSuccess) {
                       result = ncclRecv(static_cast<char*>(output.data) + offset, block, dtype,
                                         peer, comm, stream);
                     }
                   }
                   // The group must be closed even when a call inside it failed.
                   const ncclResult_t ended = ncclGroupEnd();
                   return result != ncclSuccess ? result : ended;
                 });
}

std::shared_ptr<Work> NcclBackend::send(BufferView buffer, int peer, int /*tag*/,
                                        const CollectiveOptions& options) {
  checkDeviceBuffer(OpType::Send, buffer, "send");
  checkPeer(OpType::Send, peer);
  const std::string what = describe(OpType::Send, &buffer);
  if (buffer.count == 0)
    return completedWork(OpType::Send, what);
  const ncclDataType_t dtype = toNccl(buffer.dtype);
  return enqueue(*state_, state_, OpType::Send, timeoutOf(options), what,
                 [&](ncclComm_t comm, cudaStream_t stream) {
                   return ncclSend(buffer.data, buffer.count, dtype, peer, comm, stream);
                 });
}

std::shared_ptr<Work> NcclBackend::recv(BufferView buffer, int peer, int /*tag*/,
                                        const CollectiveOptions& options) {
  checkDeviceBuffer(OpType::Recv, buffer, "receive");
  checkPeer(OpType::Recv, peer);
  const std::string what = describe(OpType::Recv, &buffer);
  if (buffer.count == 0)
    return completedWork(OpType::Recv, what);
  const ncclDataType_t dtype = toNccl(buffer.dtype);
  return enqueue(*state_, state_, OpType::Recv, timeoutOf(options), what,
                 [&](ncclComm_t comm, cudaStream_t stream) {
                   return ncclRecv(buffer.data, buffer.count, dtype, peer, comm, stream);
                 });
}

std::shared_ptr<Work> NcclBackend::barrier(const CollectiveOptions& options) {
  const std::string what = describe(OpType::Barrier);
  void* scratch = state_->scratch;
  return enqueue(*state_, state_, OpType::Barrier, timeoutOf(options), what,
                 [&](ncclComm_t comm, cudaStream_t stream) {
                   return ncclAllReduce(scratch, scratch, 1, ncclInt32, ncclSum, comm, stream);
                 });
}

std::shared_ptr<Backend> NcclBackend::createSubgroup(const std::vector<int>& ranks,
                                                     const std::string& groupName) {
  const auto self = std::find(ranks.begin(), ranks.end(), rank());
  const bool sorted = std::adjacent_find(ranks.begin(), ranks.end(),
                                         [](int a, int b) { return a >= b; }) == ranks.end();
  const bool inRange =
      std::all_of(ranks.begin(), ranks.end(), [&](int r) { return r >= 0 && r < size(); });
  if (ranks.empty() || !sorted || !inRange || self == ranks.end()) {
    throw CommError(fmt::format(
        "{}: sub-group {} ranks = [{}]: expected ascending ranks in [0, {}) including {}",
        state_->label, groupName, fmt::join(ranks, ", "), size(), rank()));
  }
  if (isAborted()) {
    std::rethrow_exception(
        state_->abortedException(fmt::format("{}: sub-group {}", state_->label, groupName)));
  }
  BackendInit sub = init_;
  sub.store = std::make_shared<PrefixStore>("nccl_group/" + groupName, init_.store);
  sub.rank = static_cast<int>(self - ranks.begin());
  sub.size = static_cast<int>(ranks.size());
  sub.groupName = groupName;
  return std::make_shared<NcclBackend>(sub);
}

// ---- Registration and versions ------------------------------------------------------------

std::string ncclVersion() {
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess)
    return "unknown";
  // Since 2.9 the code is major * 10000 + minor * 100 + patch.
  return fmt::format("{}.{}.{}", code / 10000, (code % 10000) / 100, code % 100);
}

std::string ncclBuildVersion() {
  return fmt::format("{}.{}.{}", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
}

void registerNcclBackend() {
  const accel::CudaStatus cuda = accel::cudaStatus();
  registerBackend({"nccl", DeviceType::Cuda,
                   fmt::format("NCCL {} (CUDA runtime {})", ncclVersion(),
                               cuda.runtimeVersion.empty() ? "unknown" : cuda.runtimeVersion)},
                  [](const BackendInit& init) { return std::make_shared<NcclBackend>(init); });
  // Live recovery's communicators (generations over NCCL), for the device current on the thread
  // that first asks for the library.
  registerCommunicatorLibrary("nccl", [] { return makeNcclLibrary(); });
}

}  // namespace stretch::comm::nccl
