#include "runtime/comm/nccl/nccl_communicator.hpp"

#include <algorithm>
#include <chrono>
#include <cuda_runtime_api.h>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nccl.h>

#include "runtime/comm/errors.hpp"
#include "runtime/comm/nccl/nccl_backend.hpp"
#include "runtime/comm/nccl/nccl_state.hpp"

// The entry points newer than the oldest NCCL this module builds against are weak references:
// a loaded libnccl older than the headers (2.27 under 2.28 headers) leaves them null, and
// features() reports them absent, instead of the module failing to load.
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
#pragma weak ncclCommShrink
#endif
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
#pragma weak ncclCommRevoke
#endif
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 0)
#pragma weak ncclCommGrow
#pragma weak ncclCommGetUniqueId
#endif

namespace stretch::comm::nccl {

using State = NcclBackend::State;
using detail::Clock;
using detail::DeviceGuard;
using detail::ncclException;

// ---- State::revoke (here because ncclCommRevoke is version-gated) -------------------------

void NcclBackend::State::revoke(const std::string& reason, bool callNccl) {
  const std::lock_guard lock(mutex);
  if (revoked)
    return;
  revoked = true;
  revokeReason = reason;
  if (!callNccl || aborted || comm == nullptr)
    return;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
  if (ncclCommRevoke == nullptr)
    return;
  int previous = device;
  static_cast<void>(cudaGetDevice(&previous));
  static_cast<void>(cudaSetDevice(device));
  const ncclResult_t result = ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT);
  static_cast<void>(cudaSetDevice(previous));
  if (result == ncclSuccess || result == ncclInProgress) {
    ncclRevoked = true;
  } else {
    revokeReason +=
        fmt::format(" (ncclCommRevoke failed: {} ({}): {}; device work stays queued)",
                    ncclGetErrorString(result), static_cast<int>(result), ncclGetLastError(comm));
  }
#endif
}

namespace {

CommunicatorFeatures loadedFeatures() {
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess)
    code = 0;
  // Since 2.9 the code is major * 10000 + minor * 100 + patch.
  CommunicatorFeatures features = ncclFeatures(code / 10000, (code % 10000) / 100, code % 100);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
  features.shrink = features.shrink && ncclCommShrink != nullptr;
#else
  features.shrink = false;
#endif
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
  features.revoke = features.revoke && ncclCommRevoke != nullptr;
#else
  features.revoke = false;
#endif
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 0)
  features.grow = features.grow && ncclCommGrow != nullptr && ncclCommGetUniqueId != nullptr;
#else
  features.grow = false;
#endif
  return features;
}

// CommUnsupportedError "<context>: <call> needs NCCL <since>: ..." naming both versions.
[[noreturn]] void unsupported(std::string_view context, std::string_view call,
                              std::string_view since, const CommunicatorFeatures& features) {
  throw CommUnsupportedError(
      fmt::format("{}: {} needs NCCL {}; this module was built against NCCL {} headers and the "
                  "loaded library is NCCL {}",
                  context, call, since, ncclBuildVersion(), features.version()));
}

// What a management call that creates a communicator (init, shrink, grow, join) makes.
struct Creation {
  int device = 0;
  int rank = 0;
  int size = 1;
  std::string how;   // "init", "shrunk from 4 ranks": in the new communicator's label
  std::string call;  // "ncclCommShrink": in error messages
  std::string hint;  // appended to a timeout's message
  Clock::time_point deadline;
  Duration timeout{};

  std::string label() const {
    return fmt::format("nccl communicator rank {} of {} (cuda:{}, {})", rank, size, device, how);
  }
};

// After a non-blocking call that creates `state.comm` returned `result`: throws when it failed
// at once, else waits until the new communicator is ready (aborting it on timeout, interrupt or
// error) and checks that NCCL gave it the rank and size expected.
void finishCreate(State& state, ncclResult_t result, const Creation& creation,
                  const Interrupt& interrupt) {
  const std::string what = fmt::format("{}: {}", state.label, creation.call);
  if (result != ncclSuccess && result != ncclInProgress) {
    const std::string lastError = ncclGetLastError(state.comm);
    state.abort(fmt::format("{} failed", creation.call));
    std::rethrow_exception(ncclException(result, what, lastError));
  }
  if (state.comm == nullptr)
    throw CommError(fmt::format("{} returned no communicator", what));
  state.waitReady(creation.deadline, creation.timeout, what, creation.hint, &interrupt);
  int rank = -1;
  int size = -1;
  const std::lock_guard lock(state.mutex);
  if (ncclCommUserRank(state.comm, &rank) != ncclSuccess ||
      ncclCommCount(state.comm, &size) != ncclSuccess || rank != state.rank || size != state.size) {
    // Ranks that disagree (different excluded lists, sizes) would deadlock the first collective.
    state.abortLocked(fmt::format("{}: wrong shape", creation.call));
    throw CommError(fmt::format(
        "{}: NCCL made rank {} of {}: expected rank {} of {} (do all ranks pass the same "
        "arguments?); communicator aborted",
        what, rank, size, state.rank, state.size));
  }
}

