#pragma once
// The Gloo backend's private parts, shared by its two files (private to runtime/comm/gloo):
// gloo_backend.cpp (construction, rendezvous, the public operations) and gloo_backend_worker.cpp
// (the worker, the point-to-point waiters, the Channel over Gloo's unbound buffers, error
// translation). Holds the shared Gloo I/O thread, the per-operation tracker and
// GlooBackend::Impl, the state shared by the backend object, its worker and its waiters.

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <sys/eventfd.h>
#include <thread>
#include <unistd.h>
#include <unordered_set>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gloo/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/tcp/loop.h>
#include <gloo/transport/unbound_buffer.h>

#include "runtime/comm/collectives/channel.hpp"
#include "runtime/comm/errors.hpp"
#include "runtime/comm/gloo/gloo_backend.hpp"
#include "runtime/comm/store.hpp"
#include "runtime/comm/work.hpp"

namespace stretch::comm::gloo {
namespace detail {

using Clock = std::chrono::steady_clock;
using GlooBuffer = ::gloo::transport::UnboundBuffer;
using GlooBufferPtr = std::unique_ptr<GlooBuffer>;

// Slots: 8 bits of prefix above Gloo's own (0x01..0x08), then per-operation bits. Collectives:
// 48-bit operation sequence number and 8 bits for the messages of one operation. Point to
// point: 32-bit tag, 16-bit message number per (peer, tag) and 8 bits for the message's parts.
inline constexpr std::uint64_t kCollectivePrefix = 0x53;
inline constexpr std::uint64_t kPointToPointPrefix = 0x54;

// tcp::Pair::waitUntil's factor on the context timeout for the initial connect.
inline constexpr int kGlooConnectTimeoutFactor = 5;

// With two ranks and small messages, posting from the worker beats a hand-off to the I/O thread.
inline constexpr std::size_t kInlinePostBytes = std::size_t{64} << 10;

// At least 1 ms, so that a wait at the deadline still polls once.
std::chrono::milliseconds remainingUntil(Clock::time_point deadline);

// Gloo's message without its "[file:line] " prefix.
std::string glooMessage(const std::exception& e);

// Turns whatever an operation threw into the comm error tree, naming the operation.
std::exception_ptr translateError(std::exception_ptr error, const std::string& what,
                                  Duration timeout);

// The error's what(), or "unknown error".
std::string messageOf(const std::exception_ptr& error);

// A Gloo TCP device and a way to run closures on its I/O (epoll loop) thread. Gloo's I/O thread
// only try-locks a connection and spins until it gets it, so a worker posting sends while
// data arrives on the same connection can stall both for a scheduler time slice when cores are
// scarce; posting from the I/O thread itself never contends.
class IoThread final : public ::gloo::transport::tcp::Handler {
 public:
  explicit IoThread(std::shared_ptr<::gloo::transport::Device> device)
      : device_(std::move(device)), fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (fd_ < 0) {
      throw CommError(
          fmt::format("gloo: cannot create the I/O thread's eventfd: {}", std::strerror(errno)));
    }
    tcpDevice().registerDescriptor(fd_, EPOLLIN, this);
  }

  ~IoThread() override {
    tcpDevice().unregisterDescriptor(fd_, this);
    ::close(fd_);
  }

  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;

  std::shared_ptr<::gloo::transport::Device>& device() noexcept { return device_; }

  // Runs `fn` on the I/O thread soon, in posting order. `fn` must not throw.
  void post(std::function<void()> fn) {
    bool wake;
    {
      std::lock_guard lock(mutex_);
      wake = queue_.empty();
      queue_.push_back(std::move(fn));
    }
    if (wake) {
      const std::uint64_t one = 1;
      while (::write(fd_, &one, sizeof(one)) < 0 && errno == EINTR) {
      }
    }
  }

  void handleEvents(int /*events*/) override {
    std::uint64_t count = 0;
    while (::read(fd_, &count, sizeof(count)) < 0 && errno == EINTR) {
    }
    std::vector<std::function<void()>> batch;
    {
      std::lock_guard lock(mutex_);
      batch.swap(queue_);
    }
    for (auto& fn : batch)
      fn();
  }

