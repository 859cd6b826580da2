#pragma once
// The handle every communication call returns (c10d's Work): completion, waiting with a timeout,
// and the operation's error carried as an exception_ptr.

#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "runtime/comm/types.hpp"

namespace stretch::comm {

// Thread-safe: any thread may poll or wait. A Work outlives the backend call that made it; the
// buffers of the operation must stay alive until isCompleted() is true.
class Work {
 public:
  Work(OpType op, Duration timeout, std::string description);
  virtual ~Work();
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  OpType op() const noexcept { return op_; }
  // The timeout the operation was issued with (wait() uses it when given none).
  Duration timeout() const noexcept { return timeout_; }
  // "gloo all_reduce of 1024 x fp32 on rank 3 of 8": used in timeout and error messages.
  const std::string& description() const noexcept { return description_; }

  // True once the operation has finished, successfully or not. Never blocks.
  virtual bool isCompleted() = 0;
  // Blocks until the operation has finished or `timeout` (default: timeout()) has passed.
  // Rethrows the operation's error; throws CommTimeoutError naming the operation on timeout.
  // The operation itself may still be running after a timeout.
  virtual void wait(std::optional<Duration> timeout = std::nullopt) = 0;
  // The operation's error once it has failed; nullptr while running or after success.
  virtual std::exception_ptr exception() = 0;

 protected:
  [[noreturn]] void throwTimeout(Duration waited) const;

 private:
  OpType op_;
  Duration timeout_;
  std::string description_;
};

// A Work completed by whoever runs the operation (a worker thread, a peer thread): call
// markCompleted() or markFailed() exactly once.
class CompletionWork final : public Work {
 public:
  using Work::Work;

  void markCompleted();
  void markFailed(std::exception_ptr error);

  bool isCompleted() override;
  void wait(std::optional<Duration> timeout = std::nullopt) override;
  std::exception_ptr exception() override;

 private:
  std::mutex mutex_;
  std::condition_variable done_;
  bool completed_ = false;
  std::exception_ptr error_;
};

// Work for operations that finished synchronously (size-0 buffers, world size 1).
std::shared_ptr<Work> completedWork(OpType op, std::string description = {});

}  // namespace stretch::comm
