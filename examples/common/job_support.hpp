#pragma once
// What the example training jobs (stretch-train-digits, stretch-train-gpt) share: their common
// command-line options, joining the process group, reading the DeepSpeed config, checkpoint
// saving and resuming, the fault-script hooks of the sim-to-real tests, and the measurements
// their summaries report (weights digest, parameter count, step-time median, peak RSS).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <torch/nn/module.h>

#include "runtime/comm/process_group.hpp"
#include "runtime/config/ds_config.hpp"
#include "runtime/engine/engine.hpp"
#include "runtime/engine/live_recovery.hpp"

namespace stretch::examples {

// The options every example job takes (addJobOptions registers them).
struct JobOptions {
  std::string configPath;
  std::int64_t steps = 0;
  std::uint64_t seed = 0;
  std::string checkpointDir;
  std::int64_t saveAt = 0;
  std::int64_t saveEvery = 0;
  bool resume = false;
  bool json = false;
  bool deterministic = false;
};

// --config, --steps, --seed, --checkpoint-dir, --save-at, --save-every, --resume, --json,
// --deterministic.
// `configOption` is returned so a job can add its own text (or a preset's default).
CLI::Option* addJobOptions(CLI::App& app, JobOptions& options);

// The message for options that do not go together (empty when they are fine): --save-at,
// --save-every and --resume need --checkpoint-dir.
std::string checkJobOptions(const JobOptions& options);

// With --json, log lines go to stderr so that stdout is the one JSON object (`| jq` works);
// without it they stay on stdout with the progress. Call once, before the first log line.
void routeLogs(const JobOptions& options);

// --deterministic: LibTorch's deterministic algorithms only (an operation without one is an
// error), and on CUDA cuBLAS's fixed workspace (CUBLAS_WORKSPACE_CONFIG=:4096:8 unless set), so
// that a run repeats bitwise on a GPU as it does on the CPU. Call before the model is built.
void setDeterminism(const JobOptions& options);

// parseConfig(readFile(path)), its warnings logged. (Not loadConfig, whose std::filesystem::path
// parameter would run out-of-line std::filesystem code: docs/gpu.md.)
config::DsConfig readJobConfig(const std::string& path);

// True when the launcher's or OpenMPI's variables say this process is one of several.
bool distributedEnvironment();

// Joins the process group over the built-in backends when distributedEnvironment(), else null
// (the engine then trains alone). Under live recovery a worker started into a running job
// (live->joining()) joins its generation's group instead; build the engine with
// InitOptions::liveJoin = live->joining() then.
std::shared_ptr<comm::ProcessGroup> joinIfDistributed(engine::LiveRecovery* live = nullptr);

// After initialize: --resume (unless the worker joins a running job live, whose state comes from
// its peers), then live->start (a joiner takes the job's state; every worker says it can
// recover live). live may be null.
void startTraining(engine::Engine& engine, const JobOptions& options, engine::LiveRecovery* live);

// One micro step of a job's loop: runs `body` (forward, backward, engine.step() and what the job
// does after a boundary). Under live recovery (live not null) a collective that fails (a peer
// died) abandons the step and continues in the agent's next generation (live->recover), and a
// new generation announced by the agent is joined at the step boundary (not after the last of
// the job's `steps`: the job ends in the generation it is in). Returns false when the
// micro step was abandoned (the job's own per-step accumulators should start over). Without
// live recovery the error propagates.
bool liveMicroStep(engine::Engine& engine, engine::LiveRecovery* live, std::int64_t steps,
                   const std::function<void()>& body);

// --resume: loads the latest checkpoint of options.checkpointDir, if any, and logs what it found
// on rank 0 ("resumed from ..." or "nothing loaded ..."; the launch tests look for both).
void resumeIfAsked(engine::Engine& engine, const JobOptions& options);

// A checkpoint save failed (runJob: exit status worker_env::kExitSaveFailed, which the launcher
// counts toward its crash-loop rule).
struct SaveFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// After optimizer step `step`: saves a checkpoint when --save-at or --save-every asks for one.
// Returns true when it saved; a save that fails is a SaveFailed.
bool saveIfDue(engine::Engine& engine, const JobOptions& options, std::int64_t step);

// Fault script hooks for the sim-to-real test (tests/cli/sim_to_real_test.cpp), read from the
// environment; each acts after a step (and its checkpoint) completes, once per job, remembered
// by marker files in STRETCH_FAULT_DIR:
//   STRETCH_FAULT_KILL_AT_STEP=S:R     rank R SIGKILLs itself after step S (marker kill_S);
//   STRETCH_FAULT_PAUSE_AT_STEPS=S,T   after step S every rank waits until the test creates
//                                      pause_S.release (rank 0 creates pause_S.reached first), so
//                                      the test can take a node away or add one at that step.
struct FaultScript {
  std::string dir;
  std::int64_t killStep = -1;
  std::int64_t killRank = -1;
  std::vector<std::int64_t> pauseSteps;

