#pragma once
// `stretch sim --calibrate` (tools/sim_calibrate.cpp): fits the simulator's compute and network
// models to this machine with the example job and checks the fit on a 2-worker run.

#include <nlohmann/json.hpp>

namespace stretch::tools {

struct CalibrationOptions {
  bool progress = true;  // one line per stage on stderr
};

// A scenario for the example job on this machine ("cluster", "job", "failures") plus a
// "calibration" object: the measurements, the predicted and measured 2-worker step time and
// their relative error. Throws ConfigError when the example job is not built, Error when a
// measurement fails (naming the log with its output).
nlohmann::json runCalibration(const CalibrationOptions& options);

}  // namespace stretch::tools
