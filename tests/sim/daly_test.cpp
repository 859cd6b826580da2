// Fidelity against theory: with exponential failures (job MTBF M), immediate replacement, a fixed
// checkpoint cost C, restart R and interval tau, the Monte Carlo ETTR over >= 1,000 seeds is
// within 1 percentage point of Daly's closed form
//   ETTR = tau / (M e^(R/M) (e^((tau + C)/M) - 1))
// (Daly, FGCS 22(3) 2006; ../shared/reference/simulator_anchors.md 4.1). The rows are the Daly
// table of the anchors (Llama-3-like M = 185.6 min at Daly's optimal tau) plus settings with a
// longer and a shorter M, each run from fixtures/scenarios/daly_exponential.json.

#include <cmath>

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "sim/monte_carlo.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::sim {
namespace {

struct DalyCase {
  double cMinutes;
  double rMinutes;
  double tauMinutes;
  double mMinutes;
  double anchorEttr;  // the anchors' table value, when the row is from it (else 0)
};

double dalyEttr(const DalyCase& c) {
  const double m = c.mMinutes;
  return c.tauMinutes /
         (m * std::exp(c.rMinutes / m) * (std::exp((c.tauMinutes + c.cMinutes) / m) - 1.0));
}

TEST(Daly, MonteCarloEttrWithinOnePointOfTheClosedForm) {
  const std::vector<DalyCase> cases = {
      {0.5, 5, 13.3, 185.6, 0.904}, {1, 5, 18.6, 185.6, 0.876},   {5, 5, 39.8, 185.6, 0.765},
      {5, 15, 39.8, 185.6, 0.724},  {10, 15, 54.4, 185.6, 0.652}, {2, 10, 60, 600, 0.0},
      {1, 3, 10, 60, 0.0},
  };
  const Scenario base = loadScenario(test::fixturePath("scenarios/daly_exponential.json"));
  constexpr int kSeeds = 1000;
  for (const DalyCase& c : cases) {
    Scenario s = base;
    const auto nodes = static_cast<double>(s.cluster.nodes);
    s.failures.nodeMtbfHours = c.mMinutes / 60.0 * nodes;
    s.job.checkpoint.saveSeconds = c.cMinutes * 60.0;
    s.job.checkpoint.loadSeconds = 0.0;
    s.job.restartOverheadSeconds = c.rMinutes * 60.0;
    s.job.checkpoint.intervalMinutes = c.tauMinutes;
    // 100 job MTBFs per replica: the start-up and the unsaved tail at the horizon bias the
    // estimate by well under 0.1 point.
    s.job.horizonHours = 100.0 * c.mMinutes / 60.0;
    MonteCarloOptions o;
    o.seeds = kSeeds;
    const MonteCarloResult r = runMonteCarlo(s, o);
    const MetricSummary ettr = summarize(r.metricValues().at("ettr"));
    const double theory = dalyEttr(c);
    const std::string row =
        fmt::format("C {} min, R {} min, tau {} min, M {} min: sim {:.4f} +- {:.4f}, Daly {:.4f}",
                    c.cMinutes, c.rMinutes, c.tauMinutes, c.mMinutes, ettr.mean, ettr.ci95, theory);
    std::cout << "[ daly     ] " << row << "\n";
    EXPECT_LE(std::abs(ettr.mean - theory), 0.01) << row;
    if (c.anchorEttr > 0) {
      EXPECT_NEAR(theory, c.anchorEttr, 0.0006) << "the anchors' table: " << row;
    }
    // Enough replicas that the interval is far tighter than the tolerance.
    EXPECT_LT(ettr.ci95, 0.003) << row;
  }
}

}  // namespace
}  // namespace stretch::sim
