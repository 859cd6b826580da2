// The Gloo backend's running half: the worker thread that runs collectives in issue order over
// a GlooChannel (Gloo's unbound buffers, posts from Gloo's I/O thread), the point-to-point
// waiters, shutdown, and the translation of Gloo's exceptions into the comm error tree.
// Construction and the public operations are in gloo_backend.cpp; the state both share is in
// gloo_backend_detail.hpp.

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <pthread.h>
#include <signal.h>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gloo/common/error.h>
#include <gloo/transport/unbound_buffer.h>

#include "runtime/comm/collectives/channel.hpp"
#include "runtime/comm/errors.hpp"
#include "runtime/comm/gloo/gloo_backend_detail.hpp"
#include "runtime/comm/work.hpp"

namespace stretch::comm::gloo {
namespace detail {

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

}  // namespace detail

namespace {

using namespace detail;

// For threads Stretch owns: blocked for the thread's whole life.
void blockSigpipeOnThisThread() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

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

}  // namespace

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

}  // namespace stretch::comm::gloo