  // ConfigError naming the variable when one is malformed.
  static FaultScript fromEnvironment();
  void afterStep(std::int64_t step, std::int64_t rank) const;
};

// The end-of-step bookkeeping both example jobs share: the mean loss of a step's micro-batches on
// this rank, the wall time of every optimizer step (checkpoint saves excluded: the simulator's
// calibration, `stretch sim --calibrate`, compares its predicted step time with their median),
// the checkpoint cadence (--save-at, --save-every) and the fault script.
class StepLedger {
 public:
  explicit StepLedger(const JobOptions& options);

  // After each micro-batch's backward.
  void addMicroLoss(double loss);
  struct Closed {
    double meanLoss = 0;  // this rank's mean over the step's micro-batches
    double seconds = 0;   // the step's wall time
  };
  // At an accumulation boundary, after engine.step(): the step's figures; starts the next sums.
  Closed closeStep();
  // After what the job does with a closed step (logs, evaluations): saves when due, runs the
  // fault script, starts the next step's clock.
  void finishStep(engine::Engine& engine);
  // The step in flight was abandoned (liveMicroStep returned false): its sums and clock start
  // over.
  void abandonStep();

  const std::vector<double>& stepSeconds() const { return stepSeconds_; }

 private:
  const JobOptions& options_;
  FaultScript faults_;
  double lossSum_ = 0;
  std::int64_t lossCount_ = 0;
  std::vector<double> stepSeconds_;
  std::chrono::steady_clock::time_point stepBegan_;
};

// SHA-256 of the parameters' bytes in module order: equal digests mean bitwise-equal weights.
std::string weightsDigest(torch::nn::Module& model);

// Parameters of the model, a tensor registered under two names counted once.
std::int64_t parameterCount(torch::nn::Module& model);

// The median of the values (0 when there are none).
double median(std::vector<double> values);

// Live recovery's ZeRO 1/2 partition copies on this rank, for a job's summary
// ("partition_copy_bytes", "partition_copy_ms_per_step"): the host bytes they take and the
// time a step spends on them; nullopt when the engine makes none.
struct PartitionCopyFigures {
  std::int64_t bytes = 0;
  double msPerStep = 0;
};
std::optional<PartitionCopyFigures> partitionCopyFigures(const engine::Engine& engine);

// This process's peak resident set size so far, in bytes (getrusage's ru_maxrss).
std::int64_t peakRssBytes();

// This worker's generation under `stretch launch` (STRETCH_GENERATION), 0 outside it.
std::int64_t launcherGeneration();

// Runs a job's body and maps what escapes it to the jobs' exit statuses, with the message on
// stderr prefixed by `program`: 0 from body (and for a live-recovery worker the job finished
// without: engine::JobFinishedElsewhere), worker_env::kExitCannotRun (78) when another job holds
// the checkpoint directory, worker_env::kExitSaveFailed (73) for a SaveFailed, 2 for ConfigError /
// IoError (bad input), 1 for any other exception.
int runJob(const std::string& program, const std::function<int()>& body);

}  // namespace stretch::examples
