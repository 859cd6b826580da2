#pragma once
// The one worker pool of the simulator's batch runners (sim::runMonteCarlo, the planner's
// replicas): independent items on a few threads, whose results do not depend on the thread count
// because every item writes its own slot.

#include <cstdint>
#include <functional>

namespace stretch::sim {

// Runs work(i) for every i in [0, count) on up to `threads` threads (0: the hardware's; never
// more than count; 1: in the caller's thread), handing out indices in increasing order.
// done(finished, count), when set, runs after each item whose work returned, serialised (never
// two at once) and with finished = 1, 2, 3, ... in call order. After an exception from work or
// done no further index is handed out; once every thread has stopped, the exception of the
// lowest index is rethrown. Returns the threads used.
int parallelFor(std::int64_t count, int threads, const std::function<void(std::int64_t)>& work,
                const std::function<void(std::int64_t, std::int64_t)>& done = {});

}  // namespace stretch::sim
