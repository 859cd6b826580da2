#pragma once
// The vocabulary the parts of one job simulation share (sim/detail/simulation.hpp): the events
// on the simulation's queue, the training progress a checkpoint keeps, and the phases the
// simulated time is accounted to.
//
// Internal to sim/job_sim.cpp and sim/detail/.

#include <cstdint>
#include <limits>

#include "sim/scheduler.hpp"

namespace stretch::sim::detail {

// "Not before the end of the run": a step or a time that never comes.
inline constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

// a / b rounded up, for a >= 0 and b > 0.
inline std::int64_t ceilDiv(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

enum class Ev : std::uint8_t {
  Failure,       // the failure process's next strike (token: the process slot's)
  Preemption,    // the spot market's next strike (token: the process slot's)
  NodeBack,      // a node returns from repair or preemption (token: its epoch, arg: the node)
  Scale,         // a scheduled join or leave (arg: index into Scenario::scaleEvents)
  Tick,          // the agent's monitor tick
  Productive,    // the workers of a generation finished starting (token: the work epoch)
  Boundary,      // aggregate mode: the next checkpoint, script or final step is reached
  SaveDone,      // a checkpoint save ends
  Micro,         // step-level mode: micro step `arg` ends
  Bucket,        // step-level mode: all-reduce bucket `arg` ends (0: the step's last micro step)
  JoinersReady,  // live recovery: a start's joiners are ready (token: the work epoch)
  Detected,      // a silent node failure reaches the agent (arg: the node)
  Horizon,       // horizon_hours
};

struct Payload {
  Ev kind = Ev::Tick;
  // Stale events carry an old token and are ignored (the scheduler cannot cancel).
  std::uint64_t token = 0;
  std::int64_t arg = 0;
};

using EventQueue = Scheduler<Payload>;

// Training progress: what a stop loses since the latest checkpoint.
struct Progress {
  std::int64_t step = 0;
  std::int64_t samples = 0;
  SimTime useful = 0;  // compute time of the steps kept
};

// What the job does; the simulated time of each phase goes to one account of RunResult.
enum class Phase : std::uint8_t { Idle, Starting, Computing, Saving, Finishing };

}  // namespace stretch::sim::detail
