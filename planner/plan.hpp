#pragma once
// The planner: from a job (planner/plan_input.hpp) to a plan of five sections, every figure
// computed from the elasticity solver, the closed-form checkpoint formulas
// (planner/analytic.hpp), the simulator's step model and Monte Carlo runs of the simulator
// itself. docs/planner.md explains every number and its source.
//
//  1. batch: per solver version (0.1, 0.2, exact) the final batch and every valid world size with
//     its micro batch and gradient accumulation; coverage of the expected cluster sizes; a
//     suggestion when another micro-batch set or batch cap within the tolerance band covers more.
//  2. checkpoint: Young's and Daly's intervals at the recommended world size, a Monte Carlo sweep
//     of the ETTR over intervals (grid, then golden-section refinement), the simulated optimum and
//     its paired gain over Daly's interval, and the recommended interval.
//  3. scale: one row per candidate world size: step time, throughput, job MTBF, ETTR (analytic,
//     or mean and 95 % CI over seeds), time to train, GPU-hours, cost.
//  4. recommendation: the row that optimises the objective, why, and its DeepSpeed config.
//  5. portability: the world sizes a checkpoint written at the recommended size resumes at.
//
// Units: hours for MTBF and training time, minutes for checkpoint intervals, seconds for step,
// save and restart times, samples per second for throughput.
//
// Threads and cancellation: makePlan runs on the calling thread and uses up to `threads` worker
// threads for the simulations. `progress` is called from the calling thread or the workers,
// never two at once, with a non-decreasing fraction; keep it cheap. Setting `*cancel` (from any
// thread) makes makePlan throw PlanCancelled within one simulator run. makePlan is reentrant:
// concurrent calls share nothing.
//
// Errors: ConfigError for a job the plan cannot use (no valid world size in the expected range,
// an elasticity section no solver accepts), the solver's errors, PlanCancelled.

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "planner/plan_input.hpp"
#include "planner/replicas.hpp"
#include "runtime/config/ds_config.hpp"
#include "sim/monte_carlo.hpp"

namespace stretch::planner {

// ---- 1. batch ------------------------------------------------------------------------------

struct BatchRow {
  std::int64_t gpus = 0;
  std::int64_t dataParallel = 0;  // gpus / model-parallel size
  std::int64_t microBatch = 0;
  std::int64_t gradientAccumulation = 0;
  std::int64_t batch = 0;  // the global batch at this size (the same everywhere when elastic)
  bool operator==(const BatchRow&) const = default;
};

// How well a batch plan fits the expected cluster sizes.
struct Coverage {
  double covered = 0.0;      // weight share of expected sizes that are valid world sizes
  double utilisation = 0.0;  // weighted mean of (GPUs used / GPUs available)
  std::int64_t coveredSizes = 0;
  std::int64_t expectedSizes = 0;
};

struct VersionPlan {
  std::string version;  // "0.1", "0.2", "exact", or "fixed" without elasticity
  std::string error;    // non-empty: the solver rejected this version for the config
  std::int64_t finalBatch = 0;
  std::vector<BatchRow> rows;  // every valid world size, ascending
  Coverage coverage;
};

struct BatchSuggestion {
  std::string change;  // "add micro batch 5", "max_train_batch_size 2000 -> 2160", ...
  std::string version;
  std::vector<std::int64_t> microBatches;
  std::int64_t maxBatch = 0;
  std::optional<std::int64_t> targetBatch;
  std::int64_t finalBatch = 0;
  std::int64_t validSizes = 0;
  Coverage coverage;
};

struct BatchSection {
  bool elastic = false;
  std::string version;                  // the job's own version ("fixed" without elasticity)
  config::ElasticityConfig elasticity;  // as planned (with the plan's overrides)
  std::vector<ExpectedSize> expected;   // expanded and normalised (weights sum to 1)
  std::vector<VersionPlan> versions;    // the job's version first
  std::optional<BatchSuggestion> suggestion;
  std::int64_t alternativesTried = 0;
  double tolerance = 0.0;
};

// ---- 2. checkpoint interval ----------------------------------------------------------------

struct IntervalPoint {
  double minutes = 0.0;           // requested interval
  double effectiveMinutes = 0.0;  // whole steps, as the simulator saves
  double analyticEttr = 0.0;      // Daly's ETTR at the effective interval
  sim::MetricSummary ettr;        // simulated
  std::string label;              // "young", "daly", "configured", "grid", "refine"
};

struct CheckpointSection {
  std::int64_t gpus = 0;  // the world size it is for (the recommended one)
  std::string failureModel;
  bool failures = false;        // false: the job never fails (no interval is optimal)
  double jobMtbfHours = 0.0;    // M (infinity without failures)
  double saveSeconds = 0.0;     // C
  double restartSeconds = 0.0;  // R = restart overhead + checkpoint load
  double stepSeconds = 0.0;
  double youngMinutes = 0.0;
  double dalyMinutes = 0.0;
  double exactDalyMinutes = 0.0;  // the true maximum of Daly's ETTR formula
  double dalyEttr = 0.0;          // analytic, at Daly's interval
  std::optional<double> configuredMinutes;

