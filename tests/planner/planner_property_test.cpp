// Properties of the planner's pieces (rapidcheck; the seed is printed and can be replayed with
// RC_PARAMS="seed=N"):
//  - Daly's ETTR is a ratio in (0, 1], and the exact optimum of it is at least as good as Daly's
//    and Young's closed forms and any other interval;
//  - the planner's world-size oracle agrees with the agent's own node selection
//    (agent::planWorld) on random elastic and fixed configs, node sizes and cluster sizes.

#include <algorithm>
#include <cmath>
#include <rapidcheck.h>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "planner/analytic.hpp"
#include "planner/batch_plan.hpp"
#include "runtime/elasticity/world_size_rules.hpp"

namespace stretch::planner {
namespace {

RC_GTEST_PROP(PlannerProperty, ExactOptimumDominates, ()) {
  const double m = *rc::gen::inRange(10, 100'000);
  const double c = m * *rc::gen::inRange(1, 500) / 1000.0;  // C in (0, M/2]
  const double r = m * *rc::gen::inRange(0, 1000) / 1000.0;
  const double other = m * *rc::gen::inRange(1, 4000) / 1000.0;
  const double exact = exactDalyOptimum(c, r, m);
  const double best = dalyEttr(exact, c, r, m);
  RC_ASSERT(best > 0.0);
  RC_ASSERT(best <= 1.0);
  const double slack = 1e-9;
  RC_ASSERT(best + slack >= dalyEttr(dalyInterval(c, m), c, r, m));
  RC_ASSERT(best + slack >= dalyEttr(youngInterval(c, m), c, r, m));
  RC_ASSERT(best + slack >= dalyEttr(other, c, r, m));
  const double e = dalyEttr(other, c, r, m);
  RC_ASSERT(e > 0.0);
  RC_ASSERT(e <= 1.0);
}

config::DsConfig randomConfig() {
  config::DsConfig ds;
  const int kind = *rc::gen::inRange(0, 3);
  if (kind == 2) {
    ds.batch.trainBatchSize = *rc::gen::inRange<std::int64_t>(8, 512);
    ds.batch.microBatchPerGpu = *rc::gen::element<std::int64_t>(1, 2, 4);
    return ds;
  }
  auto& e = ds.elasticity;
  e.enabled = true;
  e.version = kind == 0 ? config::ElasticityVersion::V0_1 : config::ElasticityVersion::Exact;
  e.maxTrainBatchSize = *rc::gen::inRange<std::int64_t>(16, 3000);
  e.microBatchSizes = *rc::gen::unique<std::vector<std::int64_t>>(
      *rc::gen::inRange<std::size_t>(1, 4), rc::gen::inRange<std::int64_t>(1, 12));
  e.minGpus = *rc::gen::inRange<std::int64_t>(1, 16);
  e.maxGpus = e.minGpus + *rc::gen::inRange<std::int64_t>(0, 300);
  return ds;
}

RC_GTEST_PROP(PlannerProperty, OracleAgreesWithTheAgentsNodeSelection, ()) {
  const config::DsConfig ds = randomConfig();
  const std::int64_t g = *rc::gen::element<std::int64_t>(1, 2, 4, 8);
  const std::int64_t nodes = *rc::gen::inRange<std::int64_t>(1, 48);
  const bool whole = *rc::gen::arbitrary<bool>();
  const auto selection =
      whole ? agent::NodeSelection::WholeNodes : agent::NodeSelection::PartialNodes;
  std::optional<SizeOracle> oracle;
  try {
    oracle.emplace(ds, 1, g, selection, nodes * g);
  } catch (const Error&) {
    RC_DISCARD("the solver has no plan for this config");
  }
  std::vector<agent::CandidateNode> candidates;
  for (std::int64_t n = 1; n <= nodes; ++n) {
    std::string id = "n";
    id += std::to_string(n);
    candidates.push_back({id, g});
    const auto world = agent::planWorld(candidates, oracle->rules(), selection);
    RC_ASSERT(oracle->running(n * g) == (world ? world->worldSize : 0));
  }
}

}  // namespace
}  // namespace stretch::planner
