#include "runtime/comm/gloo/gloo_backend.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <thread>
#include <unistd.h>
#include <unordered_set>
#include <utility>

#include <fmt/format.h>
#include <gloo/common/error.h>
#include <gloo/config.h>
#include <gloo/context.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/device.h>
#include <gloo/transport/tcp/attr.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/tcp/loop.h>
#include <gloo/transport/unbound_buffer.h>

#include "runtime/comm/collectives/algorithms.hpp"
#include "runtime/comm/errors.hpp"
#include "runtime/comm/store.hpp"
#include "runtime/comm/work.hpp"

namespace stretch::comm::gloo {
namespace {

using Clock = std::chrono::steady_clock;
using GlooBuffer = ::gloo::transport::UnboundBuffer;
using GlooBufferPtr = std::unique_ptr<GlooBuffer>;

// Slots: 8 bits of prefix above Gloo's own (0x01..0x08), then per-operation bits. Collectives:
// 48-bit operation sequence number and 8 bits for the messages of one operation. Point to
// point: 32-bit tag, 16-bit message number per (peer, tag) and 8 bits for the message's parts.
constexpr std::uint64_t kCollectivePrefix = 0x53;
constexpr std::uint64_t kPointToPointPrefix = 0x54;

// tcp::Pair::waitUntil's factor on the context timeout for the initial connect.
constexpr int kGlooConnectTimeoutFactor = 5;

// With two ranks and small messages, posting from the worker beats a hand-off to the I/O thread.
constexpr std::size_t kInlinePostBytes = std::size_t{64} << 10;

std::chrono::milliseconds remainingUntil(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

// Gloo prefixes messages with "[file:line] ".
std::string glooMessage(const std::exception& e) {
  std::string text = e.what();
  if (!text.empty() && text.front() == '[') {
    const auto end = text.find("] ");
    if (end != std::string::npos)
      text.erase(0, end + 2);
  }
  return text;
}

bool mentionsTimeout(const std::string& text) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower.find("timed out") != std::string::npos || lower.find("timeout") != std::string::npos;
}

// Turns whatever an operation threw into the comm error tree, naming the operation.
std::exception_ptr translateError(std::exception_ptr error, const std::string& what,
                                  Duration timeout) {
  try {
    std::rethrow_exception(error);
  } catch (const CommError&) {
    return std::current_exception();
  } catch (const ::gloo::IoException& e) {
    const std::string text = glooMessage(e);
    if (mentionsTimeout(text)) {
      return std::make_exception_ptr(CommTimeoutError(fmt::format(
          "{}: no progress within the timeout of {} ({})", what, formatDuration(timeout), text)));
    }
    return std::make_exception_ptr(
        CommPeerError(fmt::format("{}: connection to a peer failed: {}", what, text)));
  } catch (const ::gloo::Exception& e) {
    return std::make_exception_ptr(CommError(fmt::format("{}: gloo: {}", what, glooMessage(e))));
  } catch (const std::exception& e) {
    return std::make_exception_ptr(CommError(fmt::format("{}: {}", what, e.what())));
  } catch (...) {
    return std::make_exception_ptr(CommError(fmt::format("{}: unknown error", what)));
  }
}

std::string messageOf(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

// Gloo writes to sockets with plain write(2): a write to a peer that died raises SIGPIPE, whose
// default action kills the process (Python ignores SIGPIPE, which is why PyTorch users never see
// this). Every thread that may write through Gloo blocks it instead, so the write fails with
// EPIPE and becomes a CommPeerError. Threads inherit the mask, so blocking it around the
// device's creation covers Gloo's own I/O thread.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, &previous_);
  }
  // Restores the mask, first discarding a SIGPIPE raised while blocked (it would kill us on
  // unblocking).
  ~SigpipeBlock() {
    if (sigismember(&previous_, SIGPIPE) == 1)
      return;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    const timespec zero{0, 0};
    while (sigtimedwait(&set, nullptr, &zero) == SIGPIPE) {
    }
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  sigset_t previous_;
};

// For threads Stretch owns: blocked for the thread's whole life.
void blockSigpipeOnThisThread() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

// gloo::rendezvous::Store over a comm::Store; every wait ends at the rendezvous deadline.
class StoreAdapter final : public ::gloo::rendezvous::Store {
 public:
  StoreAdapter(std::shared_ptr<comm::Store> store, Clock::time_point deadline)
      : store_(std::move(store)), deadline_(deadline) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    store_->wait({key}, remainingUntil(deadline_));
    const std::string value = store_->get(key);
    return {value.begin(), value.end()};
  }
  void wait(const std::vector<std::string>& keys) override {
    store_->wait(keys, remainingUntil(deadline_));
  }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    store_->wait(keys, std::min(timeout, remainingUntil(deadline_)));
  }

