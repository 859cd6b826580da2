#pragma once
// What the planner plans: a simulator scenario (sim/scenario.hpp: cluster, job, failures, ...)
// plus an optional "plan" object with the search ranges and the objective. A job file is a
// scenario file with that one extra key (docs/planner.md has the full schema):
//
//   "plan": {
//     "objective": "time" | "cost" | "ettr",          what the recommendation optimises (time)
//     "price_per_gpu_hour": 2.5,                       optional; cost columns need it
//     "seeds": 0,                                      0: analytic scale table; N: N replicas
//     "sweep_seeds": 0,                                replicas per checkpoint interval (0: auto)
//     "threads": 0,                                    0: every hardware thread
//     "versions": ["0.1", "0.2", "exact"],             batch-plan solver versions to compare
//     "max_batch": 2000,                               overrides elasticity.max_train_batch_size
//     "micro_batch_sizes": [2, 4, 6],                  overrides elasticity.micro_batch_sizes
//     "micro_batch_candidates": [[2, 4, 8], [1, 2, 4]],   extra sets the suggestion tries
//     "batch_tolerance": 0.1,                          band around the batch for suggestions
//     "world_sizes": {"min_gpus": 64, "max_gpus": 512},   expected available GPUs (uniform)
//     "expected_world_sizes": {"512": 0.7, "504": 0.2, "496": 0.1},   or a distribution
//     "checkpoint_interval_minutes": {"min": 5, "max": 240},   sweep range
//     "max_rows": 12                                   scale-table rows shown / simulated
//   }
//
// Errors: a bad value is a stretch::ConfigError naming "plan.<key>", the value and what was
// expected; the scenario part throws what sim::parseScenario throws. Unknown keys, in the plan
// object or anywhere in the scenario, are warnings (PlanInput::warnings), never errors.
// Thread safety: plain values; the parse functions are reentrant.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/config/elasticity_config.hpp"
#include "sim/monte_carlo.hpp"
#include "sim/scenario.hpp"

namespace stretch::planner {

enum class Objective { Time, Cost, Ettr };
std::string_view toString(Objective objective) noexcept;  // "time", "cost", "ettr"
std::optional<Objective> parseObjective(std::string_view text) noexcept;

// One expected cluster size: `gpus` GPUs available, with a relative weight.
struct ExpectedSize {
  std::int64_t gpus = 0;
  double weight = 1.0;
  bool operator==(const ExpectedSize&) const = default;
};

// Most replicas the planner accepts per evaluation: the simulator's one bound (sim/monte_carlo.hpp;
// beyond it the run takes hours and its summary most of a machine's memory).
using sim::kMaxSeeds;
// Replicas of the checkpoint sweep when neither seeds nor sweep_seeds is given, and the fewest a
// time budget may cut that to for jobs whose replicas are slow (docs/planner.md, "Checkpoint
// interval").
inline constexpr std::int64_t kDefaultSweepSeeds = 100;
inline constexpr std::int64_t kMinAutoSweepSeeds = 16;

struct PlanSettings {
  Objective objective = Objective::Time;
  std::optional<double> pricePerGpuHour;  // currency units per GPU-hour
  std::int64_t seeds = 0;                 // scale table: 0 analytic, N Monte Carlo replicas
  std::int64_t sweepSeeds = 0;            // checkpoint sweep replicas; 0: seeds, or automatic
  int threads = 0;                        // 0: std::thread::hardware_concurrency()
  std::vector<config::ElasticityVersion> versions = {config::ElasticityVersion::V0_1,
                                                     config::ElasticityVersion::V0_2,
                                                     config::ElasticityVersion::Exact};
  std::optional<std::int64_t> maxBatch;
  std::optional<std::vector<std::int64_t>> microBatches;
  std::vector<std::vector<std::int64_t>> microBatchCandidates;
  double batchTolerance = 0.10;
  // Expected available GPUs. Empty: every whole-node count of the cluster within the elasticity
  // section's [min_gpus, max_gpus] (or 1..cluster nodes without elasticity), equally likely.
  std::vector<ExpectedSize> expectedSizes;
  bool expectedFromRange = false;  // expectedSizes came from "world_sizes" (a range)
  std::optional<double> intervalMinMinutes;
  std::optional<double> intervalMaxMinutes;
  std::int64_t maxRows = 12;
};

struct PlanInput {
  std::string name;         // the scenario's name
  std::string description;  // the job file's "description", if any
  sim::Scenario scenario;
  PlanSettings settings;
  std::vector<std::string> warnings;  // the scenario's and the plan object's
};

// Parses a job from JSON text; baseDir resolves the scenario's relative paths.
PlanInput parsePlanInput(std::string_view text, const std::filesystem::path& baseDir,
                         const sim::ScenarioOptions& options = {});
// Reads and parses a job file (IoError when it cannot be read); named after its stem.
PlanInput loadPlanInput(const std::filesystem::path& path,
                        const sim::ScenarioOptions& options = {});

// The bundled example job (fixtures/plans/example.json, compiled into the library so that
// `stretch plan` with no argument works anywhere), its text and the parsed input.
std::string_view bundledExampleText() noexcept;
PlanInput bundledExample();

}  // namespace stretch::planner
