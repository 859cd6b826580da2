#include "runtime/elasticity/solver.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/common/check.hpp"
#include "runtime/common/error.hpp"
#include "runtime/common/int128.hpp"
#include "runtime/elasticity/detail/exact_solver.hpp"
#include "runtime/elasticity/detail/valid_sizes.hpp"
#include "runtime/elasticity/number_theory.hpp"

namespace stretch::elasticity {

using config::ElasticityConfig;
using config::ElasticityVersion;
using detail::BatchChoice;
using detail::MicroUnits;

namespace {

std::string listText(const std::vector<std::int64_t>& values) {
  return fmt::format("[{}]", fmt::join(values, ", "));
}

// DeepSpeed's _get_compatible_gpus_v01 at HEAD (PR #8237): candidates are each micro batch and
// their LCM scaled by the largest highly composite number that keeps them <= cap; the winner has
// the most valid GPU counts in [minSize, maxSize], ties to the larger (or smaller) batch.
// The cap as messages name it; v0.2 solves in node units with cap / dpPerNode.
std::string capText(std::int64_t fullCap, std::int64_t dpPerNode) {
  if (dpPerNode == 1) {
    return fmt::format("max_train_batch_size ({})", fullCap);
  }
  return fmt::format("max_train_batch_size / data-parallel GPUs per node ({} / {} = {})", fullCap,
                     dpPerNode, fullCap / dpPerNode);
}

// fullCap and dpPerNode only serve error messages (cap == fullCap / dpPerNode).
BatchChoice solveV01(const std::vector<std::int64_t>& microBatches, std::int64_t cap,
                     std::int64_t minSize, std::int64_t maxSize, bool preferLarger,
                     std::int64_t fullCap, std::int64_t dpPerNode) {
  for (std::size_t i = 0; i < microBatches.size(); ++i) {
    if (microBatches[i] > cap) {
      throw ElasticityConfigError(ErrorDetail{
          fmt::format("elasticity.micro_batch_sizes[{}]", i), std::to_string(microBatches[i]),
          fmt::format("at most {}", capText(fullCap, dpPerNode))});
    }
  }
  const auto ucap = static_cast<std::uint64_t>(cap);

  // Bases: every micro batch and their LCM (skipped when it exceeds the cap, PR #8237).
  std::vector<std::pair<std::uint64_t, Factorization>> bases;
  bases.reserve(microBatches.size() + 1);
  std::uint64_t lcm = 1;
  Factorization lcmFactors;
  for (std::int64_t mb : microBatches) {
    const auto u = static_cast<std::uint64_t>(mb);
    if (std::any_of(bases.begin(), bases.end(), [u](const auto& b) { return b.first == u; })) {
      continue;
    }
    Factorization f = factorize(u);
    if (lcm <= ucap) {
      lcm = lcmSaturating(lcm, u, ucap);
      lcmFactors = lcmOf(lcmFactors, f);  // from the parts, never re-factorised
    }
    bases.emplace_back(u, f);
  }
  if (lcm <= ucap) {
    bases.emplace_back(lcm, lcmFactors);
  }

  const MicroUnits units(microBatches, 1, ucap);
  const auto lo = static_cast<std::uint64_t>(minSize);
  const auto hi = static_cast<std::uint64_t>(maxSize);
  std::uint64_t bestBatch = 0;
  std::uint64_t bestCount = 0;
  Factorization bestFactors;
  std::vector<std::uint64_t> seen;
  seen.reserve(bases.size());
  for (const auto& [base, baseFactors] : bases) {
    const std::int64_t hcn = largestHcnAtMost(static_cast<std::int64_t>(ucap / base));
    const std::uint64_t candidate = base * static_cast<std::uint64_t>(hcn);
    if (std::find(seen.begin(), seen.end(), candidate) != seen.end()) {
      continue;
    }
    seen.push_back(candidate);
    const Factorization factors = multiply(baseFactors, hcnFactorization(hcn));
    const std::uint64_t count = detail::countValidSizes(candidate, factors, units, lo, hi);
    // Most valid sizes; ties to the larger (or smaller) batch, whatever the candidate order.
    const bool better =
        count > bestCount || (count == bestCount && count > 0 &&
                              (preferLarger ? candidate > bestBatch : candidate < bestBatch));
    if (better) {
      bestBatch = candidate;
      bestCount = count;
      bestFactors = factors;
    }
  }
  if (bestCount == 0) {
    // DeepSpeed returns an empty list or None here, which fails later with a TypeError.
    throw ElasticityError(fmt::format(
        "no valid world size: none of the candidate batch sizes <= {} splits into micro batches "
        "{} across any world size in [{}, {}]; widen min_gpus/max_gpus, raise "
        "max_train_batch_size or add micro batch sizes",
        capText(fullCap, dpPerNode), listText(microBatches), minSize, maxSize));
  }
  BatchChoice choice;
  choice.batch = static_cast<std::int64_t>(bestBatch);
  choice.valid = detail::listValidSizes(bestBatch, bestFactors, units, lo, hi);
  return choice;
}

// A micro batch dividing batch / worldSize: the largest (prefer_larger, and always for DeepSpeed's
// runtime path) or the smallest. Independent of the order of micro_batch_sizes.
std::optional<std::int64_t> pickMicroBatch(const std::vector<std::int64_t>& microBatches,
                                           std::int64_t batch, std::int64_t worldSize,
                                           bool largest) {
  if (worldSize <= 0 || batch % worldSize != 0) {
    return std::nullopt;
  }
  const std::int64_t perRank = batch / worldSize;
  std::optional<std::int64_t> best;
  for (std::int64_t mb : microBatches) {
    if (perRank % mb == 0 && (!best || (largest ? mb > *best : mb < *best))) {
      best = mb;
    }
  }
  return best;
}

// Parses a WORLD_SIZE-like value: digits only (DeepSpeed's str.isnumeric), > 0.
std::int64_t parseWorldSize(const std::string& text, const std::string& name) {
  std::int64_t value = 0;
  const bool digits = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) != 0;
  });
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (!digits || ec != std::errc() || end != text.data() + text.size() || value <= 0) {
    throw ElasticityConfigError(
        ErrorDetail{name, fmt::format("\"{}\"", text), "a positive integer number of GPUs"});
  }
  return value;
}