 private:
  std::shared_ptr<comm::Store> store_;
  Clock::time_point deadline_;
};

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

// One device (one Gloo I/O thread) per host address and process.
std::shared_ptr<IoThread> sharedIoThread(const std::string& host) {
  static std::mutex mutex;
  static std::map<std::string, std::pair<pid_t, std::weak_ptr<IoThread>>> cache;
  std::lock_guard lock(mutex);
  auto& entry = cache[host];
  // A forked child must not use its parent's device: its I/O thread does not exist here.
  if (entry.first == ::getpid()) {
    if (auto existing = entry.second.lock())
      return existing;
  }
  std::shared_ptr<::gloo::transport::Device> device;
  try {
    ::gloo::transport::tcp::attr attr;
    attr.hostname = host;
    const SigpipeBlock noSigpipe;  // inherited by Gloo's I/O thread
    device = ::gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw CommError(
        fmt::format("gloo: cannot create a TCP device on host '{}': {}", host, glooMessage(e)));
  }
  auto io = std::make_shared<IoThread>(std::move(device));
  entry = {::getpid(), io};
  return io;
}

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

}  // namespace

// ---------------------------------------------------------------------------------------------
// Backend state shared by the backend object, its worker and its point-to-point waiters.

struct GlooBackend::Impl {
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
      brokenReason = messageOf(error);
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

// The transport of one collective on the worker (runtime/comm/collectives/channel.hpp): Gloo
// unbound buffers, posts from Gloo's I/O thread and waits bounded by the operation's deadline.
class GlooChannel final : public collectives::Channel {
 public:
  GlooChannel(GlooBackend::Impl& impl, OpTracker& tracker, Clock::time_point deadline,
              bool inlinePosts)
      : impl_(impl), tracker_(tracker), deadline_(deadline), inlinePosts_(inlinePosts) {}

  ~GlooChannel() override { tracker_.finish(); }

  GlooChannel(const GlooChannel&) = delete;
  GlooChannel& operator=(const GlooChannel&) = delete;

  int rank() const noexcept override { return impl_.rank; }
  int size() const noexcept override { return impl_.size; }

  Buffer* buffer(void* data, std::size_t bytes) override {
    buffers_.push_back(
        std::make_unique<GlooChannelBuffer>(impl_.context->createUnboundBuffer(data, bytes)));
    tracker_.add(&buffers_.back()->gloo());
    return buffers_.back().get();
  }

  // Scratch memory owned by the backend's worker, valid until the next call.
  std::byte* scratch(std::size_t bytes) override {
    if (impl_.scratch.size() < bytes)
      impl_.scratch.resize(bytes);
    return impl_.scratch.data();
  }

  std::uint64_t nextSlot() override { return (kCollectivePrefix << 56) | (++impl_.sequence << 8); }

  // Posts sends and receives (Gloo calls) from the I/O thread or, for small two-rank
  // operations, right here.
  void post(std::function<void()> fn) override {
    if (inlinePosts_) {
      fn();
      return;
    }
    tracker_.beginPost();
    impl_.io->post([&tracker = tracker_, fn = std::move(fn)] {
      if (!tracker.cancelled()) {
        try {
          fn();
        } catch (...) {
          tracker.abort(std::current_exception());
        }
      }
      tracker.endPost();
    });
  }

  void waitRecv(Buffer* buffer) override {
    if (!glooOf(buffer).waitRecv(nullptr, remainingUntil(deadline_)))
      throwAborted();
  }
  void waitSend(Buffer* buffer) override {
    if (!glooOf(buffer).waitSend(nullptr, remainingUntil(deadline_)))
      throwAborted();
  }

