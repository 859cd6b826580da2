// Properties of the elastic solver, checked with rapidcheck. The seed is printed by rapidcheck
// ("Using configuration: seed=...") and can be replayed with RC_PARAMS="seed=N".

#include <algorithm>
#include <ostream>
#include <random>
#include <rapidcheck.h>
#include <set>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "runtime/common/error.hpp"
#include "runtime/elasticity/solver.hpp"
#include "tests/runtime/elasticity/reference_solver.hpp"

namespace stretch::config {
// How rapidcheck prints a counterexample.
void showValue(const ElasticityConfig& c, std::ostream& os) {
  os << "{version " << toString(c.version) << ", max_train_batch_size " << c.maxTrainBatchSize
     << ", micro_batch_sizes [";
  for (std::size_t i = 0; i < c.microBatchSizes.size(); ++i) {
    os << (i ? ", " : "") << c.microBatchSizes[i];
  }
  os << "], gpus [" << c.minGpus << ", " << c.maxGpus << "], num_gpus_per_node " << c.numGpusPerNode
     << ", model_parallel_size " << c.modelParallelSize << ", prefer_larger_batch "
     << c.preferLargerBatch;
  if (c.targetBatchSize) {
    os << ", target " << *c.targetBatchSize << " +- " << c.batchTolerance;
  }
  os << "}";
}
}  // namespace stretch::config

