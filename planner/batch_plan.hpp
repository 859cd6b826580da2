#pragma once
// Section 1 of a plan: the elastic batch for each solver version, the valid world sizes with
// micro batch and gradient accumulation, coverage of the expected cluster sizes, and the search
// for a nearby configuration that covers more (planner/plan.hpp describes the section).
//
// Not thread-safe per object (elasticity::WorldSizeRules caches); the functions are reentrant.

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "planner/plan.hpp"
#include "runtime/agent/world_plan.hpp"
#include "runtime/elasticity/world_size_rules.hpp"

namespace stretch::planner {

// Which world sizes a job reaches, under the agent's node selection: every valid size (with whole
// nodes: every valid multiple of gpus_per_node) up to maxGpus, so that "the world a job runs at
// with A GPUs available" is one binary search.
class SizeOracle {
 public:
  // Throws what elasticity::WorldSizeRules throws for a config no solver accepts.
  SizeOracle(const config::DsConfig& config, std::int64_t modelParallelSize,
             std::int64_t gpusPerNode, agent::NodeSelection selection, std::int64_t maxGpus);

  const elasticity::WorldSizeRules& rules() const noexcept { return *rules_; }
  // Reachable valid sizes, ascending.
  const std::vector<std::int64_t>& sizes() const noexcept { return sizes_; }
  // The largest reachable valid size <= available (0 when none).
  std::int64_t running(std::int64_t available) const noexcept;
  bool reachable(std::int64_t gpus) const noexcept;
  std::optional<config::BatchTriple> batchFor(std::int64_t gpus) const;
  Coverage coverage(const std::vector<ExpectedSize>& expected) const noexcept;

 private:
  std::unique_ptr<elasticity::WorldSizeRules> rules_;
  std::int64_t gpusPerNode_ = 1;
  bool wholeNodes_ = true;
  std::vector<std::int64_t> sizes_;
};

// The job's config with the plan's elasticity overrides (max_batch, micro_batch_sizes). Throws
// ConfigError naming plan.max_batch / plan.micro_batch_sizes when the config has no enabled
// elasticity section to override.
config::DsConfig effectiveConfig(const PlanInput& input);

// Section 1. `expected` from expectedSizes(input).
BatchSection computeBatchSection(const PlanInput& input, const config::DsConfig& config,
                                 const std::vector<ExpectedSize>& expected);

}  // namespace stretch::planner
