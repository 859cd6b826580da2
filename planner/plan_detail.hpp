#pragma once
// makePlan's private parts, shared by the files that implement it (private to planner/):
// plan.cpp (the public pieces of plan.hpp, sections 1 and 5, makePlan), plan_scale.cpp
// (section 3, the scale table, and section 4, the recommendation) and plan_checkpoint.cpp
// (section 2, the checkpoint interval sweep, and the recovery modes side by side). Holds what
// every section reads (Planning), the progress reporter, the helpers more than one section uses
// and the sections' entry points.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "planner/batch_plan.hpp"
#include "planner/plan.hpp"
#include "planner/replicas.hpp"

namespace stretch::planner::detail {

inline double inf() {
  return std::numeric_limits<double>::infinity();
}

class Reporter {
 public:
  explicit Reporter(const PlanOptions& options) : options_(options) {}

  void report(const std::string& stage, double fraction) {
    if (!options_.progress) {
      return;
    }
    std::lock_guard lock(mutex_);
    fraction = std::clamp(fraction, last_, 1.0);
    last_ = fraction;
    options_.progress(PlanProgress{stage, fraction});
  }
  void checkCancel() const {
    if (options_.cancel != nullptr && options_.cancel->load()) {
      throw PlanCancelled();
    }
  }

 private:
  const PlanOptions& options_;
  std::mutex mutex_;
  double last_ = 0.0;
};

// What every section reads: the job, the caller's options and what is derived from them once.
struct Planning {
  const PlanInput& input;
  const PlanOptions& options;
  Reporter& reporter;
  int threads = 1;
  config::DsConfig config;             // effectiveConfig(input)
  std::vector<ExpectedSize> expected;  // expectedSizes(input)
  double saveSeconds = 0.0;            // C

  // R = restart overhead + checkpoint load for a job of `nodes` nodes: the scenario's
  // restart_overhead_seconds may grow with the nodes (sim/node_cost.hpp).
  double restartSeconds(std::int64_t nodes) const {
    return input.scenario.job.restartOverheadSeconds.at(nodes) +
           input.scenario.job.checkpoint.loadSeconds;
  }
};

// A one-line summary of the failure model, for the checkpoint section and the reasons.
std::string failureSummary(const sim::Scenario& s);

// The requested checkpoint interval of the job as configured, in minutes.
std::optional<double> configuredInterval(const sim::Scenario& s, double stepSeconds);

// The scenario one Monte Carlo evaluation runs (definition in plan.cpp says how it is cut).
ReducedScenario evaluationScenario(const sim::Scenario& base, const config::DsConfig& config,
                                   std::int64_t nodes, std::int64_t worldSize,
                                   std::optional<double> intervalMinutes, double longestMinutes,
                                   double mtbfHours, double restartSeconds);

// Objective score: larger is better.
double score(Objective objective, double ettr, double goodput, std::int64_t rentedGpus);

// The samples the time-to-train figures of a row with global batch `batch` are for.
std::optional<std::int64_t> trainingSamples(const ScaleSection& scale, const sim::Scenario& sc,
                                            std::int64_t batch);

// The row that optimises the objective (among the simulated rows only, when asked).
std::size_t bestRow(const ScaleSection& scale, Objective objective, bool simulatedOnly);

// The sections, numbered as plan.hpp numbers them.
// 1 (plan.cpp)
BatchSection batchSection(const Planning& p);
// 2 (plan_checkpoint.cpp)
CheckpointSection checkpointSection(const Planning& p, const ScaleRow& chosen,
                                    const std::string& failureSummary,
                                    std::vector<std::string>& warnings);
// 3 (plan_scale.cpp)
ScaleSection scaleSection(const Planning& p, const SizeOracle& oracle, bool elastic);
// 4 (plan_scale.cpp)
Recommendation recommendationSection(const Planning& p, const Plan& plan, std::size_t best);
// 5 (plan.cpp)
PortabilitySection portabilitySection(const Planning& p, const SizeOracle& oracle,
                                      const ScaleRow& chosen);
// Recovery modes side by side (plan_checkpoint.cpp)
RecoverySection recoverySection(const Planning& p, const Plan& plan, const ScaleRow& chosen);

}  // namespace stretch::planner::detail
