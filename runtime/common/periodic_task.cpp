#include "runtime/common/periodic_task.hpp"

#include <utility>

#include <spdlog/spdlog.h>

namespace stretch {

PeriodicTask::PeriodicTask(std::string name, std::chrono::nanoseconds interval, Body body)
    : name_(std::move(name)),
      interval_(interval),
      body_(std::move(body)),
      thread_([this] { loop(); }) {}

PeriodicTask::~PeriodicTask() {
  stop();
}

void PeriodicTask::loop() {
  std::unique_lock lock(mutex_);
  while (!stopRequested_) {
    runNow_ = false;
    lock.unlock();
    Next next = Next::Stop;
    std::exception_ptr error;
    try {
      next = body_();
    } catch (const std::exception& e) {
      error = std::current_exception();
      spdlog::error("{}: {}; the task stops", name_, e.what());
    } catch (...) {
      error = std::current_exception();
      spdlog::error("{}: an unknown exception; the task stops", name_);
    }
    lock.lock();
    if (error || next == Next::Stop) {
      failure_ = error;
      break;
    }
    wake_.wait_for(lock, interval_, [this] { return stopRequested_ || runNow_; });
  }
  ended_ = true;
}

void PeriodicTask::stop() {
  {
    std::lock_guard lock(mutex_);
    stopRequested_ = true;
  }
  wake_.notify_all();
  std::lock_guard join(joinMutex_);
  if (thread_.joinable())
    thread_.join();
}

void PeriodicTask::runNow() {
  {
    std::lock_guard lock(mutex_);
    runNow_ = true;
  }
  wake_.notify_all();
}

bool PeriodicTask::running() const {
  std::lock_guard lock(mutex_);
  return !ended_ && !stopRequested_;
}

std::exception_ptr PeriodicTask::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

}  // namespace stretch
