#pragma once
// Stretch's one vocabulary for spans of time: a Duration is integer nanoseconds, whether it is a
// store or collective timeout (comm), an agent's heartbeat or restart delay (agent, launcher) or a
// simulated span (sim's SimBackend). Points in time are Durations since an origin their owner
// names (agent::Time: the Unix epoch for real agents, the job's start in the simulator). The
// discrete-event scheduler keeps its own integer nanoseconds (sim::SimTime) for speed and
// converts at its edges.

#include <chrono>
#include <string>

namespace stretch {

using Duration = std::chrono::nanoseconds;

// "12.5 s", "250 ms", "3 min 5 s", "10 min", "800 ns": how durations appear in messages.
std::string formatDuration(Duration d);

// A count of seconds (a command-line value such as --keepalive_timeout 2.5) as a Duration.
Duration fromSeconds(double seconds);

// A Duration as a count of seconds: the command-line structs' defaults, taken from a Duration
// constant so that each default is written once.
constexpr double toSeconds(Duration d) noexcept {
  return std::chrono::duration<double>(d).count();
}

}  // namespace stretch