// A new communicator's state, ready: its device current, its stream made,
// `start(&comm, &config)` begins NCCL's non-blocking creation (config.blocking = 0), then
// finishCreate waits for it.
template <typename Start>
std::shared_ptr<State> create(const Creation& creation, const Interrupt& interrupt, Start&& start) {
  const std::string label = creation.label();
  const DeviceGuard guard(creation.device, label);
  auto state = std::make_shared<State>();
  state->rank = creation.rank;
  state->size = creation.size;
  state->device = creation.device;
  state->timeout = creation.timeout;
  state->label = label;
  state->createStream();
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t result = start(&state->comm, &config);
  finishCreate(*state, result, creation, interrupt);
  return state;
}

// The id `text` (a unique id, or a grow id) as NCCL's, once the device is known to exist: the
// checks init and join make before NCCL sees anything.
ncclUniqueId checkedId(const Creation& creation, const std::string& text, std::string_view what) {
  ncclUniqueId id{};
  if (!detail::parseUniqueId(text, id)) {
    throw CommError(
        fmt::format("{}: {} has {} characters: expected {} hex digits of an "
                    "ncclUniqueId",
                    creation.label(), what, text.size(), 2 * sizeof(id.internal)));
  }
  detail::requireDevice(creation.device, creation.label(), "the communicator");
  return id;
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::shared_ptr<State> state, CommunicatorFeatures features,
                   std::shared_ptr<NcclBackend> backend = nullptr)
      : state_(std::move(state)),
        features_(std::move(features)),
        backend_(backend ? std::move(backend) : std::make_shared<NcclBackend>(state_)) {}

  int rank() const noexcept override { return state_->rank; }
  int size() const noexcept override { return state_->size; }
  std::shared_ptr<Backend> backend() override { return backend_; }
  bool aborted() const override { return state_->isAborted(); }

  std::optional<std::string> asyncError() override {
    const std::lock_guard lock(state_->mutex);
    if (state_->aborted)
      return fmt::format("{}: aborted: {}", state_->label, state_->abortReason);
    if (state_->comm == nullptr)
      return std::nullopt;  // destroyed cleanly
    ncclResult_t async = ncclSuccess;
    const ncclResult_t result = ncclCommGetAsyncError(state_->comm, &async);
    const ncclResult_t effective = result != ncclSuccess ? result : async;
    if (effective == ncclSuccess || effective == ncclInProgress)
      return std::nullopt;
    return fmt::format("{}: {} ({}): {}", state_->label, ncclGetErrorString(effective),
                       static_cast<int>(effective), ncclGetLastError(state_->comm));
  }

  void revoke(std::string_view reason) override {
    state_->revoke(std::string(reason), features_.revoke);
  }

  void abort(std::string_view reason) override {
    state_->abort(fmt::format("{}: {}", state_->label, reason));
  }

  void destroy() override { state_->destroy(); }

  std::unique_ptr<Communicator> shrink(const std::vector<int>& excluded, bool abortInFlight,
                                       Duration timeout, const Interrupt& interrupt) override {
    const char* call = abortInFlight ? "ncclCommShrink(NCCL_SHRINK_ABORT)" : "ncclCommShrink";
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
    if (!features_.shrink)
      unsupported(state_->label, "ncclCommShrink", "2.27", features_);
    const bool ascending = std::adjacent_find(excluded.begin(), excluded.end(), [](int a, int b) {
                             return a >= b;
                           }) == excluded.end();
    const bool valid = std::all_of(excluded.begin(), excluded.end(),
                                   [&](int r) { return r >= 0 && r < size() && r != rank(); });
    if (!ascending || !valid) {
      throw CommError(
          fmt::format("{}: {} excluding [{}]: expected ascending ranks in [0, {}) other than {}",
                      state_->label, call, fmt::join(excluded, ", "), size(), rank()));
    }
    const auto below =
        std::count_if(excluded.begin(), excluded.end(), [&](int r) { return r < rank(); });
    const int newRank = rank() - static_cast<int>(below);
    const int newSize = size() - static_cast<int>(excluded.size());
    const Creation creation{state_->device,
                            newRank,
                            newSize,
                            fmt::format("shrunk from {} ranks", size()),
                            call,
                            fmt::format(" (are all {} remaining ranks shrinking?)", newSize),
                            Clock::now() + timeout,
                            timeout};
    waitUntilQuiescent(call, creation.deadline, timeout, interrupt);
    auto child = create(creation, interrupt, [&](ncclComm_t* newComm, ncclConfig_t* config) {
      const std::lock_guard lock(state_->mutex);
      throwIfGoneLocked(call);
      std::vector<int> list = excluded;
      int none = -1;  // NCCL may reject a null list even when it is empty
      const ncclResult_t result = ncclCommShrink(
          state_->comm, list.empty() ? &none : list.data(), static_cast<int>(list.size()), newComm,
          config, abortInFlight ? NCCL_SHRINK_ABORT : NCCL_SHRINK_DEFAULT);
      if (abortInFlight && (result == ncclSuccess || result == ncclInProgress)) {
        // The parent's in-flight work was ended: its Works must not report success.
        if (!state_->revoked) {
          state_->revoked = true;
          state_->revokeReason = "in-flight work ended by an abortive shrink";
        }
        state_->abortInsteadOfDestroy = features_.abortParentAfterAbortiveShrink;
      }
      return result;
    });
    return std::make_unique<NcclCommunicator>(std::move(child), features_);
#else
    static_cast<void>(excluded);
    static_cast<void>(timeout);
    static_cast<void>(interrupt);
    unsupported(state_->label, call, "2.27", features_);
#endif
  }

  std::string growId() override {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 0)
    if (!features_.grow)
      unsupported(state_->label, "ncclCommGetUniqueId", "2.29", features_);
    ncclUniqueId id{};
    const std::lock_guard lock(state_->mutex);
    throwIfGoneLocked("ncclCommGetUniqueId");
    const ncclResult_t result = ncclCommGetUniqueId(state_->comm, &id);
    if (result != ncclSuccess) {
      std::rethrow_exception(ncclException(result,
                                           fmt::format("{}: ncclCommGetUniqueId", state_->label),
                                           ncclGetLastError(state_->comm)));
    }
    return detail::uniqueIdText(id);
