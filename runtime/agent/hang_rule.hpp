#pragma once
// When a worker counts as hung: the rule the launcher applies to its workers' heartbeats
// (docs/launch.md, "Operating a job"). Pure: the caller observes the heartbeat and passes the
// time in.
//
// A worker that uses the Stretch engine rewrites its heartbeat file after every step and every
// second from a thread of its own, with its last completed step (runtime/engine/heartbeat.hpp); a
// program that is not the engine may write the file itself once per step (one line of Python).
// Either way the agent sees the file change, and the engine removes it when it ends (what the
// program does after training is its own affair). A worker whose file has not changed for longer
// than its limit is hung:
//
//   limit = the user's --hang_timeout when one was given (`fixed`): exactly that, never more;
//   limit = max(floor, factor x the longest gap between two changes seen so far) otherwise,
//
// so that, left to its default, a program that beats once per step gets a limit its own steps
// set (a 40 s evaluation every so often raises it to 400 s), and the engine's one-second beat
// leaves the floor; a limit the user chose means what it says. A
// worker that never wrote the file is never hung (the exit-based behaviour); a frozen process
// (SIGSTOP, a dead disk, a swap storm) stops its beat whatever its peers do, while peers blocked
// in a collective with it keep beating.

#include <cstdint>
#include <optional>
#include <string>

#include "runtime/agent/clock.hpp"

namespace stretch::agent {

// The floor's default: `stretch launch --hang_timeout` and the job's job/hang_timeout start from
// it (runtime/launcher/launch_defaults.hpp).
inline constexpr Duration kDefaultHangTimeout = std::chrono::seconds(30);

struct HangPolicy {
  Duration floor = kDefaultHangTimeout;  // --hang_timeout; zero turns detection off
  double factor = 10.0;
  bool fixed = false;  // the user gave the limit: `floor` is the limit, not derived from gaps
  bool enabled() const noexcept { return floor > Duration::zero(); }
};

// One worker's heartbeat as the agent observes it.
class HeartbeatTracker {
 public:
  // An observation at `now`: the file's modification stamp (any value that changes with each
  // write, nullopt while the file does not exist), the step it holds and, when it says so, the
  // steps this process completed (the engine writes "STEP COMPLETED"). A file that goes away
  // ends the watch (the program stopped beating on purpose) until it is written again.
  void observe(std::optional<std::int64_t> stamp, std::optional<std::int64_t> step, Time now,
               std::optional<std::int64_t> completed = std::nullopt);

  bool started() const noexcept { return lastChange_.has_value(); }
  // The worker completed a step: the file said so, or its step changed since the first beat.
  bool advanced() const noexcept {
    return completedAny_ || (firstStep_ && step_ && *step_ != *firstStep_);
  }
  // The limit for this worker now (the floor until a second beat came).
  Duration limit(const HangPolicy& policy) const;
  // Why the worker counts as hung at `now` ("no heartbeat for 31.0 s (limit 30.0 s), last step
  // 20"), or nullopt.
  std::optional<std::string> hung(const HangPolicy& policy, Time now) const;

 private:
  std::optional<std::int64_t> stamp_;
  std::optional<Time> lastChange_;
  Duration longestGap_ = Duration::zero();
  std::optional<std::int64_t> step_;
  std::optional<std::int64_t> firstStep_;
  bool completedAny_ = false;
};

}  // namespace stretch::agent
