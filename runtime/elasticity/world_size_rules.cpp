#include "runtime/elasticity/world_size_rules.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/common/check.hpp"
#include "runtime/common/error.hpp"

namespace stretch::elasticity {

using config::ElasticityConfig;
using config::ElasticityVersion;

namespace {

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

ElasticPlan planWithoutWorldSize(const ElasticityConfig& c) {
  if (c.version != ElasticityVersion::V0_2) {
    return computeElasticConfig(c);
  }
  // Version 0.2 needs the current world size and, for a size outside its list, builds a batch
  // for that size alone. Its list is version 0.1 solved in node units (DeepSpeed's
  // _get_compatible_gpus_v02): solve that to find a size inside the list, then ask the solver
  // itself at that size, so the plan is the solver's own.
  const auto solverAtOneNode = [&c] {
    SolveRequest request;
    request.worldSize = c.numGpusPerNode;
    return computeElasticConfig(c, request);
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
  ElasticPlan inNodes;
  try {
    inNodes = computeElasticConfig(nodes);
  } catch (const ElasticityError&) {
    solverAtOneNode();  // the same failure, in the solver's words for version 0.2
    throw;
  }
  SolveRequest request;
  request.worldSize = inNodes.validWorldSizes.front() * c.numGpusPerNode;
  ElasticPlan plan = computeElasticConfig(c, request);
  STRETCH_CHECK_EQ(plan.finalBatchSize, inNodes.finalBatchSize * dpPerNode,
                   "elasticity v0.2 batch in node units");
  STRETCH_CHECK_EQ(plan.validWorldSizes.size(), inNodes.validWorldSizes.size(),
                   "elasticity v0.2 valid sizes in node units");
  plan.microBatch.reset();
  plan.resolvedWorldSize = 0;
  return plan;
}

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
  const ElasticPlan plan = planWithoutWorldSize(c);
  finalBatch_ = plan.finalBatchSize;
  for (const WorldSizeRow& row : worldSizeTable(c, plan)) {
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
  return largestValidMultipleAtMost(1, gpus);
}

std::int64_t WorldSizeRules::largestValidMultipleAtMost(std::int64_t step,
                                                        std::int64_t gpus) const {
  if (step < 1 || gpus < step) {
    return 0;
  }
  std::map<std::int64_t, std::int64_t>& known = multiples_[step];
  if (const auto it = known.lower_bound(gpus); it != known.end() && it->second <= gpus) {
    return it->second;
  }
  std::int64_t answer = 0;
  if (elastic_) {
    for (auto it = std::upper_bound(validGpus_.begin(), validGpus_.end(), gpus);
         it != validGpus_.begin();) {
      --it;
      if (*it % step == 0) {
        answer = *it;
        break;
      }
    }
  } else {
    std::int64_t top = gpus;
    if (keys_.trainBatchSize) {
      // At most one sample per data-parallel rank and step.
      top = std::min(top, std::max<std::int64_t>(0, *keys_.trainBatchSize) * modelParallel_);
    }
    for (std::int64_t g = top / step * step; g >= step; g -= step) {
      if (isValid(g)) {
        answer = g;
        break;
      }
    }
  }
  known[gpus] = answer;
  return answer;
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

}  // namespace stretch::elasticity