// The world size a v0.1/exact micro batch refers to when none was passed (PR #8286's rule for
// DeepSpeed issue #8156, where DeepSpeed divides by zero instead).
std::int64_t worldSizeFromEnvironment(const SolveRequest& request, std::string_view why) {
  if (!request.envWorldSize) {
    throw ElasticityConfigError(ErrorDetail{
        "WORLD_SIZE", "(unset)",
        fmt::format("the job's total GPU count, needed {}; pass a world size or set WORLD_SIZE",
                    why)});
  }
  return parseWorldSize(*request.envWorldSize, "WORLD_SIZE");
}

struct V02Result {
  BatchChoice choice;
  std::int64_t dataParallelSize = 0;
  std::optional<std::int64_t> candidateMicroBatch;
};

// DeepSpeed's _get_compatible_gpus_v02 with its crashes and unusable answers fixed (see
// docs/compatibility.md): the data-parallel size is currentGpus / model_parallel_size in integer
// arithmetic, and the micro batch is sized from it (DeepSpeed PR #8395).
V02Result solveV02(const ElasticityConfig& c, std::int64_t currentGpus) {
  const std::int64_t dpPerNode = detail::dataParallelPerNode(c);
  const std::int64_t maxNodes = c.maxGpus / c.numGpusPerNode;
  if (maxNodes < 1) {
    // DeepSpeed turns 0 nodes into "no upper bound".
    throw ElasticityConfigError(ErrorDetail{
        "elasticity.max_gpus", std::to_string(c.maxGpus),
        fmt::format("at least num_gpus_per_node ({}): version 0.2 scales in whole nodes",
                    c.numGpusPerNode)});
  }
  const std::int64_t minNodes = std::max<std::int64_t>(1, c.minGpus / c.numGpusPerNode);
  const std::int64_t capNodes = c.maxTrainBatchSize / dpPerNode;
  if (capNodes < 1) {
    throw ElasticityConfigError(
        ErrorDetail{"elasticity.max_train_batch_size", std::to_string(c.maxTrainBatchSize),
                    fmt::format("at least the data-parallel GPUs per node ({}) times a micro batch",
                                dpPerNode)});
  }

  if (currentGpus % c.modelParallelSize != 0) {
    throw ElasticityIncompatibleWorldSize(
        ErrorDetail{"world_size", std::to_string(currentGpus),
                    fmt::format("a multiple of model_parallel_size ({})", c.modelParallelSize)});
  }
  const std::int64_t currentDp = currentGpus / c.modelParallelSize;

  V02Result result;
  result.dataParallelSize = currentDp;
  BatchChoice nodes = solveV01(c.microBatchSizes, capNodes, minNodes, maxNodes, c.preferLargerBatch,
                               c.maxTrainBatchSize, dpPerNode);
  result.choice.batch = nodes.batch * dpPerNode;
  result.choice.valid = std::move(nodes.valid);
  for (std::int64_t& n : result.choice.valid) {
    n *= dpPerNode;  // node counts to data-parallel sizes
  }
  if (std::binary_search(result.choice.valid.begin(), result.choice.valid.end(), currentDp)) {
    result.candidateMicroBatch =
        pickMicroBatch(c.microBatchSizes, result.choice.batch, currentDp, c.preferLargerBatch);
    return result;
  }

  // Fallback: the current size is not among the valid ones, so DeepSpeed builds a batch for this
  // size alone - the largest multiple of (mb * dp) <= cap for each mb, then the largest (or
  // smallest) of those. DeepSpeed may pick 0 here; Stretch only considers positive batches.
  std::optional<std::int64_t> pick;
  for (std::int64_t mb : c.microBatchSizes) {
    const auto unit = static_cast<UInt128>(mb) * static_cast<UInt128>(currentDp);
    if (unit > static_cast<UInt128>(c.maxTrainBatchSize)) {
      continue;
    }
    const auto u = static_cast<std::int64_t>(unit);
    const std::int64_t candidate = (c.maxTrainBatchSize / u) * u;
    if (!pick || (c.preferLargerBatch ? candidate > *pick : candidate < *pick)) {
      pick = candidate;
    }
  }
  if (!pick) {
    const std::int64_t smallest =
        *std::min_element(c.microBatchSizes.begin(), c.microBatchSizes.end());
    throw ElasticityIncompatibleWorldSize(ErrorDetail{
        "world_size", fmt::format("{} (data-parallel size {})", currentGpus, currentDp),
        fmt::format("a size whose smallest batch (data-parallel size x smallest micro batch = "
                    "{}) fits max_train_batch_size {}; valid data-parallel sizes are {}",
                    static_cast<Int128>(smallest) * currentDp, c.maxTrainBatchSize,
                    listText(result.choice.valid))});
  }
  result.choice.batch = *pick;
  result.choice.valid = {currentDp};
  result.candidateMicroBatch =
      pickMicroBatch(c.microBatchSizes, *pick, currentDp, c.preferLargerBatch);
  STRETCH_CHECK(result.candidateMicroBatch.has_value(), "fallback batch {} at dp {}", *pick,
                currentDp);
  return result;
}

