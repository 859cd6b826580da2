#pragma once
// PeriodicTask: a thread of its own that runs a callable at once, then every interval, until
// stopped (a worker's heartbeat file, a node agent's keep-alive, live recovery's watch for a
// newer generation).
//
// Contract:
//  - The body runs on the task's thread only, one run at a time: at once on construction, then
//    `interval` after the previous run ended, or at once after runNow().
//  - The body returns PeriodicTask::Next::Stop to end the task (its job is done, or it cannot go
//    on); the thread ends then and running() turns false.
//  - An exception from the body ends the task too: it is logged once (naming the task) and kept
//    in failure(); it never escapes the thread.
//  - stop() and the destructor wake the thread (a condition variable, no polling), let a run in
//    progress finish, and join: they return as soon as the current run ends, never an interval
//    later. stop() is idempotent; the body must not call it (it returns Next::Stop instead).
//  - stop(), runNow(), running() and failure() are safe from any thread.

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace stretch {

class PeriodicTask {
 public:
  enum class Next { Continue, Stop };
  using Body = std::function<Next()>;

  // `name` names the task in the log line of a body's exception.
  PeriodicTask(std::string name, std::chrono::nanoseconds interval, Body body);
  ~PeriodicTask();
  PeriodicTask(const PeriodicTask&) = delete;
  PeriodicTask& operator=(const PeriodicTask&) = delete;

  // Ends the task: blocks until a run in progress ended and the thread joined.
  void stop();
  // Runs the body once more at once (when the thread waits; right after the current run when
  // one is in progress); the next interval counts from that run.
  void runNow();
  // False once the body asked to stop, threw, or stop() was called.
  bool running() const;
  // The exception that ended the task, or null.
  std::exception_ptr failure() const;

  const std::string& name() const noexcept { return name_; }
  std::chrono::nanoseconds interval() const noexcept { return interval_; }

 private:
  void loop();

  std::string name_;
  std::chrono::nanoseconds interval_;
  Body body_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopRequested_ = false;
  bool runNow_ = false;
  bool ended_ = false;
  std::exception_ptr failure_;
  std::mutex joinMutex_;  // one joiner at a time
  std::thread thread_;    // last: starts once the members above exist
};

}  // namespace stretch
