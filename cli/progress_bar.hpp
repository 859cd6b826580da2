#pragma once
// The progress bar of long CLI commands (`stretch sim`, `stretch plan`): one line on stderr,
// redrawn at most 10 times a second, only when stderr is a terminal (a log file gets no bar) and
// only once the work has taken `delay`, so quick runs print nothing. Thread-safe: update() may
// be called from worker threads.

#include <algorithm>
#include <chrono>
#include <iostream>
#include <mutex>
#include <string>
#include <string_view>
#include <unistd.h>

#include <fmt/format.h>

namespace stretch::cli {

class ProgressBar {
 public:
  ProgressBar(bool enabled, std::chrono::milliseconds delay)
      : enabled_(enabled && isatty(STDERR_FILENO) == 1),
        delay_(delay),
        start_(std::chrono::steady_clock::now()) {}
  ~ProgressBar() { clear(); }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // fraction in [0, 1]; label: what is being done.
  void update(double fraction, std::string_view label) {
    if (!enabled_) {
      return;
    }
    std::lock_guard lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    if (now - start_ < delay_ || (drawn_ && now - last_ < std::chrono::milliseconds(100))) {
      return;
    }
    last_ = now;
    drawn_ = true;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * kWidth);
    std::cerr << fmt::format("\r[{}{}] {:5.1f}% {:<16}   ", std::string(filled, '#'),
                             std::string(kWidth - filled, ' '), 100.0 * fraction, label)
              << std::flush;
  }

  // Erases the bar (before the command prints its result).
  void clear() {
    std::lock_guard lock(mutex_);
    if (enabled_ && drawn_) {
      std::cerr << "\r" << std::string(80, ' ') << "\r" << std::flush;
      drawn_ = false;
    }
  }

 private:
  bool enabled_;
  std::chrono::milliseconds delay_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_;
  bool drawn_ = false;
  std::mutex mutex_;
};

}  // namespace stretch::cli