void checkEnabledAndVersion(const ElasticityConfig& c, const SolveRequest& request) {
  if (!c.enabled) {
    throw ElasticityConfigError(
        "Elasticity is disabled, please enable it ('enabled':true) if running an elastic "
        "training job.");
  }
  if (c.modelParallelSize > 1 && c.version == ElasticityVersion::V0_1) {
    throw ElasticityConfigError(ErrorDetail{
        "elasticity.model_parallel_size", std::to_string(c.modelParallelSize),
        "1 with version 0.1 (Elasticity V0.1 does not support model-parallel training; use "
        "version 0.2 or \"exact\")"});
  }
  if (compareVersions(request.targetDeepspeedVersion, kMinimumDeepspeedVersion) < 0) {
    throw ElasticityError(fmt::format(
        "Target deepspeed version of {} is not compatible with minimum version {} supporting "
        "elasticity.",
        request.targetDeepspeedVersion, kMinimumDeepspeedVersion));
  }
  if (request.worldSize < 0) {
    throw ElasticityConfigError(ErrorDetail{"world_size", std::to_string(request.worldSize),
                                            "a positive number of GPUs, or 0 for none"});
  }
}

}  // namespace

int compareVersions(std::string_view a, std::string_view b) {
  // Parts are compared one by one as they are parsed; a missing part counts as 0.
  auto nextPart = [](std::string_view text, std::size_t& pos) -> std::int64_t {
    if (pos > text.size()) {
      return 0;
    }
    const std::size_t dot = std::min(text.find('.', pos), text.size());
    const std::string_view part = text.substr(pos, dot - pos);
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    // Only the last part may carry a suffix ("2+abc", "0rc1").
    if (ec != std::errc() || (end != part.data() + part.size() && dot != text.size())) {
      throw ConfigError(ErrorDetail{"target DeepSpeed version", fmt::format("\"{}\"", text),
                                    "a dotted version such as 0.18.2"});
    }
    pos = dot + 1;
    return value;
  };
  std::size_t pa = 0;
  std::size_t pb = 0;
  while (pa <= a.size() || pb <= b.size()) {
    const std::int64_t x = nextPart(a, pa);
    const std::int64_t y = nextPart(b, pb);
    if (x != y) {
      return x < y ? -1 : 1;
    }
  }
  return 0;
}

