#pragma once
// `stretch sim --calibrate` (tools/sim_calibrate.cpp): fits the simulator's step model to what a
// real training job measures on this machine (the engine's STRETCH_TIMINGS_FILE) and checks the
// fit on a run it was not fitted to.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace stretch::tools {

struct CalibrationOptions {
  bool progress = true;  // one line per stage on stderr
  // The job: a program that trains with the Stretch engine, and its arguments. Empty: the
  // example stretch-train-digits (next to stretch), 300 steps.
  std::vector<std::string> job;
  // Its DeepSpeed config (passed as --config); with `job`, required. The runs use its micro
  // batch and accumulation without train_batch_size or elasticity, so that the same config runs
  // on 1 and 2 workers.
  std::string config;
  // Runs per configuration; the measured step is the median of their medians and the fit pools
  // their steps, so one run slowed by something else on the machine does not decide it.
  int repeat = 3;
  // Arguments that make the job save checkpoints (a few in each run) into the directory "{dir}":
  // every run saves, and one more 2-worker run adds --resume, so that the scenario gets the
  // measured save, load and restart costs. Empty: those costs are not measured (0), except for
  // the example, which saves every 50 steps.
  std::vector<std::string> checkpointArgs;
};

// A scenario for the job on this machine ("cluster", "job", "failures") plus a "calibration"
// object: the fitted figures, the restart and checkpoint costs and, per run (1 and 2 workers at the
// config's accumulation, and 2 workers at twice it, the held-out check), the predicted and measured
// median step. Throws ConfigError for a missing job or a config without a micro batch, Error when a
// run fails (naming the log with its output).
nlohmann::json runCalibration(CalibrationOptions options);

}  // namespace stretch::tools
