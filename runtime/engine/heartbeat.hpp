#pragma once
// Heartbeat: a worker's sign of life for the launcher's hang detection (the rule:
// runtime/agent/hang_rule.hpp; docs/launch.md, "Operating a job").
//
// `stretch launch` names a file per worker in STRETCH_HEARTBEAT_FILE. While a Heartbeat lives, a
// thread of its own rewrites that file (a new file renamed over it) with "STEP COMPLETED" (the
// last completed step, and how many steps this process completed) after every completed step
// and every period when no step completes, so the
// launcher sees the process run even through a long step, a checkpoint save or a collective
// that waits for a peer; a process that freezes (SIGSTOP, a stuck disk) stops beating and the
// launcher kills it. The engine owns one (Engine::setUp); any other program may write the same
// file once per step instead (docs/launch.md shows the line of Python).
//
// The destructor removes the file: the launcher stops watching the worker (what it does after
// training is not a hang). A write that fails (a full disk) is reported once and the beat stops;
// the file is removed too, so that the launcher treats the worker as one that never beat
// (exit-based), never as hung.

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "runtime/common/periodic_task.hpp"

namespace stretch::engine {

class Heartbeat {
 public:
  // Null when STRETCH_HEARTBEAT_FILE is unset or empty.
  static std::unique_ptr<Heartbeat> fromEnvironment();

  // Writes the file at once (step 0), then every `period`.
  explicit Heartbeat(std::string path,
                     std::chrono::milliseconds period = std::chrono::milliseconds(1000));
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // The last completed step, written at once by the beat's thread (steps that complete while it
  // writes share the next write).
  void progress(std::int64_t step);

  const std::string& path() const noexcept { return path_; }

 private:
  bool write(std::int64_t step, std::int64_t completed);

  std::string path_;
  std::mutex mutex_;
  std::int64_t step_ = 0;
  std::int64_t completed_ = 0;  // steps completed by this process
  PeriodicTask beat_;           // last: starts once the members above exist
};

}  // namespace stretch::engine
