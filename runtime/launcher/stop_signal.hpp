#pragma once
// The stop request of `stretch launch` and `stretch agent`: SIGINT, SIGTERM (and SIGHUP for a
// node agent whose ssh session ends) set a flag that the agent loops poll; they stop every
// worker and return 128 + signal. Installing the handlers is process-wide: call it once, from
// the main thread, before starting a job.

#include <atomic>
#include <initializer_list>

namespace stretch::launcher {

// Installs a handler for each signal that stores its number in the returned flag (0 until one
// arrives). The flag lives as long as the process.
const std::atomic<int>& installStopSignals(std::initializer_list<int> signals);

}  // namespace stretch::launcher
