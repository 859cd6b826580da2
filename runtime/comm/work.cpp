#include "runtime/comm/work.hpp"

#include <fmt/format.h>

#include "runtime/comm/errors.hpp"

namespace stretch::comm {

Work::Work(OpType op, Duration timeout, std::string description)
    : op_(op), timeout_(timeout), description_(std::move(description)) {}

Work::~Work() = default;

void Work::throwTimeout(Duration waited) const {
  throw CommTimeoutError(fmt::format(
      "{} did not complete within {}",
      description_.empty() ? std::string(toString(op_)) : description_, formatDuration(waited)));
}

void CompletionWork::markCompleted() {
  {
    std::lock_guard lock(mutex_);
    completed_ = true;
  }
  done_.notify_all();
}

void CompletionWork::markFailed(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    error_ = std::move(error);
    completed_ = true;
  }
  done_.notify_all();
}

bool CompletionWork::isCompleted() {
  std::lock_guard lock(mutex_);
  return completed_;
}

void CompletionWork::wait(std::optional<Duration> timeout) {
  const Duration limit = timeout.value_or(this->timeout());
  std::unique_lock lock(mutex_);
  if (!done_.wait_for(lock, limit, [&] { return completed_; }))
    throwTimeout(limit);
  if (error_)
    std::rethrow_exception(error_);
}

std::exception_ptr CompletionWork::exception() {
  std::lock_guard lock(mutex_);
  return error_;
}

std::shared_ptr<Work> completedWork(OpType op, std::string description) {
  auto work = std::make_shared<CompletionWork>(op, Duration::zero(), std::move(description));
  work->markCompleted();
  return work;
}

}  // namespace stretch::comm
