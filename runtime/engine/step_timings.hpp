#pragma once
// StepTimingsFile: the engine's per-step wall-clock breakdown as JSON lines, for calibrating the
// simulator from real training (`stretch sim --calibrate --job`, docs/simulator.md).
//
// Enabled by the environment: STRETCH_TIMINGS_FILE=PATH makes every rank append one line per
// optimizer step to PATH (opened O_APPEND; each line is one write(2) well under PIPE_BUF, so
// ranks sharing a file never interleave within a line):
//
//   {"rank":0,"world_size":2,"step":12,"micro_batch":8,"gas":3,"gradient_bytes":..,
//    "forward_ms":..,"backward_ms":..,"allreduce_ms":..,"optimizer_ms":..,"step_ms":..,
//    "period_ms":..,"unix_ns":..}
//
//  - forward_ms, backward_ms: the step's micro steps together (backward without the ZeRO-2
//    reductions it launches);
//  - allreduce_ms: the gradient reduction this rank waited for (at the boundary, and ZeRO 2's
//    during the backward): it includes waiting for slower ranks;
//  - optimizer_ms: the boundary step() without its reduction (overflow check, update, zeroing);
//  - step_ms: from the step's first forward to the end of its optimizer step;
//  - period_ms: from the end of the previous step (of the engine's set-up for the first) to the
//    end of this one: what a step costs the job, data loading and logging included;
//  - gradient_bytes: the gradients one rank reduces per step (trainable elements x element size);
//  - unix_ns: the wall clock (system_clock, as the launcher's event log) at the end of the step.
//
// and one line per checkpoint saved or loaded (the restart and checkpoint costs of the simulator):
//
//   {"rank":0,"event":"save","step":20,"seconds":0.0123,"unix_ns":..}
//
//  - event: save (Engine::saveCheckpoint, from its first barrier to its last) or load
//    (Engine::loadCheckpoint, when it loaded one); seconds: its wall time on this rank.
// Not thread-safe (one engine, one thread).

#include <cstdint>
#include <memory>
#include <string>

namespace stretch::engine {

struct StepTiming {
  int rank = 0;
  std::int64_t worldSize = 1;
  std::int64_t step = 0;
  std::int64_t microBatch = 1;
  std::int64_t gas = 1;
  std::int64_t gradientBytes = 0;
  double forwardMs = 0;
  double backwardMs = 0;
  double allreduceMs = 0;
  double optimizerMs = 0;
  double stepMs = 0;
  double periodMs = 0;
  std::int64_t unixNs = 0;
};

struct CheckpointTiming {
  int rank = 0;
  std::string event;  // "save" or "load"
  std::int64_t step = 0;
  double seconds = 0;
  std::int64_t unixNs = 0;
};

std::string toJsonLine(const StepTiming& t);
std::string toJsonLine(const CheckpointTiming& t);

// system_clock now, in nanoseconds since the epoch (the event log's time_ns).
std::int64_t unixNowNs();

class StepTimingsFile {
 public:
  // The file named by STRETCH_TIMINGS_FILE, or null when the variable is unset or empty. Throws
  // ConfigError naming the variable, the path and the system's reason when it cannot be opened.
  static std::unique_ptr<StepTimingsFile> fromEnvironment();
  explicit StepTimingsFile(const std::string& path);
  ~StepTimingsFile();
  StepTimingsFile(const StepTimingsFile&) = delete;
  StepTimingsFile& operator=(const StepTimingsFile&) = delete;

  // Appends one line; a failed write is logged once and further lines are dropped (timings
  // never stop training).
  void record(const StepTiming& t);
  void record(const CheckpointTiming& t);

 private:
  void append(const std::string& line);

  std::string path_;
  int fd_ = -1;
  bool failed_ = false;
};

}  // namespace stretch::engine