 private:
  ::gloo::transport::tcp::Device& tcpDevice() {
    return static_cast<::gloo::transport::tcp::Device&>(*device_);
  }

  std::shared_ptr<::gloo::transport::Device> device_;
  int fd_;
  std::mutex mutex_;
  std::vector<std::function<void()>> queue_;
};

// The closures one operation posted to the I/O thread and the buffers it waits on, so that a
// failed or aborted operation neither leaves a closure behind that would touch its buffers nor
// waits forever: abort() makes the next wait on each buffer return at once.
class OpTracker {
 public:
  void beginPost() {
    std::lock_guard lock(mutex_);
    ++pendingPosts_;
  }
  void endPost() {
    std::lock_guard lock(mutex_);
    --pendingPosts_;
    if (pendingPosts_ == 0)
      drained_.notify_all();
  }
  // True when posting should be skipped (the operation was aborted or already failed).
  bool cancelled() {
    std::lock_guard lock(mutex_);
    return cancelled_;
  }
  void add(GlooBuffer* buffer) {
    std::lock_guard lock(mutex_);
    buffers_.push_back(buffer);
    if (error_) {
      buffer->abortWaitRecv();
      buffer->abortWaitSend();
    }
  }
  // Records the first error and wakes every wait of the operation.
  void abort(std::exception_ptr error) {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
    if (!error_)
      error_ = std::move(error);
    for (auto* buffer : buffers_) {
      buffer->abortWaitRecv();
      buffer->abortWaitSend();
    }
  }
  std::exception_ptr error() {
    std::lock_guard lock(mutex_);
    return error_;
  }
  // Waits until no closure of this operation is queued or running (after abort(), queued ones
  // skip their Gloo calls).
  void waitForPosts() {
    std::unique_lock lock(mutex_);
    drained_.wait(lock, [&] { return pendingPosts_ == 0; });
  }
  // Stops further posting and waits until no closure of this operation is queued or running;
  // afterwards the buffers may be destroyed.
  void finish() {
    std::unique_lock lock(mutex_);
    cancelled_ = true;
    drained_.wait(lock, [&] { return pendingPosts_ == 0; });
    buffers_.clear();
  }

 private:
  std::mutex mutex_;
  std::condition_variable drained_;
  int pendingPosts_ = 0;
  bool cancelled_ = false;
  std::exception_ptr error_;
  std::vector<GlooBuffer*> buffers_;
};

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Backend state shared by the backend object, its worker and its point-to-point waiters.

struct GlooBackend::Impl {
  using Clock = detail::Clock;
  using GlooBufferPtr = detail::GlooBufferPtr;
  using IoThread = detail::IoThread;
  using OpTracker = detail::OpTracker;

  struct Task {
    OpType op;
    std::string description;
    Duration timeout;
    std::size_t bytes;
    std::shared_ptr<CompletionWork> work;
    std::function<void(collectives::Channel&)> body;
  };

  struct PeerTask {
    OpType op;  // Send or Recv
    std::string description;
    Duration timeout;
    Clock::time_point deadline;
    int peer;
    std::uint64_t slot;
    std::size_t bytes;
    std::shared_ptr<CompletionWork> work;
    OpTracker tracker;
    std::uint64_t localWord = 0;   // this side's byte count (recv: capacity; send: length)
    std::uint64_t remoteWord = 0;  // the peer's
    GlooBufferPtr payload;
    GlooBufferPtr localHeader;
    GlooBufferPtr remoteHeader;
  };

  std::shared_ptr<IoThread> io;
  std::shared_ptr<::gloo::Context> context;
  std::shared_ptr<comm::Store> store;  // the group's store, as given
  int rank = 0;
  int size = 1;
  Duration timeout = kDefaultTimeout;
  std::string groupName;
  std::string host;

