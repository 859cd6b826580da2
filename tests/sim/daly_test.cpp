// Fidelity against theory: with exponential failures (job MTBF M), immediate replacement, a fixed
// checkpoint cost C, restart R and interval tau, the Monte Carlo ETTR over >= 1,000 seeds is
// within 1 percentage point of Daly's closed form
//   ETTR = tau / (M e^(R/M) (e^((tau + C)/M) - 1))
// (Daly, FGCS 22(3) 2006; ../shared/reference/simulator_anchors.md 4.1). The rows are the Daly
// table of the anchors (Llama-3-like M = 185.6 min at Daly's optimal tau) plus settings with a
// longer and a shorter M, each run from fixtures/scenarios/daly_exponential.json.
//
// The statistical property of the Monte Carlo summary: over many independent batches of n
// replicas, the 95 % interval it reports (Student's t) covers Daly's value about 95 % of the
// time, at n = 3, 5 and 20; the normal interval (z = 1.96) it replaced would not at small n.

#include <cmath>
#include <cstdint>
#include <iostream>
#include <vector>

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

Scenario dalyScenario(const Scenario& base, const DalyCase& c, double horizonMtbfs) {
  Scenario s = base;
  const auto nodes = static_cast<double>(s.cluster.nodes);
  s.failures.nodeMtbfHours = c.mMinutes / 60.0 * nodes;
  s.job.checkpoint.saveSeconds = c.cMinutes * 60.0;
  s.job.checkpoint.loadSeconds = 0.0;
  s.job.restartOverheadSeconds = c.rMinutes * 60.0;
  s.job.checkpoint.intervalMinutes = c.tauMinutes;
  s.job.horizonHours = horizonMtbfs * c.mMinutes / 60.0;
  return s;
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
    // 100 job MTBFs per replica: the start-up and the unsaved tail at the horizon bias the
    // estimate by well under 0.1 point.
    const Scenario s = dalyScenario(base, c, 100.0);
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

TEST(Daly, StudentIntervalCoversTheClosedFormNinetyFivePercent) {
  const std::vector<DalyCase> cases = {
      {1, 5, 18.6, 185.6, 0.0}, {10, 15, 54.4, 185.6, 0.0}, {1, 3, 10, 60, 0.0}};
  const Scenario base = loadScenario(test::fixturePath("scenarios/daly_exponential.json"));
  constexpr int kBatches = 400;  // per case and replica count
  for (const std::int64_t n : {3, 5, 20}) {
    int covered = 0;
    int coveredByNormal = 0;
    int total = 0;
    for (const DalyCase& c : cases) {
      // 50 job MTBFs per replica: the horizon's bias (< 0.03 point) is a small fraction of
      // even the 20-replica interval (about 0.4 point).
      Scenario s = dalyScenario(base, c, 50.0);
      const double theory = dalyEttr(c);
      for (int b = 0; b < kBatches; ++b) {
        s.seed = 7'000'000 + static_cast<std::uint64_t>(b);  // independent batches
        MonteCarloOptions o;
        o.seeds = n;
        o.threads = 1;
        const std::vector<double> ettr = runMonteCarlo(s, o).metricValues().at("ettr");
        const MetricSummary m = summarize(ettr);
        covered += std::abs(m.mean - theory) <= m.ci95 ? 1 : 0;
        const double normal = m.ci95 / studentT975(static_cast<double>(n - 1)) * 1.959964;
        coveredByNormal += std::abs(m.mean - theory) <= normal ? 1 : 0;
        ++total;
      }
    }
    const double coverage = static_cast<double>(covered) / total;
    const double normalCoverage = static_cast<double>(coveredByNormal) / total;
    std::cout << fmt::format(
        "[ coverage ] {} replicas per interval, {} intervals: Student t covers Daly's ETTR {:.1f} "
        "% of the time, the normal interval {:.1f} %\n",
        n, total, 100.0 * coverage, 100.0 * normalCoverage);
    // 1,200 intervals: the binomial standard deviation at 95 % is 0.63 point; +-3 of them.
    EXPECT_GE(coverage, 0.931) << n << " replicas";
    EXPECT_LE(coverage, 0.969) << n << " replicas";
    if (n <= 5) {
      EXPECT_LT(normalCoverage, 0.92) << "the normal interval is too narrow at " << n;
    }
  }
}

}  // namespace
}  // namespace stretch::sim
