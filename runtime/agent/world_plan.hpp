#pragma once
// Which world sizes a job may run at, and which nodes run it: the part of the elastic agent that
// turns "these nodes with these slots are available" into "start this many workers on these
// nodes with this batch". Used by AgentStateMachine, and by the simulator and planner to ask the
// same questions.
//
// Contract:
//  - A world size is a number of GPUs, i.e. of worker processes (one per slot used).
//  - WorldSizeRules, elasticity enabled: a size is valid when the elastic solver lists it. The
//    solver is run once; its valid sizes are data-parallel sizes for versions 0.2 and exact and
//    are multiplied here by the section's model_parallel_size (v0.1: GPU counts, as solved).
//    Every valid size trains the solver's final batch; the batch triple of a size is the
//    solver's (microBatchFor: the largest configured micro batch that divides, and the gradient
//    accumulation that completes the batch), the one the workers' runtime resolves
//    (elasticity::resolveTrainingBatch). Version 0.2's fallback (DeepSpeed builds a batch of its
//    own for a size outside the list) is never used: such a size is simply not valid, so the
//    global batch never changes when the job scales.
//  - WorldSizeRules, elasticity disabled: a size is valid when it is a multiple of the
//    model-parallel size and the batch keys resolve for its data-parallel size
//    (config::resolveBatch does not throw); e.g. train_batch_size 32 with micro batch 4 allows
//    1, 2, 4 and 8 data-parallel ranks only. Only train_micro_batch_size_per_gpu (with or
//    without gradient_accumulation_steps) allows every size.
//  - planWorld chooses the largest valid size the candidate nodes can hold and the nodes that
//    run it (see NodeSelection). Nodes left out are spare: alive, in the job, idle.
// Pure: no I/O, no clock, no global state. WorldSizeRules caches answers (not thread-safe).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/config/batch.hpp"
#include "runtime/config/ds_config.hpp"

namespace stretch::agent {

class WorldSizeRules {
 public:
  // training: the job's DeepSpeed config (its elasticity section and batch keys).
  // modelParallelSize: GPUs per data-parallel rank when elasticity is disabled (with elasticity
  // the section's model_parallel_size is used). Throws what the elastic solver throws when the
  // section is enabled but has no plan (ElasticityConfigError, ElasticityError), and ConfigError
  // for modelParallelSize < 1.
  explicit WorldSizeRules(const config::DsConfig& training, std::int64_t modelParallelSize = 1);

  bool elastic() const noexcept { return elastic_; }
  // GPUs per data-parallel rank.
  std::int64_t modelParallelSize() const noexcept { return modelParallel_; }
  // Elastic: the global batch every valid size trains. nullopt without elasticity.
  std::optional<std::int64_t> finalBatch() const noexcept { return finalBatch_; }
  // Elastic: every valid GPU count, ascending. Empty without elasticity.
  const std::vector<std::int64_t>& validGpuCounts() const noexcept { return validGpus_; }

  bool isValid(std::int64_t gpus) const { return batchFor(gpus).has_value(); }
  // The batch triple the job trains with at `gpus` GPUs; nullopt when the size is not valid.
  std::optional<config::BatchTriple> batchFor(std::int64_t gpus) const;
  // The largest valid size <= gpus; 0 when there is none.
  std::int64_t largestValidAtMost(std::int64_t gpus) const;
  // The valid sizes for messages: "[2, 4, 8, 16] GPUs" (long lists shortened), or the rule when
  // elasticity is disabled.
  std::string describeValid() const;

 private:
  bool elastic_ = false;
  std::int64_t modelParallel_ = 1;
  std::optional<std::int64_t> finalBatch_;
  std::vector<std::int64_t> validGpus_;
  std::map<std::int64_t, config::BatchTriple> elasticBatches_;  // by GPU count
  config::BatchKeys keys_;
  mutable std::map<std::int64_t, std::optional<config::BatchTriple>> resolved_;  // non-elastic
};

// How a world is laid out on nodes.
//  WholeNodes  : a node runs a worker on every one of its slots or none. The world size is the
//                slot sum of a subset of the candidates: the largest valid sum, using the
//                earliest candidates possible (the subset whose last node comes first).
//                O(candidates) with equal slot counts, O(candidates x total slots) otherwise.
//  PartialNodes: any size up to the total: the largest valid size <= total slots, filling the
//                candidates in order; the last node used may leave slots idle.
enum class NodeSelection { WholeNodes, PartialNodes };

std::string_view toString(NodeSelection selection) noexcept;  // "whole-nodes", "partial-nodes"

struct CandidateNode {
  std::string nodeId;
  std::int64_t slots = 0;
  std::uint64_t key = 0;  // the caller's handle for the node, copied to its NodeShare
};

struct NodeShare {
  std::string nodeId;
  std::int64_t slots = 0;  // the node's slots
  std::int64_t used = 0;   // workers it runs, 1..slots
  std::uint64_t key = 0;   // the candidate's key
  bool operator==(const NodeShare&) const = default;
};

struct WorldPlan {
  std::int64_t worldSize = 0;
  std::vector<NodeShare> used;     // in candidate order; node rank = index
  std::vector<std::string> spare;  // candidates that run nothing, in candidate order
  bool operator==(const WorldPlan&) const = default;
};

// The largest valid world the candidates (in preference order; slots >= 1 each) can run, or
// nullopt when no valid size fits. Takes the candidates by value: pass an rvalue and their ids
// move into the plan.
std::optional<WorldPlan> planWorld(std::vector<CandidateNode> candidates,
                                   const WorldSizeRules& rules, NodeSelection selection);

}  // namespace stretch::agent
