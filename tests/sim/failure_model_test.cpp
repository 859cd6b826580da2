// Random streams and failure processes: determinism, the means and rates they promise, the
// superposition over the nodes that are up, Weibull renewal clocks, trace replay, cause sampling.

#include "sim/failure_model.hpp"

#include <cmath>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "sim/random.hpp"

namespace stretch::sim {
namespace {

TEST(Rng, SameSeedSameStreamAndStreamsDiffer) {
  Rng a(42);
  Rng b(42);
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(a.next(), b.next());
  }
  EXPECT_NE(deriveSeed(1, 0, 1), deriveSeed(1, 1, 1));
  EXPECT_NE(deriveSeed(1, 0, 1), deriveSeed(1, 0, 2));
  EXPECT_NE(deriveSeed(1, 0, 1), deriveSeed(2, 0, 1));
  EXPECT_EQ(deriveSeed(7, 3, 2), deriveSeed(7, 3, 2));
}

TEST(Rng, KnownFirstDrawsPinThePlatformIndependentStream) {
  // The generator and distributions are written here, not taken from <random>: these values
  // must be the same with every compiler and library.
  Rng r(0);
  const std::uint64_t first = r.next();
  Rng again(0);
  EXPECT_EQ(again.next(), first);
  EXPECT_EQ(mix64(0), 0xe220a8397b1dcdafULL);
}

TEST(Rng, UniformBelowAndDistributionsHaveTheirMeans) {
  Rng r(7);
  constexpr int kN = 200000;
  double u = 0;
  double e = 0;
  double w = 0;
  std::map<std::uint64_t, int> counts;
  for (int i = 0; i < kN; ++i) {
    const double x = r.uniform();
    ASSERT_GE(x, 0.0);
    ASSERT_LT(x, 1.0);
    u += x;
    e += r.exponential(3.0);
    w += r.weibull(0.7, weibullScaleForMean(5.0, 0.7));
    ++counts[r.below(6)];
  }
  EXPECT_NEAR(u / kN, 0.5, 0.005);
  EXPECT_NEAR(e / kN, 3.0, 0.05);
  EXPECT_NEAR(w / kN, 5.0, 0.15);
  ASSERT_EQ(counts.size(), 6u);
  for (const auto& [value, n] : counts) {
    EXPECT_NEAR(n, kN / 6.0, 1000) << value;
  }
}

TEST(WeibullScale, ShapeOneIsExponential) {
  EXPECT_DOUBLE_EQ(weibullScaleForMean(10.0, 1.0), 10.0);
  EXPECT_NEAR(weibullScaleForMean(10.0, 2.0), 10.0 / std::tgamma(1.5), 1e-12);
}

// Counts strikes of a process until `horizon`, renewing the struck node each time.
std::map<std::int64_t, int> strikesUntil(FailureProcess& p, SimTime horizon, int* total) {
  std::map<std::int64_t, int> perNode;
  *total = 0;
  while (true) {
    const auto s = p.peek();
    if (!s || s->time > horizon) {
      break;
    }
    p.consume(s->time);
    p.nodeRenewed(s->node, s->time);
    ++perNode[s->node];
    ++*total;
  }
  return perNode;
}

TEST(ExponentialProcess, RateIsUpNodesOverMtbfAndOnlyUpNodesFail) {
  auto p = makeExponentialProcess(10, 100.0, 1);
  for (int n = 0; n < 8; ++n) {
    p->nodeUp(n, 0);
  }
  EXPECT_FALSE(p->peek().has_value() && p->peek()->node >= 8);
  int total = 0;
  const auto perNode = strikesUntil(*p, hoursToNanos(100.0 * 2000), &total);
  // 8 nodes x 2000 mean lifetimes: 16,000 strikes expected (sd 126).
  EXPECT_NEAR(total, 16000, 600);
  for (const auto& [node, n] : perNode) {
    EXPECT_LT(node, 8);
    EXPECT_NEAR(n, 2000, 250);
  }
}

TEST(ExponentialProcess, DownNodesStopFailingAndNoUpNodesMeansNoStrike) {
  auto p = makeExponentialProcess(3, 1.0, 2);
  EXPECT_FALSE(p->peek().has_value());
  p->nodeUp(0, 0);
  p->nodeUp(1, 0);
  p->nodeDown(0, hoursToNanos(1));
  for (int i = 0; i < 100; ++i) {
    const auto s = p->peek();
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ(s->node, 1);
    EXPECT_GE(s->time, hoursToNanos(1));
    p->consume(s->time);
  }
  p->nodeDown(1, hoursToNanos(500));
  EXPECT_FALSE(p->peek().has_value());
}

TEST(WeibullProcess, MeanLifetimeAndRenewal) {
  auto p = makeWeibullProcess(50, 10.0, 1.5, 3);
  for (int n = 0; n < 50; ++n) {
    p->nodeUp(n, 0);
  }
  int total = 0;
  strikesUntil(*p, hoursToNanos(10.0 * 400), &total);
  // 50 renewal processes over 400 mean lifetimes: ~20,000 strikes.
  EXPECT_NEAR(total, 20000, 800);
}

TEST(WeibullProcess, AConsumedNodeWaitsUntilRenewedOrBackUp) {
  auto p = makeWeibullProcess(2, 1.0, 0.8, 4);
  p->nodeUp(0, 0);
  const auto s = p->peek();
  ASSERT_TRUE(s.has_value());
  p->consume(s->time);
  EXPECT_FALSE(p->peek().has_value());
  p->nodeDown(0, s->time);
  p->nodeUp(0, s->time + 5);
  ASSERT_TRUE(p->peek().has_value());
  EXPECT_GT(p->peek()->time, s->time + 5);
}

TEST(TraceProcess, ReplaysInTimeOrder) {
  std::vector<FailureStrike> strikes = {
      {30, 2, std::nullopt, 1.0}, {10, 0, 3, std::nullopt}, {20, 1, std::nullopt, std::nullopt}};
  auto p = makeTraceProcess(strikes);
  std::vector<std::int64_t> nodes;
  while (const auto s = p->peek()) {
    nodes.push_back(s->node);
    p->consume(s->time);
  }
  EXPECT_EQ(nodes, (std::vector<std::int64_t>{0, 1, 2}));
}

TEST(CauseSampler, FollowsTheWeightsAndFindsNamesCaseInsensitively) {
  std::vector<FailureCause> causes = {{"GPU", 3.0, true, 24.0},
                                      {"Software", 1.0, false, std::nullopt},
                                      {"Never", 0.0, true, std::nullopt}};
  CauseSampler sampler(causes, 9);
  std::map<std::size_t, int> counts;
  for (int i = 0; i < 40000; ++i) {
    ++counts[*sampler.sample()];
  }
  EXPECT_NEAR(counts[0], 30000, 500);
  EXPECT_NEAR(counts[1], 10000, 500);
  EXPECT_EQ(counts.count(2), 0u);
  EXPECT_EQ(sampler.find("software"), 1u);
  EXPECT_FALSE(sampler.find("cosmic rays").has_value());
  CauseSampler none({}, 1);
  EXPECT_FALSE(none.sample().has_value());
}

}  // namespace
}  // namespace stretch::sim