std::vector<std::int64_t> validWorldSizesForBatch(std::int64_t batch,
                                                  const std::vector<std::int64_t>& microBatches,
                                                  std::int64_t minSize, std::int64_t maxSize) {
  if (batch < 1 || minSize > maxSize || maxSize < 1) {
    return {};
  }
  const auto ub = static_cast<std::uint64_t>(batch);
  const MicroUnits units(microBatches, 1, static_cast<std::uint64_t>(batch));
  return detail::listValidSizes(ub, factorize(ub), units,
                                static_cast<std::uint64_t>(std::max<std::int64_t>(1, minSize)),
                                static_cast<std::uint64_t>(maxSize));
}

std::optional<std::int64_t> microBatchFor(const ElasticityConfig& config,
                                          std::int64_t finalBatchSize, std::int64_t worldSize) {
  return pickMicroBatch(config.microBatchSizes, finalBatchSize, worldSize, /*largest=*/true);
}

std::vector<WorldSizeRow> worldSizeTable(const ElasticityConfig& config, const ElasticPlan& plan) {
  const std::int64_t mp = plan.version == ElasticityVersion::V0_1 ? 1 : config.modelParallelSize;
  std::vector<WorldSizeRow> rows;
  rows.reserve(plan.validWorldSizes.size());
  for (std::int64_t ws : plan.validWorldSizes) {
    const std::optional<std::int64_t> mb = microBatchFor(config, plan.finalBatchSize, ws);
    STRETCH_CHECK(mb.has_value(), "world size {} of batch {}", ws, plan.finalBatchSize);
    rows.push_back({ws, ws * mp, *mb, plan.finalBatchSize / (*mb * ws)});
  }
  return rows;
}

ElasticPlan computeElasticConfig(const ElasticityConfig& c, const SolveRequest& request) {
  checkEnabledAndVersion(c, request);
  STRETCH_CHECK(!c.microBatchSizes.empty(), "micro_batch_sizes validated by the config layer");

  ElasticPlan plan;
  plan.version = c.version;
  // World size the micro batch refers to, in the units of the valid list.
  std::int64_t queryGpus = request.worldSize;

  switch (c.version) {
    case ElasticityVersion::V0_1: {
      const BatchChoice choice = solveV01(c.microBatchSizes, c.maxTrainBatchSize, c.minGpus,
                                          c.maxGpus, c.preferLargerBatch, c.maxTrainBatchSize, 1);
      plan.finalBatchSize = choice.batch;
      plan.validWorldSizes = choice.valid;
      if (queryGpus == 0 && request.returnMicroBatch) {
        queryGpus = worldSizeFromEnvironment(request, "to choose a micro batch");
      }
      break;
    }
    case ElasticityVersion::V0_2: {
      const std::int64_t current =
          request.worldSize != 0
              ? request.worldSize
              : worldSizeFromEnvironment(request, "by elasticity version 0.2 to size the batch");
      V02Result r = solveV02(c, current);
      plan.finalBatchSize = r.choice.batch;
      plan.validWorldSizes = std::move(r.choice.valid);
      if (request.worldSize == 0) {
        // DeepSpeed's return_microbatch path: v0.2's own candidate for the current size.
        plan.microBatch = r.candidateMicroBatch;
        plan.resolvedWorldSize = r.dataParallelSize;
        return plan;
      }
      break;
    }
    case ElasticityVersion::Exact: {
      const BatchChoice choice = detail::solveExact(c);
      plan.finalBatchSize = choice.batch;
      plan.validWorldSizes = choice.valid;
      if (queryGpus == 0 && request.returnMicroBatch) {
        queryGpus = worldSizeFromEnvironment(request, "to choose a micro batch");
      }
      break;
    }
  }

  if (queryGpus > 0) {
    const std::int64_t mp = c.version == ElasticityVersion::V0_1 ? 1 : c.modelParallelSize;
    const bool divisible = queryGpus % mp == 0;
    const std::int64_t dp = queryGpus / mp;
    if (!divisible ||
        !std::binary_search(plan.validWorldSizes.begin(), plan.validWorldSizes.end(), dp)) {
      const std::string units = mp == 1 ? "GPU counts" : "data-parallel sizes";
      throw ElasticityIncompatibleWorldSize(ErrorDetail{
          "world_size",
          mp == 1 ? std::to_string(queryGpus)
                  : fmt::format("{} (model_parallel_size {})", queryGpus, mp),
          fmt::format("one of the valid {} {}", units, listText(plan.validWorldSizes))});
    }
    plan.microBatch = microBatchFor(c, plan.finalBatchSize, dp);
    plan.resolvedWorldSize = dp;
    STRETCH_CHECK(plan.microBatch.has_value(), "valid size {} of batch {}", dp,
                  plan.finalBatchSize);
  }
  return plan;
}

}  // namespace stretch::elasticity