  bool simulated = false;
  std::string skipped;  // why the sweep did not run
  std::int64_t seeds = 0;
  double runHours = 0.0;             // simulated hours per replica (mean)
  std::int64_t reduction = 1;        // reduceForMonteCarlo's factor
  std::vector<IntervalPoint> curve;  // ascending interval
  double simulatedOptimumMinutes = 0.0;
  // At the simulated optimum, on fresh replicas (the hold-out), and on the sweep's replicas it
  // was chosen on (biased upwards: the best of many noisy means).
  sim::MetricSummary simulatedOptimumEttr;
  sim::MetricSummary simulatedOptimumInSampleEttr;
  sim::MetricSummary dalySimulatedEttr;
  sim::MetricSummary youngSimulatedEttr;
  sim::MetricSummary gainOverDaly;  // paired ETTR difference, optimum - Daly
  sim::MetricSummary gainOverYoung;

  double recommendedMinutes = 0.0;
  std::int64_t recommendedSteps = 0;
  std::string recommendedSource;  // "daly", "simulated", "configured", "none"
  std::string reason;
};

// ---- 3. scale table ------------------------------------------------------------------------

struct ScaleRow {
  std::int64_t gpus = 0;        // world size (GPUs running workers)
  std::int64_t nodes = 0;       // nodes rented
  std::int64_t rentedGpus = 0;  // nodes * gpus per node (idle slots are paid too)
  std::int64_t batch = 0;
  std::int64_t microBatch = 0;
  std::int64_t gradientAccumulation = 0;
  double stepSeconds = 0.0;
  double exposedCommSeconds = 0.0;
  double samplesPerSecond = 0.0;  // failure-free throughput
  double jobMtbfHours = 0.0;
  double intervalMinutes = 0.0;  // Daly's at this size (effective, whole steps)
  sim::MetricSummary ettr;       // analytic: mean only
  sim::MetricSummary goodput;    // samples per second including failures
  std::optional<sim::MetricSummary> timeToTrainHours;
  std::optional<sim::MetricSummary> gpuHours;
  std::optional<sim::MetricSummary> cost;
  bool simulated = false;
  std::int64_t reduction = 1;
  bool shown = false;  // in the displayed subset
};

struct ScaleSection {
  std::optional<std::int64_t> totalSamples;  // the work the time-to-train figures are for
  bool monteCarlo = false;
  std::int64_t seeds = 0;
  std::vector<ScaleRow> rows;  // every candidate world size, ascending
};

// ---- 4. recommendation ---------------------------------------------------------------------

struct Recommendation {
  Objective objective = Objective::Time;
  std::size_t row = 0;  // index into ScaleSection::rows
  std::int64_t gpus = 0;
  std::int64_t nodes = 0;
  std::int64_t batch = 0;
  std::int64_t microBatch = 0;
  std::int64_t gradientAccumulation = 0;
  double intervalMinutes = 0.0;
  std::int64_t intervalSteps = 0;
  double ettr = 0.0;
  double goodput = 0.0;
  std::optional<double> timeToTrainHours;
  std::optional<double> gpuHours;
  std::optional<double> cost;
  std::string reasons;      // one paragraph
  config::DsConfig config;  // the DeepSpeed config that reproduces the plan
  std::string configJson;   // config::toJson(config)
};

// ---- 5. checkpoint portability -------------------------------------------------------------

struct PortabilityRow {
  std::int64_t gpus = 0;
  std::int64_t microBatch = 0;
  std::int64_t gradientAccumulation = 0;
  std::int64_t batch = 0;
  bool sameBatch = true;  // the global batch (and so the step numbering) is unchanged
};

struct PortabilitySection {
  std::int64_t writtenAt = 0;
  std::int64_t zeroStage = 0;
  std::vector<PortabilityRow> rows;  // every world size the checkpoint resumes at, ascending
  std::vector<std::string> notes;
};

// ---- recovery modes side by side (the job sets recovery.mode live) ---------------------------
struct RecoveryMode {
  std::string mode;  // "checkpoint" or "live"
  double intervalMinutes = 0.0;
  std::int64_t intervalSteps = 0;
  sim::MetricSummary ettr;                 // on fresh replicas
  std::optional<double> timeToTrainHours;  // samples / (failure-free throughput x mean ETTR)
};
struct RecoverySection {
  bool compared = false;   // false: the job does not set recovery.mode live
  std::int64_t gpus = 0;   // the recommended world size
  std::int64_t nodes = 0;  // its nodes: the costs below are the scenario's at this count
  double reconfigureSeconds = 0.0;
  double restartSeconds = 0.0;   // restart overhead + checkpoint load
  double transferSeconds = 0.0;  // the state to a joiner: state_bytes at transfer_GBps
  // Where each cost comes from (sim::SecondsByNodes::describe): "given as a constant", or
  // measured up to some node count and extrapolated beyond it.
  std::string reconfigureSource;
  std::string restartSource;
  // job.failure_detection_seconds at these nodes, which both modes pay after a node failure
  // (the simulations include it), and where it comes from.
  double detectionSeconds = 0.0;
  std::string detectionSource;
  std::int64_t seeds = 0;
  // Checkpoint-restart at Daly's interval (its optimum for exponential failures); live recovery
  // at the plan's recommended interval (section 2's sweep ran with live recovery).
  RecoveryMode checkpoint;
  RecoveryMode live;
  sim::MetricSummary gain;  // paired ETTR difference, live - checkpoint
};

// ---- the plan ------------------------------------------------------------------------------

struct Plan {
  std::string name;
  std::string description;
  sim::ClusterSpec cluster;
  PlanSettings settings;
  std::string failureSummary;
  BatchSection batch;
  CheckpointSection checkpoint;
  ScaleSection scale;
  Recommendation recommendation;
  PortabilitySection portability;
  RecoverySection recovery;
  std::vector<std::string> warnings;
  double wallSeconds = 0.0;
  int threads = 1;
};

struct PlanProgress {
  std::string stage;  // "batch", "scale", "checkpoint", "recommendation"
  double fraction = 0.0;
};

struct PlanOptions {
  int threads = 0;  // overrides settings.threads when > 0
  std::function<void(const PlanProgress&)> progress;
  const std::atomic<bool>* cancel = nullptr;
  // Several processes (`mpirun -n K stretch plan`): every rank calls makePlan with its member of
  // the group; the replicas of every batch are split over the ranks and every rank makes the
  // same plan (rank 0's pilot timing decides an automatic replica count). Null: one process.
  sim::ReplicaGroup* group = nullptr;
};

Plan makePlan(const PlanInput& input, const PlanOptions& options = {});

// ---- pieces, exposed for tests and the GUI ---------------------------------------------------

// The expected available sizes, expanded over whole nodes and normalised.
std::vector<ExpectedSize> expectedSizes(const PlanInput& input);

// The world size a job runs at with `availableGpus` GPUs on nodes of gpusPerNode (the largest
// valid size the agent's node selection reaches; 0 when none): agent::planWorld's rule.
std::int64_t runningWorldSize(const sim::Scenario& scenario, std::int64_t availableGpus);

// Job MTBF in hours at `nodes` nodes (infinity without failures); see docs/planner.md.
double jobMtbfHours(const sim::Scenario& scenario, std::int64_t nodes);

// The DeepSpeed config that trains at `gpus` GPUs as the plan does: the job's config with the
// plan's elasticity overrides, or with the batch triple written out when elasticity is off.
config::DsConfig plannedConfig(const PlanInput& input, std::int64_t gpus);

}  // namespace stretch::planner
