#pragma once
// Closed-form checkpoint and goodput formulas the planner uses (docs/planner.md derives and cites
// each). Notation, all in one unit of time (the functions take and return minutes unless said):
//   M  job mean time between interruptions (the whole job, not one node)
//   C  checkpoint cost: training stalls this long per save
//   R  restart cost: the time from an interruption until training runs again (restart overhead
//      plus checkpoint load)
//   tau  compute time between two checkpoints
//
// Young (CACM 17(9), 1974): the first-order optimum tau_Y = sqrt(2 C M).
// Daly (FGCS 22(3), 2006), exponential interruptions, higher-order optimum:
//   tau_D = sqrt(2 C M) [1 + (1/3) sqrt(C / 2M) + (1/9) (C / 2M)] - C   when C < 2M,
//   tau_D = M                                                          otherwise.
// Daly's expected wall time to complete T_s of work at interval tau gives the ETTR (effective
// training time ratio, useful compute time / wall time):
//   ETTR(tau) = tau / (M e^{R/M} (e^{(tau + C)/M} - 1)).
// With no interruptions (M infinite) the ETTR is tau / (tau + C) and neither optimum exists.
//
// Pure functions: no state, no allocation, no exceptions; arguments outside their domain give
// NaN (a negative C) or the limits documented on each.

#include <cstdint>
#include <limits>

namespace stretch::planner {

inline constexpr double kNoFailures = std::numeric_limits<double>::infinity();

// sqrt(2 C M); infinity when M is infinite; 0 when C is 0.
double youngInterval(double checkpointCost, double mtbf) noexcept;

// Daly's higher-order optimum (see above); infinity when M is infinite. Never negative.
double dalyInterval(double checkpointCost, double mtbf) noexcept;

// Daly's ETTR at interval tau (> 0). R and C >= 0. M may be kNoFailures.
double dalyEttr(double interval, double checkpointCost, double restartCost, double mtbf) noexcept;

// The interval that maximises dalyEttr exactly (golden-section search on its log; the ETTR is
// unimodal in tau), for comparison with Daly's closed form. Infinity when M is infinite.
double exactDalyOptimum(double checkpointCost, double restartCost, double mtbf) noexcept;

// The interval the simulator actually uses for a requested interval: a save after every
// round(interval / step) steps, at least one (sim/job_sim.hpp). Same unit as the arguments.
double quantizedInterval(double interval, double stepTime) noexcept;
std::int64_t intervalSteps(double interval, double stepTime) noexcept;

}  // namespace stretch::planner