#else
    unsupported(state_->label, "ncclCommGetUniqueId", "2.29", features_);
#endif
  }

  std::unique_ptr<Communicator> grow(int newSize, const std::optional<std::string>& id,
                                     Duration timeout, const Interrupt& interrupt) override {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 0)
    if (!features_.grow)
      unsupported(state_->label, "ncclCommGrow", "2.29", features_);
    if (newSize <= size()) {
      throw CommError(fmt::format("{}: ncclCommGrow to {} ranks: expected more than {}",
                                  state_->label, newSize, size()));
    }
    ncclUniqueId uid{};
    if (id && !detail::parseUniqueId(*id, uid)) {
      throw CommError(fmt::format("{}: the grow id has {} characters: expected {} hex digits",
                                  state_->label, id->size(), 2 * sizeof(uid.internal)));
    }
    const Creation creation{state_->device,
                            rank(),
                            newSize,
                            fmt::format("grown from {} ranks", size()),
                            "ncclCommGrow",
                            fmt::format(" (are all {} ranks, joiners included, growing?)", newSize),
                            Clock::now() + timeout,
                            timeout};
    waitUntilQuiescent(creation.call, creation.deadline, timeout, interrupt);
    auto child = create(creation, interrupt, [&](ncclComm_t* newComm, ncclConfig_t* config) {
      const std::lock_guard lock(state_->mutex);
      throwIfGoneLocked(creation.call);
      // The rank that made the id passes it; the other existing ranks pass none. Existing
      // ranks keep their rank (-1: NCCL takes it from the parent).
      return ncclCommGrow(state_->comm, newSize, id ? &uid : nullptr, -1, newComm, config);
    });
    return std::make_unique<NcclCommunicator>(std::move(child), features_);
#else
    static_cast<void>(newSize);
    static_cast<void>(id);
    static_cast<void>(timeout);
    static_cast<void>(interrupt);
    unsupported(state_->label, "ncclCommGrow", "2.29", features_);
