#include "runtime/agent/world_plan.hpp"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/common/check.hpp"
#include "runtime/common/error.hpp"
#include "runtime/elasticity/solver.hpp"

namespace stretch::agent {

namespace {

using config::ElasticityConfig;
using config::ElasticityVersion;

// The solver's plan without a world size of its own: final batch and every valid size.
elasticity::ElasticPlan referencePlan(const ElasticityConfig& c) {
  if (c.version != ElasticityVersion::V0_2) {
    return elasticity::computeElasticConfig(c);
  }
  // Version 0.2 needs the current world size and, for a size outside its list, builds a batch
  // for that size alone. Its list is version 0.1 solved in node units (DeepSpeed's
  // _get_compatible_gpus_v02): solve that to find a size inside the list, then ask the solver
  // itself at that size, so the plan is the solver's own.
  const auto solverAtOneNode = [&c] {
    elasticity::SolveRequest request;
    request.worldSize = c.numGpusPerNode;
    return elasticity::computeElasticConfig(c, request);
  };
  if (c.modelParallelSize < 1 || c.numGpusPerNode % c.modelParallelSize != 0 ||
      c.maxGpus / c.numGpusPerNode < 1 ||
      c.maxTrainBatchSize / (c.numGpusPerNode / c.modelParallelSize) < 1) {
    solverAtOneNode();  // throws the solver's own error for these
    STRETCH_CHECK(false, "elasticity v0.2 accepted num_gpus_per_node {} / max_gpus {}",
                  c.numGpusPerNode, c.maxGpus);
  }
  const std::int64_t dpPerNode = c.numGpusPerNode / c.modelParallelSize;
  ElasticityConfig nodes = c;
  nodes.version = ElasticityVersion::V0_1;
  nodes.modelParallelSize = 1;
  nodes.maxTrainBatchSize = c.maxTrainBatchSize / dpPerNode;
  nodes.minGpus = std::max<std::int64_t>(1, c.minGpus / c.numGpusPerNode);
  nodes.maxGpus = c.maxGpus / c.numGpusPerNode;
  elasticity::ElasticPlan inNodes;
  try {
    inNodes = elasticity::computeElasticConfig(nodes);
  } catch (const ElasticityError&) {
    solverAtOneNode();  // the same failure, in the solver's words for version 0.2
    throw;
  }
  elasticity::SolveRequest request;
  request.worldSize = inNodes.validWorldSizes.front() * c.numGpusPerNode;
  elasticity::ElasticPlan plan = elasticity::computeElasticConfig(c, request);
  STRETCH_CHECK_EQ(plan.finalBatchSize, inNodes.finalBatchSize * dpPerNode,
                   "elasticity v0.2 batch in node units");
  STRETCH_CHECK_EQ(plan.validWorldSizes.size(), inNodes.validWorldSizes.size(),
                   "elasticity v0.2 valid sizes in node units");
  plan.microBatch.reset();
  plan.resolvedWorldSize = 0;
  return plan;
}

std::string shortList(const std::vector<std::int64_t>& values) {
  constexpr std::size_t kShown = 16;
  if (values.size() <= kShown) {
    return fmt::format("[{}]", fmt::join(values, ", "));
  }
  const std::vector<std::int64_t> head(values.begin(), values.begin() + kShown - 1);
  return fmt::format("[{}, ..., {}] ({} sizes)", fmt::join(head, ", "), values.back(),
                     values.size());
}

}  // namespace

WorldSizeRules::WorldSizeRules(const config::DsConfig& training, std::int64_t modelParallelSize) {
  const ElasticityConfig& c = training.elasticity;
  elastic_ = c.enabled;
  if (!elastic_) {
    if (modelParallelSize < 1) {
      throw ConfigError(ErrorDetail{"model_parallel_size", std::to_string(modelParallelSize),
                                    "a positive integer"});
    }
    modelParallel_ = modelParallelSize;
    keys_ = training.batch;
    if (!keys_.trainBatchSize && !keys_.microBatchPerGpu) {
      config::resolveBatch(keys_, 1);  // throws: no size can resolve these keys
    }
    return;
  }
  modelParallel_ = c.version == ElasticityVersion::V0_1 ? 1 : c.modelParallelSize;
  const elasticity::ElasticPlan plan = referencePlan(c);
  finalBatch_ = plan.finalBatchSize;
  for (const elasticity::WorldSizeRow& row : elasticity::worldSizeTable(c, plan)) {
    validGpus_.push_back(row.gpus);
    elasticBatches_[row.gpus] =
        config::BatchTriple{plan.finalBatchSize, row.microBatch, row.gradientAccumulation};
  }
  STRETCH_CHECK(std::is_sorted(validGpus_.begin(), validGpus_.end()), "valid sizes ascending");
}

std::optional<config::BatchTriple> WorldSizeRules::batchFor(std::int64_t gpus) const {
  if (gpus < 1) {
    return std::nullopt;
  }
  if (elastic_) {
    const auto it = elasticBatches_.find(gpus);
    return it == elasticBatches_.end() ? std::nullopt : std::optional(it->second);
  }
  if (gpus % modelParallel_ != 0) {
    return std::nullopt;
  }
  if (const auto it = resolved_.find(gpus); it != resolved_.end()) {
    return it->second;
  }
  std::optional<config::BatchTriple> triple;
  try {
    triple = config::resolveBatch(keys_, gpus / modelParallel_);
  } catch (const ConfigError&) {
    triple.reset();
  }
  resolved_.emplace(gpus, triple);
  return triple;
}

std::int64_t WorldSizeRules::largestValidAtMost(std::int64_t gpus) const {
  if (elastic_) {
    const auto it = std::upper_bound(validGpus_.begin(), validGpus_.end(), gpus);
    return it == validGpus_.begin() ? 0 : *std::prev(it);
  }
  std::int64_t g = gpus;
  if (keys_.trainBatchSize) {
    // At most one sample per data-parallel rank and step.
    g = std::min(g, std::max<std::int64_t>(0, *keys_.trainBatchSize) * modelParallel_);
  }
  for (; g >= 1; --g) {
    if (isValid(g)) {
      return g;
    }
  }
  return 0;
}

std::string WorldSizeRules::describeValid() const {
  if (elastic_) {
    return fmt::format("{} GPUs (elastic batch {})", shortList(validGpus_), *finalBatch_);
  }
  if (!keys_.trainBatchSize) {
    return fmt::format("any multiple of the model-parallel size {} (elasticity disabled)",
                       modelParallel_);
  }
  std::vector<std::int64_t> sizes;
  const std::int64_t limit = std::min<std::int64_t>(*keys_.trainBatchSize * modelParallel_, 4096);
  for (std::int64_t g = 1; g <= limit; ++g) {
    if (isValid(g)) {
      sizes.push_back(g);
    }
  }
  return fmt::format("{} GPUs (elasticity disabled: those train_batch_size {} splits into)",
                     shortList(sizes), *keys_.trainBatchSize);
}

std::string_view toString(NodeSelection selection) noexcept {
  switch (selection) {
    case NodeSelection::WholeNodes:
      return "whole-nodes";
    case NodeSelection::PartialNodes:
      return "partial-nodes";
  }
  return "?";
}

std::optional<WorldPlan> planWorld(std::vector<CandidateNode> candidates,
                                   const WorldSizeRules& rules, NodeSelection selection) {
  std::int64_t total = 0;
  for (const CandidateNode& node : candidates) {
    STRETCH_CHECK_GE(node.slots, 1, "slots of node {}", node.nodeId);
    total += node.slots;
  }
  std::int64_t cap = total;
  if (rules.elastic()) {
    cap = std::min(cap, rules.validGpuCounts().empty() ? 0 : rules.validGpuCounts().back());
  }
  const std::size_t n = candidates.size();
  std::vector<std::int64_t> used(n, 0);
  std::int64_t worldSize = 0;

  if (selection == NodeSelection::PartialNodes) {
    worldSize = rules.largestValidAtMost(cap);
    std::int64_t rest = worldSize;
    for (std::size_t i = 0; i < n && rest > 0; ++i) {
      used[i] = std::min(candidates[i].slots, rest);
      rest -= used[i];
    }
  } else {
    const bool equal = std::all_of(candidates.begin(), candidates.end(), [&](const auto& c) {
      return c.slots == candidates.front().slots;
    });
    if (equal && n > 0) {
      const std::int64_t s = candidates.front().slots;
      for (std::int64_t k = std::min<std::int64_t>(static_cast<std::int64_t>(n), cap / s); k >= 1;
           --k) {
        if (rules.isValid(k * s)) {
          worldSize = k * s;
          std::fill(used.begin(), used.begin() + k, s);
          break;
        }
      }
    } else if (cap > 0) {
      // 0/1 subset sums; first[sum] = the first candidate with which `sum` became reachable, so
      // the subset found for a sum ends as early in the candidate order as possible.
      constexpr std::int64_t kUnreached = -1;
      std::vector<std::int64_t> first(static_cast<std::size_t>(cap) + 1, kUnreached);
      first[0] = static_cast<std::int64_t>(n);
      for (std::size_t i = 0; i < n; ++i) {
        const std::int64_t s = candidates[i].slots;
        for (std::int64_t sum = cap; sum >= s; --sum) {
          const auto at = static_cast<std::size_t>(sum);
          if (first[at] == kUnreached && first[at - static_cast<std::size_t>(s)] != kUnreached) {
            first[at] = static_cast<std::int64_t>(i);
          }
        }
      }
      for (std::int64_t sum = cap; sum >= 1; --sum) {
        if (first[static_cast<std::size_t>(sum)] != kUnreached && rules.isValid(sum)) {
          worldSize = sum;
          break;
        }
      }
      for (std::int64_t rest = worldSize; rest > 0;) {
        const auto i = static_cast<std::size_t>(first[static_cast<std::size_t>(rest)]);
        STRETCH_CHECK_LT(i, n, "subset reconstruction at {}", rest);
        used[i] = candidates[i].slots;
        rest -= candidates[i].slots;
      }
    }
  }
  if (worldSize < 1) {
    return std::nullopt;
  }
  WorldPlan plan;
  plan.worldSize = worldSize;
  plan.used.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (used[i] > 0) {
      plan.used.push_back(
          {std::move(candidates[i].nodeId), candidates[i].slots, used[i], candidates[i].key});
    } else {
      plan.spare.push_back(std::move(candidates[i].nodeId));
    }
  }
  STRETCH_CHECK_EQ(std::accumulate(plan.used.begin(), plan.used.end(), std::int64_t{0},
                                   [](std::int64_t a, const NodeShare& s) { return a + s.used; }),
                   worldSize, "world plan");
  return plan;
}

}  // namespace stretch::agent
