#pragma once
// Time as the elastic agent sees it: a count of nanoseconds from a fixed origin, always passed
// in. The state machine never reads a clock; the launcher's agent loop reads an injected Clock,
// so tests and the discrete-event simulator drive the same machine with their own time.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "runtime/common/duration.hpp"

namespace stretch::agent {

// A point in time: nanoseconds since an origin fixed by whoever drives the agent (the job's start
// for the simulator, the Unix epoch for real agents comparing keep-alives across hosts).
using Time = std::chrono::nanoseconds;
// A span of time: Stretch's one Duration (runtime/common/duration.hpp).
using stretch::Duration;
// Returns the current Time. Must not go backwards.
using Clock = std::function<Time()>;

// std::chrono::system_clock since the Unix epoch: comparable across hosts with synchronised
// clocks, which keep-alive timestamps in a shared store need.
Clock systemClock();

using stretch::formatDuration;
using stretch::fromSeconds;

}  // namespace stretch::agent