#endif
  }

 private:
  // CommError once aborted or destroyed. Caller holds the state's mutex.
  void throwIfGoneLocked(std::string_view call) const {
    if (state_->aborted || state_->comm == nullptr) {
      throw CommError(fmt::format("{}: {}: the NCCL communicator was {} earlier{}", state_->label,
                                  call, state_->aborted ? "aborted" : "destroyed",
                                  state_->aborted ? " (" + state_->abortReason + ")" : ""));
    }
  }

  // A communicator revoked through ncclCommRevoke is ncclInProgress until it is quiescent, and
  // only then may a management call (shrink, grow) use it (nccl.h on ncclCommRevoke). The
  // parent is left as it was when this times out or is interrupted.
  void waitUntilQuiescent(std::string_view call, Clock::time_point deadline, Duration timeout,
                          const Interrupt& interrupt) {
    while (true) {
      {
        const std::lock_guard lock(state_->mutex);
        if (!state_->ncclRevoked || state_->aborted || state_->comm == nullptr)
          return;
        ncclResult_t async = ncclSuccess;
        if (ncclCommGetAsyncError(state_->comm, &async) != ncclSuccess || async != ncclInProgress) {
          return;  // quiescent, or failed: the shrink itself reports what NCCL says
        }
      }
      if (Clock::now() >= deadline) {
        throw CommTimeoutError(
            fmt::format("{}: {}: the revoked communicator did not become quiescent within {}",
                        state_->label, call, formatDuration(timeout)));
      }
      if (interrupt && interrupt()) {
        throw CommAbortedError(
            fmt::format("{}: {}: interrupted by its caller while the revoked communicator quiesced",
                        state_->label, call));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  std::shared_ptr<State> state_;
  CommunicatorFeatures features_;
  std::shared_ptr<NcclBackend> backend_;
};

class NcclLibrary final : public CommunicatorLibrary {
 public:
  explicit NcclLibrary(int device) : device_(device), features_(loadedFeatures()) {}

  const CommunicatorFeatures& features() const noexcept override { return features_; }

  std::string uniqueId() override {
    ncclUniqueId id{};
    const ncclResult_t result = ncclGetUniqueId(&id);
    if (result != ncclSuccess) {
      std::rethrow_exception(ncclException(result,
                                           fmt::format("nccl (cuda:{}): ncclGetUniqueId", device_),
                                           ncclGetLastError(nullptr)));
    }
    return detail::uniqueIdText(id);
  }

  std::unique_ptr<Communicator> init(const std::string& id, int rank, int size, Duration timeout,
                                     const Interrupt& interrupt) override {
    const Creation creation{device_,
                            rank,
                            size,
                            "init",
                            "ncclCommInitRankConfig",
                            fmt::format(" (are all {} ranks running?)", size),
                            Clock::now() + timeout,
                            timeout};
    if (size < 1 || rank < 0 || rank >= size)
      throw CommError(fmt::format("{}: expected a rank in [0, {})", creation.label(), size));
    const ncclUniqueId uid = checkedId(creation, id, "the unique id");
    auto state = create(creation, interrupt, [&](ncclComm_t* comm, ncclConfig_t* config) {
      return ncclCommInitRankConfig(comm, size, uid, rank, config);
    });
    return std::make_unique<NcclCommunicator>(std::move(state), features_);
  }

  std::unique_ptr<Communicator> join(const std::string& growId, int rank, int newSize,
                                     Duration timeout, const Interrupt& interrupt) override {
    const Creation creation{
        device_,
        rank,
        newSize,
        "join",
        "ncclCommGrow",
        fmt::format(" (are all {} ranks, the existing ones included, growing?)", newSize),
        Clock::now() + timeout,
        timeout};
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 0)
    if (!features_.grow)
      unsupported(creation.label(), "ncclCommGrow", "2.29", features_);
    if (newSize < 2 || rank < 1 || rank >= newSize) {
      throw CommError(
          fmt::format("{}: expected a joiner's rank in [1, {})", creation.label(), newSize));
    }
    const ncclUniqueId uid = checkedId(creation, growId, "the grow id");
    // A joiner has no parent: it names its rank and the id an existing rank made.
    auto state = create(creation, interrupt, [&](ncclComm_t* comm, ncclConfig_t* config) {
      return ncclCommGrow(nullptr, newSize, &uid, rank, comm, config);
    });
    return std::make_unique<NcclCommunicator>(std::move(state), features_);
#else
    static_cast<void>(growId);
    static_cast<void>(timeout);
    static_cast<void>(interrupt);
    unsupported(creation.label(), "ncclCommGrow", "2.29", features_);
#endif
  }

  std::shared_ptr<Communicator> adopt(const std::shared_ptr<Backend>& backend) override {
    auto nccl = std::dynamic_pointer_cast<NcclBackend>(backend);
    if (!nccl)
      return nullptr;
    return std::make_shared<NcclCommunicator>(nccl->state(), features_, nccl);
  }

 private:
  int device_;
  CommunicatorFeatures features_;
};

}  // namespace

std::shared_ptr<CommunicatorLibrary> makeNcclLibrary(int device) {
  return std::make_shared<NcclLibrary>(device);
}

std::shared_ptr<CommunicatorLibrary> makeNcclLibrary() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    device = 0;  // no CUDA: init names what is visible
  }
  return makeNcclLibrary(device);
}

}  // namespace stretch::comm::nccl