 private:
  class GlooChannelBuffer final : public Buffer {
   public:
    explicit GlooChannelBuffer(GlooBufferPtr buffer) : buffer_(std::move(buffer)) {}
    void send(int peer, std::uint64_t slot, std::size_t offset, std::size_t bytes) override {
      buffer_->send(peer, slot, offset, bytes);
    }
    void recv(int peer, std::uint64_t slot, std::size_t offset, std::size_t bytes) override {
      buffer_->recv(peer, slot, offset, bytes);
    }
    GlooBuffer& gloo() noexcept { return *buffer_; }

   private:
    GlooBufferPtr buffer_;
  };

  // Every Buffer an algorithm holds came from buffer() above.
  static GlooBuffer& glooOf(Buffer* buffer) {
    return static_cast<GlooChannelBuffer*>(buffer)->gloo();
  }

  [[noreturn]] void throwAborted() {
    if (auto error = tracker_.error())
      std::rethrow_exception(error);
    throw CommError("operation aborted");
  }

  GlooBackend::Impl& impl_;
  OpTracker& tracker_;
  Clock::time_point deadline_;
  bool inlinePosts_;
  std::vector<std::unique_ptr<GlooChannelBuffer>> buffers_;
};

// ---------------------------------------------------------------------------------------------
// Worker and point-to-point waiters.

void GlooBackend::Impl::workerLoop() {
  blockSigpipeOnThisThread();
  for (;;) {
    Task task;
    {
      std::unique_lock lock(queueMutex);
      queueWake.wait(lock, [&] { return stopping || !queue.empty(); });
      if (stopping) {
        for (auto& pending : queue)
          pending.work->markFailed(destroyedError(pending.description));
        queue.clear();
        return;
      }
      task = std::move(queue.front());
      queue.pop_front();
    }
    runTask(task);
  }
}

void GlooBackend::Impl::runTask(Task& task) {
  if (isBroken()) {
    task.work->markFailed(brokenError(task.description));
    return;
  }
  OpTracker tracker;
  if (!enter(&tracker)) {
    task.work->markFailed(refusedError(task.description));
    return;
  }
  std::exception_ptr error;
  try {
    const bool inlinePosts = size == 2 && task.bytes <= kInlinePostBytes;
    GlooChannel channel(*this, tracker, Clock::now() + task.timeout, inlinePosts);
    task.body(channel);
  } catch (...) {
    error = translateError(std::current_exception(), task.description, task.timeout);
  }
  leave(&tracker);
  if (error) {
    breakWith(error);
    task.work->markFailed(error);
  } else {
    task.work->markCompleted();
  }
}

std::shared_ptr<Work> GlooBackend::Impl::pointToPoint(OpType op, BufferView buffer, int peer,
                                                      int tag, Duration opTimeout,
                                                      std::string description) {
  auto work = std::make_shared<CompletionWork>(op, opTimeout, description);
  if (isBroken()) {
    work->markFailed(brokenError(description));
    return work;
  }
  auto task = std::make_shared<PeerTask>();
  task->op = op;
  task->description = std::move(description);
  task->timeout = opTimeout;
  task->deadline = Clock::now() + opTimeout;
  task->peer = peer;
  task->bytes = buffer.bytes();
  task->work = work;
  task->localWord = task->bytes;
  {
    std::lock_guard lock(peerMutex);
    auto& numbers = op == OpType::Send ? sendNumbers : recvNumbers;
    const std::uint16_t number = numbers[{peer, tag}]++;
    task->slot = (kPointToPointPrefix << 56) |
                 (static_cast<std::uint64_t>(static_cast<std::uint32_t>(tag)) << 24) |
                 (static_cast<std::uint64_t>(number) << 8);
  }
  if (!enter(&task->tracker)) {
    work->markFailed(refusedError(task->description));
    return work;
  }
  // Each message is three: the receiver's capacity (part 0, recv -> send), the sender's length
  // (part 1) and the payload (part 2). The sender sends its payload only when it fits, so a
  // mismatch fails both sides with both sizes instead of overrunning memory.
  task->payload = context->createUnboundBuffer(buffer.data, task->bytes);
  task->localHeader = context->createUnboundBuffer(&task->localWord, sizeof(std::uint64_t));
  task->remoteHeader = context->createUnboundBuffer(&task->remoteWord, sizeof(std::uint64_t));
  task->tracker.add(task->payload.get());
  task->tracker.add(task->localHeader.get());
  task->tracker.add(task->remoteHeader.get());
  task->tracker.beginPost();
  io->post([task] {
    auto& t = *task;
    if (!t.tracker.cancelled()) {
      try {
        if (t.op == OpType::Send) {
          t.remoteHeader->recv(t.peer, t.slot, 0, sizeof(std::uint64_t));
        } else {
          t.remoteHeader->recv(t.peer, t.slot + 1, 0, sizeof(std::uint64_t));
          t.payload->recv(t.peer, t.slot + 2, 0, t.bytes);
          t.localHeader->send(t.peer, t.slot, 0, sizeof(std::uint64_t));
        }
      } catch (...) {
        t.tracker.abort(std::current_exception());
      }
    }
    t.tracker.endPost();
  });
  {
    std::lock_guard lock(peerMutex);
    waiterQueue.push_back(std::move(task));
    if (idleWaiters == 0) {
      waiters.emplace_back([this] { waiterLoop(); });
    } else {
      --idleWaiters;
      waiterWake.notify_one();
    }
  }
  return work;
}

void GlooBackend::Impl::waiterLoop() {
  blockSigpipeOnThisThread();
  std::unique_lock lock(peerMutex);
  for (;;) {
    if (waiterQueue.empty()) {
      if (waitersStopping)
        return;
      // Spawned or woken for one task; otherwise idle until needed again.
      waiterWake.wait(lock, [&] { return waitersStopping || !waiterQueue.empty(); });
      continue;
    }
    auto task = std::move(waiterQueue.front());
    waiterQueue.pop_front();
    lock.unlock();
    runPeerTask(*task);
    task.reset();
    lock.lock();
    ++idleWaiters;
    waiterWake.wait(lock, [&] { return waitersStopping || !waiterQueue.empty(); });
    if (!waiterQueue.empty() && idleWaiters > 0 && waiterQueue.size() > 0) {
      // pointToPoint already counted this thread out when it queued work; nothing to do.
    }
  }
}

void GlooBackend::Impl::runPeerTask(PeerTask& t) {
  std::exception_ptr error;
  auto wait = [&](GlooBuffer* buffer, bool receive) {
    const auto limit = remainingUntil(t.deadline);
    const bool done = receive ? buffer->waitRecv(nullptr, limit) : buffer->waitSend(nullptr, limit);
    if (!done) {
      if (auto aborted = t.tracker.error())
        std::rethrow_exception(aborted);
      throw CommError("operation aborted");
    }
  };
  try {
    if (t.op == OpType::Send) {
      wait(t.remoteHeader.get(), true);
      const bool fits = t.remoteWord == t.bytes;
      t.tracker.beginPost();
      io->post([&t, fits] {
        if (!t.tracker.cancelled()) {
          try {
            t.localHeader->send(t.peer, t.slot + 1, 0, sizeof(std::uint64_t));
            if (fits)
              t.payload->send(t.peer, t.slot + 2, 0, t.bytes);
          } catch (...) {
            t.tracker.abort(std::current_exception());
          }
        }
        t.tracker.endPost();
      });
      wait(t.localHeader.get(), false);
      if (!fits) {
        throw CommError(fmt::format("{}: the matching recv holds {} bytes, this send has {}",
                                    t.description, t.remoteWord, t.bytes));
      }
      wait(t.payload.get(), false);
    } else {
      wait(t.remoteHeader.get(), true);
      if (t.remoteWord != t.bytes) {
        throw CommError(fmt::format("{}: the matching send has {} bytes, this recv holds {}",
                                    t.description, t.remoteWord, t.bytes));
      }
      wait(t.payload.get(), true);
      wait(t.localHeader.get(), false);
    }
  } catch (...) {
    error = translateError(std::current_exception(), t.description, t.timeout);
  }
  t.tracker.finish();
  leave(&t.tracker);
  t.payload.reset();
  t.localHeader.reset();
  t.remoteHeader.reset();
  if (error) {
    breakWith(error);
    t.work->markFailed(error);
  } else {
    t.work->markCompleted();
  }
}

void GlooBackend::Impl::shutdown() {
  {
    std::lock_guard lock(stateMutex);
    if (closing)
      return;
    closing = true;
    const auto reason = std::make_exception_ptr(
        CommError("the backend was destroyed before the operation completed"));
    for (auto* tracker : active)
      tracker->abort(reason);
  }
  {
    std::lock_guard lock(queueMutex);
    stopping = true;
  }
  queueWake.notify_all();
  if (worker.joinable())
    worker.join();
  {
    std::lock_guard lock(peerMutex);
    waitersStopping = true;
  }
  waiterWake.notify_all();
  for (auto& t : waiters)
    t.join();
  waiters.clear();
  if (context) {
    // On this thread, not Gloo's I/O thread (see breakWith): costs up to a loop tick per pair.
    try {
      context->closeConnections();
    } catch (...) {
    }
    context.reset();
  }
}

// ---------------------------------------------------------------------------------------------
// Construction.

namespace {

std::string joinedRanks(comm::Store& store, int size, bool joined) {
  std::string out;
  for (int r = 0; r < size; ++r) {
    bool has = false;
    try {
      has = store.check({fmt::format("joined/{}", r)});
    } catch (...) {
    }
    if (has == joined)
      out += (out.empty() ? "" : ", ") + std::to_string(r);
  }
  return out.empty() ? "none" : out;
}

std::shared_ptr<GlooBackend::Impl> connectGroup(std::shared_ptr<IoThread> io,
                                                std::shared_ptr<comm::Store> groupStore, int rank,
                                                int size, Duration timeout, std::string groupName,
                                                std::string host) {
  if (!groupStore)
    throw CommError(fmt::format("gloo group '{}': no store given", groupName));
  if (size < 1 || rank < 0 || rank >= size) {
    throw CommError(fmt::format("gloo group '{}': rank = {}, size = {}: expected 0 <= rank < size",
                                groupName, rank, size));
  }
  auto impl = std::make_shared<GlooBackend::Impl>();
  impl->io = std::move(io);
  impl->store = groupStore;
  impl->rank = rank;
  impl->size = size;
  impl->timeout = timeout;
  impl->groupName = std::move(groupName);
  impl->host = std::move(host);

  const auto deadline = Clock::now() + timeout;
  auto glooStore = std::make_shared<PrefixStore>("gloo", groupStore);
  auto context = std::make_shared<::gloo::rendezvous::Context>(rank, size);
  // Gloo waits five times its context timeout for a pair to connect (tcp::Pair::waitUntil):
  // with the full timeout, a member that published its address and then died or froze held
  // the others' rendezvous for 5 x 20 s, long after the rest of the job had given the group
  // up. A fifth of it bounds the connect to the timeout the caller asked for. Operations carry
  // their own deadlines, so the pairs' shorter timeout is used for nothing else.
  context->setTimeout(std::max(
      std::chrono::milliseconds(1),
      std::chrono::duration_cast<std::chrono::milliseconds>(timeout) / kGlooConnectTimeoutFactor));
  const std::string what =
      fmt::format("gloo rendezvous of group '{}' on rank {} of {}", impl->groupName, rank, size);
  try {
    glooStore->set(fmt::format("joined/{}", rank), "1");
    StoreAdapter adapter(glooStore, deadline);
    const SigpipeBlock noSigpipe;
    context->connectFullMesh(adapter, impl->io->device());
  } catch (const StoreTimeoutError& e) {
    throw CommTimeoutError(
        fmt::format("{} did not complete within {}: ranks joined: {}; missing: "
                    "{} ({})",
                    what, formatDuration(timeout), joinedRanks(*glooStore, size, true),
                    joinedRanks(*glooStore, size, false), e.what()));
  } catch (...) {
    std::rethrow_exception(translateError(std::current_exception(), what, timeout));
  }
  impl->context = std::move(context);
  impl->start();
  return impl;
}

}  // namespace

GlooBackend::GlooBackend(const BackendInit& init)
    : impl_(connectGroup(sharedIoThread(init.host), init.store, init.rank, init.size, init.timeout,
                         init.groupName, init.host)) {}

GlooBackend::GlooBackend(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

GlooBackend::~GlooBackend() {
  if (impl_)
    impl_->shutdown();
}

int GlooBackend::rank() const noexcept {
  return impl_->rank;
}
int GlooBackend::size() const noexcept {
  return impl_->size;
}
Duration GlooBackend::defaultTimeout() const noexcept {
  return impl_->timeout;
}
const std::string& GlooBackend::groupName() const noexcept {
  return impl_->groupName;
}
bool GlooBackend::isBroken() const {
  return impl_->isBroken();
}

// ---------------------------------------------------------------------------------------------
// Operations: argument checks on the caller's thread, the work on the worker.

std::shared_ptr<Work> GlooBackend::allReduce(BufferView buffer, ReduceOp op,
                                             const CollectiveOptions& options) {
  checkBuffer(OpType::AllReduce, buffer, "input");
  if (buffer.count == 0 || size() == 1)
    return completedWork(OpType::AllReduce, describe(OpType::AllReduce, &buffer));
  return impl_->enqueue({OpType::AllReduce, describe(OpType::AllReduce, &buffer),
                         timeoutOf(options), buffer.bytes(),
                         std::make_shared<CompletionWork>(OpType::AllReduce, timeoutOf(options),
                                                          describe(OpType::AllReduce, &buffer)),
                         [buffer, op](collectives::Channel& c) {
                           collectives::allReduce(c, buffer.data, buffer.count, buffer.dtype, op);
                         }});
}

std::shared_ptr<Work> GlooBackend::broadcast(BufferView buffer, int root,
                                             const CollectiveOptions& options) {
  checkBuffer(OpType::Broadcast, buffer, "input");
  checkRoot(OpType::Broadcast, root);
  const std::string what = describe(OpType::Broadcast, &buffer);
  if (buffer.count == 0 || size() == 1)
    return completedWork(OpType::Broadcast, what);
  return impl_->enqueue(
      {OpType::Broadcast, what, timeoutOf(options), buffer.bytes(),
       std::make_shared<CompletionWork>(OpType::Broadcast, timeoutOf(options), what),
       [buffer, root](collectives::Channel& c) {
         collectives::broadcast(c, buffer.data, buffer.count, buffer.dtype, root);
       }});
}

std::shared_ptr<Work> GlooBackend::allGather(BufferView input, BufferView output,
                                             const CollectiveOptions& options) {
  checkAllGather(input, output);
  const std::string what = describe(OpType::AllGather, &input);
  if (input.count == 0)
    return completedWork(OpType::AllGather, what);
  if (size() == 1) {
    if (input.data != output.data)
      std::memmove(output.data, input.data, input.bytes());
    return completedWork(OpType::AllGather, what);
  }
  return impl_->enqueue(
      {OpType::AllGather, what, timeoutOf(options), output.bytes(),
       std::make_shared<CompletionWork>(OpType::AllGather, timeoutOf(options), what),
       [input, output](collectives::Channel& c) { collectives::allGather(c, input, output); }});
}

std::shared_ptr<Work> GlooBackend::reduceScatter(BufferView input, BufferView output, ReduceOp op,
                                                 const CollectiveOptions& options) {
  checkReduceScatter(input, output);
  const std::string what = describe(OpType::ReduceScatter, &input);
  if (output.count == 0)
    return completedWork(OpType::ReduceScatter, what);
  if (size() == 1) {
    if (input.data != output.data)
      std::memmove(output.data, input.data, input.bytes());
    return completedWork(OpType::ReduceScatter, what);
  }
  return impl_->enqueue(
      {OpType::ReduceScatter, what, timeoutOf(options), input.bytes(),
       std::make_shared<CompletionWork>(OpType::ReduceScatter, timeoutOf(options), what),
       [input, output, op](collectives::Channel& c) {
         collectives::reduceScatter(c, input, output, op);
       }});
}

std::shared_ptr<Work> GlooBackend::allToAll(BufferView input, BufferView output,
                                            const CollectiveOptions& options) {
  checkAllToAll(input, output);
  const std::string what = describe(OpType::AllToAll, &input);
  if (input.count == 0)
    return completedWork(OpType::AllToAll, what);
  if (size() == 1) {
    if (input.data != output.data)
      std::memmove(output.data, input.data, input.bytes());
    return completedWork(OpType::AllToAll, what);
  }
  return impl_->enqueue(
      {OpType::AllToAll, what, timeoutOf(options), input.bytes(),
       std::make_shared<CompletionWork>(OpType::AllToAll, timeoutOf(options), what),
       [input, output](collectives::Channel& c) { collectives::allToAll(c, input, output); }});
}

std::shared_ptr<Work> GlooBackend::send(BufferView buffer, int peer, int tag,
                                        const CollectiveOptions& options) {
  checkBuffer(OpType::Send, buffer, "input");
  checkPeer(OpType::Send, peer);
  std::string what =
      fmt::format("{} to rank {} with tag {}", describe(OpType::Send, &buffer), peer, tag);
  return impl_->pointToPoint(OpType::Send, buffer, peer, tag, timeoutOf(options), std::move(what));
}

std::shared_ptr<Work> GlooBackend::recv(BufferView buffer, int peer, int tag,
                                        const CollectiveOptions& options) {
  checkBuffer(OpType::Recv, buffer, "output");
  checkPeer(OpType::Recv, peer);
  std::string what =
      fmt::format("{} from rank {} with tag {}", describe(OpType::Recv, &buffer), peer, tag);
  return impl_->pointToPoint(OpType::Recv, buffer, peer, tag, timeoutOf(options), std::move(what));
}

std::shared_ptr<Work> GlooBackend::barrier(const CollectiveOptions& options) {
  const std::string what = describe(OpType::Barrier);
  if (size() == 1)
    return completedWork(OpType::Barrier, what);
  return impl_->enqueue(
      {OpType::Barrier, what, timeoutOf(options), 0,
       std::make_shared<CompletionWork>(OpType::Barrier, timeoutOf(options), what),
       [](collectives::Channel& c) { collectives::barrier(c); }});
}

void GlooBackend::abort(std::string_view reason) {
  impl_->breakWith(std::make_exception_ptr(
      CommError(fmt::format("gloo group '{}' rank {} of {} left the group: {}", impl_->groupName,
                            rank(), size(), reason))));
}

std::shared_ptr<Backend> GlooBackend::createSubgroup(const std::vector<int>& ranks,
                                                     const std::string& groupName) {
  const std::string what = fmt::format("gloo sub-group '{}' of group '{}' on rank {} of {}",
                                       groupName, impl_->groupName, rank(), size());
  if (groupName.empty())
    throw CommError(fmt::format("{}: the group name is empty", what));
  int newRank = -1;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const int r = ranks[i];
    if (r < 0 || r >= size() || (i > 0 && r <= ranks[i - 1])) {
      throw CommError(fmt::format("{}: ranks[{}] = {}: expected ascending ranks in [0, {})", what,
                                  i, r, size()));
    }
    if (r == rank())
      newRank = static_cast<int>(i);
  }
  if (newRank < 0) {
    throw CommError(fmt::format("{}: this rank is not among the {} members", what, ranks.size()));
  }
  auto store = std::make_shared<PrefixStore>(groupName, impl_->store);
  return std::shared_ptr<Backend>(new GlooBackend(
      connectGroup(impl_->io, std::move(store), newRank, static_cast<int>(ranks.size()),
                   impl_->timeout, groupName, impl_->host)));
}

std::string glooVersion() {
  return fmt::format("{}.{}.{}", GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR, GLOO_VERSION_PATCH);
}

void registerGlooBackend() {
  registerBackend({"gloo", DeviceType::Cpu, fmt::format("Gloo {} (TCP transport)", glooVersion())},
                  [](const BackendInit& init) { return std::make_shared<GlooBackend>(init); });
}

}  // namespace stretch::comm::gloo