  // Worker: collectives in issue order.
  std::mutex queueMutex;
  std::condition_variable queueWake;
  std::deque<Task> queue;
  bool stopping = false;
  std::thread worker;
  std::uint64_t sequence = 0;      // worker only
  std::vector<std::byte> scratch;  // worker only

  // Point to point: message numbers per (peer, tag) and one waiting thread per pending message.
  std::mutex peerMutex;
  std::map<std::pair<int, int>, std::uint16_t> sendNumbers;
  std::map<std::pair<int, int>, std::uint16_t> recvNumbers;
  std::condition_variable waiterWake;
  std::deque<std::shared_ptr<PeerTask>> waiterQueue;
  std::vector<std::thread> waiters;
  int idleWaiters = 0;
  bool waitersStopping = false;

  // Broken state and the operations running now (to abort them on destruction).
  mutable std::mutex stateMutex;
  bool broken = false;
  bool closing = false;
  std::string brokenReason;
  std::unordered_set<OpTracker*> active;

  ~Impl() { shutdown(); }

  void start() {
    worker = std::thread([this] { workerLoop(); });
  }

  bool isBroken() const {
    std::lock_guard lock(stateMutex);
    return broken;
  }

  std::exception_ptr brokenError(const std::string& what) const {
    std::lock_guard lock(stateMutex);
    return std::make_exception_ptr(CommError(fmt::format(
        "{}: the backend is unusable after an earlier failure: {}", what, brokenReason)));
  }

  // Marks the backend broken after a failed operation and closes its connections, so that the
  // peers fail fast instead of waiting for their timeouts and no stale message lands anywhere.
  void breakWith(const std::exception_ptr& error) {
    {
      std::lock_guard lock(stateMutex);
      if (broken || closing)
        return;
      broken = true;
      brokenReason = detail::messageOf(error);
      // This side's pending operations fail now: closing the connections wakes only waits on
      // a peer's closing, so a point-to-point message posted before the failure (a live-recovery
      // partition copy) would otherwise wait out its whole timeout. Their posts drain first: a
      // post inside Gloo on a pair that is being closed would deadlock with the close, which
      // holds the pair and waits for the I/O thread.
      for (auto* tracker : active)
        tracker->abort(error);
      for (auto* tracker : active)
        tracker->waitForPosts();
    }
    // Called from the worker or a point-to-point waiter, never from Gloo's I/O thread: closing
    // a pair there leaves its already-polled events to be dispatched to the closed pair, which
    // Gloo answers with an uncaught enforce failure (std::terminate). From any other thread
    // Gloo waits for a loop tick per pair (at most ~10 ms each), only on this failure path.
    try {
      context->closeConnections();
    } catch (...) {
    }
  }

  // Registers a running operation; false when the backend is broken or being destroyed.
  bool enter(OpTracker* tracker) {
    std::lock_guard lock(stateMutex);
    if (closing || broken)
      return false;
    active.insert(tracker);
    return true;
  }
  void leave(OpTracker* tracker) {
    std::lock_guard lock(stateMutex);
    active.erase(tracker);
  }

  std::exception_ptr destroyedError(const std::string& what) const {
    return std::make_exception_ptr(CommError(
        fmt::format("{}: the backend was destroyed before the operation completed", what)));
  }
  // Why enter() refused an operation.
  std::exception_ptr refusedError(const std::string& what) const {
    return isBroken() ? brokenError(what) : destroyedError(what);
  }

  std::shared_ptr<Work> enqueue(Task task) {
    auto work = task.work;
    if (isBroken()) {
      work->markFailed(brokenError(task.description));
      return work;
    }
    {
      std::lock_guard lock(queueMutex);
      queue.push_back(std::move(task));
    }
    queueWake.notify_one();
    return work;
  }

  void workerLoop();
  void runTask(Task& task);

  std::shared_ptr<Work> pointToPoint(OpType op, BufferView buffer, int peer, int tag,
                                     Duration opTimeout, std::string description);
  void waiterLoop();
  void runPeerTask(PeerTask& task);

  void shutdown();
};

}  // namespace stretch::comm::gloo