namespace stretch::elasticity {
namespace {

using config::ElasticityConfig;
using config::ElasticityVersion;

rc::Gen<std::int64_t> genMicroBatch() {
  // Mostly the values people use, sometimes anything small (primes included).
  return rc::gen::weightedOneOf<std::int64_t>(
      {{3, rc::gen::element<std::int64_t>(1, 2, 3, 4, 6, 8, 12, 16, 24, 32)},
       {1, rc::gen::inRange<std::int64_t>(1, 65)}});
}

// A valid v0.1 config with the cap drawn from [1, capLimit].
rc::Gen<ElasticityConfig> genConfig(std::int64_t capLimit, std::int64_t gpuLimit) {
  return rc::gen::exec([capLimit, gpuLimit] {
    ElasticityConfig c;
    c.enabled = true;
    c.version = ElasticityVersion::V0_1;
    const auto n = *rc::gen::inRange<std::size_t>(1, 6);
    c.microBatchSizes = *rc::gen::container<std::vector<std::int64_t>>(n, genMicroBatch());
    const std::int64_t largest =
        *std::max_element(c.microBatchSizes.begin(), c.microBatchSizes.end());
    c.maxTrainBatchSize =
        *rc::gen::inRange<std::int64_t>(std::min(largest, capLimit), capLimit + 1);
    RC_PRE(largest <= c.maxTrainBatchSize);
    c.minGpus = *rc::gen::weightedOneOf<std::int64_t>(
        {{3, rc::gen::just<std::int64_t>(1)}, {2, rc::gen::inRange<std::int64_t>(1, 65)}});
    c.maxGpus = c.minGpus + *rc::gen::inRange<std::int64_t>(0, gpuLimit);
    c.preferLargerBatch =
        *rc::gen::weightedOneOf<bool>({{3, rc::gen::just(true)}, {1, rc::gen::just(false)}});
    return c;
  });
}

// Runs the solver; nullopt when it reports that no plan exists.
std::optional<ElasticPlan> solve(const ElasticityConfig& c, const SolveRequest& request = {}) {
  try {
    return computeElasticConfig(c, request);
  } catch (const ElasticityIncompatibleWorldSize&) {
    throw;
  } catch (const ElasticityError&) {
    return std::nullopt;
  }
}

RC_GTEST_PROP(ElasticSolver, V01MatchesTheDeepSpeedOracle, ()) {
  const ElasticityConfig c = *genConfig(3000, 400);
  const auto ours = solve(c);
  const auto theirs = test::reference::v01(c.microBatchSizes, c.maxTrainBatchSize, c.minGpus,
                                           c.maxGpus, c.preferLargerBatch);
  RC_ASSERT(ours.has_value() == theirs.has_value());
  if (ours) {
    RC_ASSERT(ours->finalBatchSize == theirs->batch);
    RC_ASSERT(ours->validWorldSizes == theirs->valid);
  }
}

RC_GTEST_PROP(ElasticSolver, EveryValidSizeSplitsTheBatch, ()) {
  const ElasticityConfig c = *genConfig(10'000'000, 100'000);
  const auto plan = solve(c);
  RC_PRE(plan.has_value());
  RC_ASSERT(plan->finalBatchSize <= c.maxTrainBatchSize);
  RC_ASSERT(std::is_sorted(plan->validWorldSizes.begin(), plan->validWorldSizes.end()));
  for (std::int64_t g : plan->validWorldSizes) {
    RC_ASSERT(g >= c.minGpus);
    RC_ASSERT(g <= c.maxGpus);
    RC_ASSERT(plan->finalBatchSize % g == 0);
    const std::int64_t perRank = plan->finalBatchSize / g;
    RC_ASSERT(std::any_of(c.microBatchSizes.begin(), c.microBatchSizes.end(),
                          [perRank](std::int64_t mb) { return perRank % mb == 0; }));
  }
  // And every row of the table multiplies back to the batch.
  for (const WorldSizeRow& row : worldSizeTable(c, *plan)) {
    RC_ASSERT(row.microBatch * row.gradientAccumulation * row.worldSize == plan->finalBatchSize);
  }
}

RC_GTEST_PROP(ElasticSolver, MicroBatchOrderAndDuplicatesDoNotMatter, ()) {
  const ElasticityConfig c = *genConfig(10'000'000, 100'000);
  ElasticityConfig shuffled = c;
  const auto extra = *rc::gen::elementOf(c.microBatchSizes);
  shuffled.microBatchSizes.push_back(extra);
  std::mt19937 rng(*rc::gen::arbitrary<std::uint32_t>());
  std::shuffle(shuffled.microBatchSizes.begin(), shuffled.microBatchSizes.end(), rng);
  for (ElasticityVersion v : {ElasticityVersion::V0_1, ElasticityVersion::V0_2}) {
    ElasticityConfig a = c;
    ElasticityConfig b = shuffled;
    a.version = b.version = v;
    SolveRequest request;
    request.envWorldSize = std::to_string(*rc::gen::inRange(1, 64));
    const auto pa = solve(a, request);
    const auto pb = solve(b, request);
    RC_ASSERT(pa.has_value() == pb.has_value());
    if (pa) {
      RC_ASSERT(*pa == *pb);
    }
  }
}

RC_GTEST_PROP(ElasticSolver, WideningTheGpuRangeKeepsValidSizes, ()) {
  const ElasticityConfig narrow = *genConfig(1'000'000, 2000);
  ElasticityConfig wide = narrow;
  wide.minGpus = *rc::gen::inRange<std::int64_t>(1, narrow.minGpus + 1);
  wide.maxGpus = narrow.maxGpus + *rc::gen::inRange<std::int64_t>(0, 5000);
  // For any fixed batch, the valid sizes in the wider range contain those in the narrower one.
  const std::int64_t batch = *rc::gen::inRange<std::int64_t>(1, narrow.maxTrainBatchSize + 1);
  const auto inNarrow =
      validWorldSizesForBatch(batch, narrow.microBatchSizes, narrow.minGpus, narrow.maxGpus);
  const auto inWide =
      validWorldSizesForBatch(batch, wide.microBatchSizes, wide.minGpus, wide.maxGpus);
  RC_ASSERT(std::includes(inWide.begin(), inWide.end(), inNarrow.begin(), inNarrow.end()));
  // The solver's batch may change (another candidate can win), but it never loses valid sizes in
  // number, and when the batch stays, none of them.
  const auto pn = solve(narrow);
  const auto pw = solve(wide);
  if (pn) {
    RC_ASSERT(pw.has_value());
    RC_ASSERT(pw->validWorldSizes.size() >= pn->validWorldSizes.size());
    if (pw->finalBatchSize == pn->finalBatchSize) {
      RC_ASSERT(std::includes(pw->validWorldSizes.begin(), pw->validWorldSizes.end(),
                              pn->validWorldSizes.begin(), pn->validWorldSizes.end()));
    }
  }
}

RC_GTEST_PROP(ElasticSolver, ExactIsNeverWorseThanV01, ()) {
  ElasticityConfig c = *genConfig(200'000, 5000);
  const auto v01 = solve(c);
  c.version = ElasticityVersion::Exact;
  const auto exact = solve(c);
  if (v01) {
    RC_ASSERT(exact.has_value());
    RC_ASSERT(exact->validWorldSizes.size() >= v01->validWorldSizes.size());
    RC_ASSERT(exact->finalBatchSize <= c.maxTrainBatchSize);
  }
}

RC_GTEST_PROP(ElasticSolver, ExactMatchesBruteForce, ()) {
  ElasticityConfig c = *genConfig(500, 100);
  c.version = ElasticityVersion::Exact;
  c.numGpusPerNode = *rc::gen::element<std::int64_t>(1, 1, 2, 4);
  c.maxGpus = std::max(c.maxGpus, c.numGpusPerNode);
  if (*rc::gen::arbitrary<bool>()) {
    c.targetBatchSize = *rc::gen::inRange<std::int64_t>(1, c.maxTrainBatchSize + 1);
    c.batchTolerance = *rc::gen::element(0.0, 0.05, 0.1, 0.5);
  }
  const auto [lo, hi] = exactSearchRange(c);
  const std::int64_t gpn = c.numGpusPerNode;
  const std::int64_t kLo = (c.minGpus + gpn - 1) / gpn;
  const std::int64_t kHi = c.maxGpus / gpn;
  RC_PRE(kLo <= kHi);
  const auto ours = solve(c);
  const auto oracle =
      test::reference::exact(c.microBatchSizes, lo, hi, kLo, kHi, gpn, c.preferLargerBatch);
  RC_ASSERT(ours.has_value() == oracle.has_value());
  if (ours) {
    RC_ASSERT(ours->finalBatchSize == oracle->batch);
    RC_ASSERT(ours->validWorldSizes == oracle->valid);
  }
}

RC_GTEST_PROP(ElasticSolver, V02MatchesTheDeepSpeedOracleWithoutModelParallelism, ()) {
  ElasticityConfig c = *genConfig(100'000, 400);
  c.version = ElasticityVersion::V0_2;
  c.numGpusPerNode = *rc::gen::element<std::int64_t>(1, 2, 4, 8);
  c.maxGpus = std::max(c.maxGpus, c.numGpusPerNode);
  const std::int64_t current = c.numGpusPerNode * *rc::gen::inRange<std::int64_t>(1, 17);
  SolveRequest request;
  request.envWorldSize = std::to_string(current);
  const auto theirs =
      test::reference::v02(c.microBatchSizes, c.maxTrainBatchSize, current, c.minGpus, c.maxGpus,
                           c.preferLargerBatch, c.numGpusPerNode);
  RC_PRE(theirs.has_value());  // DeepSpeed misbehaves otherwise; unit tests cover those cases
  const ElasticPlan ours = computeElasticConfig(c, request);
  RC_ASSERT(ours.finalBatchSize == theirs->batch);
  RC_ASSERT(ours.validWorldSizes == theirs->valid);
  // With prefer_larger_batch both pick the largest dividing micro batch; otherwise DeepSpeed
  // takes the first in list order and Stretch the smallest (order-independent).
  if (c.preferLargerBatch) {
    RC_ASSERT(ours.microBatch == theirs->micro);
  }
}

RC_GTEST_PROP(ElasticSolver, V02SizesAreWholeNodesOfDataParallelRanks, ()) {
  ElasticityConfig c = *genConfig(1'000'000, 2000);
  c.version = ElasticityVersion::V0_2;
  c.numGpusPerNode = *rc::gen::element<std::int64_t>(1, 2, 4, 8, 16);
  c.modelParallelSize = *rc::gen::element<std::int64_t>(1, 2, 4);
  RC_PRE(c.numGpusPerNode % c.modelParallelSize == 0);
  c.maxGpus = std::max(c.maxGpus, c.numGpusPerNode);
  const std::int64_t dpPerNode = c.numGpusPerNode / c.modelParallelSize;
  SolveRequest request;
  request.worldSize = c.numGpusPerNode * *rc::gen::inRange<std::int64_t>(1, 33);
  std::optional<ElasticPlan> plan;
  try {
    plan = computeElasticConfig(c, request);
  } catch (const ElasticityError&) {
    RC_DISCARD("no plan for this world size");
  }
  const bool fallback = plan->validWorldSizes.size() == 1 &&
                        plan->validWorldSizes[0] == request.worldSize / c.modelParallelSize;
  for (std::int64_t dp : plan->validWorldSizes) {
    RC_ASSERT(fallback || dp % dpPerNode == 0);
    RC_ASSERT(plan->finalBatchSize % dp == 0);
  }
  RC_ASSERT(plan->finalBatchSize <= c.maxTrainBatchSize);
  RC_ASSERT(plan->microBatch.has_value());
  RC_ASSERT((plan->finalBatchSize / plan->resolvedWorldSize) % *plan->microBatch == 0);
}

}  // namespace
}  // namespace stretch::elasticity
