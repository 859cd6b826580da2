// Monte Carlo: results independent of the thread count (bit for bit), replica 0 is the single
// run, the statistics, the JSON summary.

#include "sim/monte_carlo.hpp"

#include <atomic>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "sim/parallel.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::sim {
namespace {

TEST(MonteCarlo, ResultsDoNotDependOnTheThreadCount) {
  const Scenario s = loadScenario(test::fixturePath("scenarios/spot_preemptions.json"));
  MonteCarloOptions one;
  one.seeds = 12;
  one.threads = 1;
  MonteCarloOptions three = one;
  three.threads = 3;
  const auto a = runMonteCarlo(s, one);
  const auto b = runMonteCarlo(s, three);
  ASSERT_EQ(a.runs.size(), 12u);
  EXPECT_EQ(b.threads, 3);
  auto va = a.metricValues();
  auto vb = b.metricValues();
  for (const char* clock : {"wall_seconds", "agent_wall_seconds"}) {
    va.erase(clock);
    vb.erase(clock);
  }
  EXPECT_EQ(va, vb);  // exact equality of every figure
  EXPECT_EQ(a.worldSizeHours(), b.worldSizeHours());
  // The replicas differ from one another.
  EXPECT_NE(a.runs[0].usefulNs, a.runs[1].usefulNs);
  // Replica 0 is the single run.
  const RunResult single = simulate(s);
  EXPECT_EQ(single.usefulNs, a.runs[0].usefulNs);
  EXPECT_EQ(single.preemptions, a.runs[0].preemptions);
}

TEST(MonteCarlo, ProgressCallbackSeesEveryReplica) {
  const Scenario s = loadScenario(test::fixturePath("scenarios/trace_replay.json"));
  MonteCarloOptions o;
  o.seeds = 5;
  o.threads = 2;
  std::int64_t last = 0;
  int calls = 0;
  o.replicaDone = [&](std::int64_t done, std::int64_t total) {
    EXPECT_EQ(total, 5);
    EXPECT_EQ(done, last + 1);
    last = done;
    ++calls;
  };
  runMonteCarlo(s, o);
  EXPECT_EQ(calls, 5);
  o.seeds = 0;
  EXPECT_THROW(runMonteCarlo(s, o), ConfigError);
}

// A progress callback that throws (the GUI's cancel) stops the batch and reaches the caller,
// from whichever thread ran it, instead of terminating the program.
TEST(MonteCarlo, AThrowingProgressCallbackStopsTheBatchAndReachesTheCaller) {
  const Scenario s = loadScenario(test::fixturePath("scenarios/trace_replay.json"));
  for (const int threads : {1, 3}) {
    MonteCarloOptions o;
    o.seeds = 50;
    o.threads = threads;
    std::atomic<int> calls{0};
    o.replicaDone = [&](std::int64_t done, std::int64_t) {
      ++calls;
      if (done == 2) {
        throw std::runtime_error("cancelled by the user");
      }
    };
    try {
      runMonteCarlo(s, o);
      FAIL() << "no exception with " << threads << " thread(s)";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "cancelled by the user");
    }
    EXPECT_LT(calls.load(), 50) << "the batch went on after the callback threw";
  }
}

// Issue 42: --seeds had no bound, and 10^8 replicas ended in std::bad_alloc (an abort on the
// command line, 10^7 used 5.66 GB) and 2^62 in vector's length_error. Beyond kMaxSeeds the batch
// is refused before anything is allocated, naming the option, the value and the maximum.
TEST(MonteCarlo, SeedsBeyondTheMaximumAreRefusedBeforeAnyAllocation) {
  const Scenario s = loadScenario(test::fixturePath("scenarios/daly_exponential.json"));
  EXPECT_EQ(kMaxSeeds, 1'000'000);
  for (const std::int64_t seeds : {std::int64_t{1'000'001}, std::int64_t{100'000'000},
                                   std::int64_t{1} << 62, std::int64_t{-1}}) {
    MonteCarloOptions o;
    o.seeds = seeds;
    try {
      runMonteCarlo(s, o);
      ADD_FAILURE() << seeds << " seeds ran";
    } catch (const ConfigError& e) {
      EXPECT_EQ(std::string(e.what()), "--seeds = " + std::to_string(seeds) +
                                           ": expected a number of replicas in [1, 1000000]");
    }
  }
}

TEST(ParallelFor, EveryItemOnceAndTheLowestFailureWins) {
  for (const int threads : {1, 2, 4}) {
    std::vector<std::atomic<int>> runs(100);
    std::int64_t lastDone = 0;
    const int used = parallelFor(
        100, threads, [&](std::int64_t i) { ++runs[static_cast<std::size_t>(i)]; },
        [&](std::int64_t done, std::int64_t total) {
          EXPECT_EQ(total, 100);
          EXPECT_EQ(done, lastDone + 1);  // serialised, counted in order
          lastDone = done;
        });
    EXPECT_EQ(used, threads);
    EXPECT_EQ(lastDone, 100);
    for (const auto& r : runs) {
      EXPECT_EQ(r.load(), 1);
    }
    // Items 30 and 60 fail: whichever thread sees which first, item 30's error is the one.
    try {
      parallelFor(100, threads, [](std::int64_t i) {
        if (i == 30 || i == 60) {
          throw std::runtime_error("item " + std::to_string(i));
        }
      });
      FAIL();
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "item 30");
    }
  }
  EXPECT_EQ(parallelFor(0, 4, [](std::int64_t) { FAIL(); }), 0);
}

TEST(Summarize, MeanAndStudentTConfidenceInterval) {
  const MetricSummary s = summarize({4.0, 1.0, 3.0, 2.0});
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_DOUBLE_EQ(s.min, 1.0);
  EXPECT_DOUBLE_EQ(s.max, 4.0);
  // Four replicas: t(0.975, 3) = 3.182, not the normal 1.96 (which would be 38 % too narrow).
  EXPECT_NEAR(s.ci95, 3.182446 * std::sqrt(5.0 / 3.0) / 2.0, 1e-5);
  EXPECT_EQ(summarize({7.0}).ci95, 0.0);
  // Type 7 percentiles: h = q (n - 1) between the sorted values 1, 2, 3, 4.
  EXPECT_DOUBLE_EQ(s.p50, 2.5);
  EXPECT_DOUBLE_EQ(s.p90, 3.7);
  EXPECT_DOUBLE_EQ(s.p99, 3.97);
  EXPECT_DOUBLE_EQ(summarize({7.0}).p99, 7.0);
}

TEST(Summarize, StudentTQuantilesMatchTheTables) {
  // t(0.975, df) from the standard tables (to 8 significant digits).
  const std::vector<std::pair<double, double>> table = {
      {1, 12.706205},  {2, 4.3026527},  {3, 3.1824463},  {4, 2.7764451},
      {5, 2.5705818},  {10, 2.2281389}, {19, 2.0930241}, {20, 2.0859634},
      {30, 2.0422725}, {60, 2.0002978}, {120, 1.9799304}};
  for (const auto& [df, t] : table) {
    EXPECT_NEAR(studentT975(df), t, 2e-5 * t) << df << " degrees of freedom";
  }
  // Towards the normal quantile, monotonically.
  double last = studentT975(1);
  for (double df = 2; df <= 100000; df *= 1.7) {
    const double t = studentT975(df);
    EXPECT_LT(t, last) << df;
    EXPECT_GT(t, 1.959963984) << df;
    last = t;
  }
  EXPECT_NEAR(studentT975(1e6), 1.959964, 1e-5);
  EXPECT_THROW(studentT975(0.0), std::invalid_argument);
}

TEST(Summarize, PercentileOfUnsortedValues) {
  EXPECT_DOUBLE_EQ(percentile({5.0, 1.0, 3.0}, 0.5), 3.0);
  EXPECT_DOUBLE_EQ(percentile({5.0, 1.0, 3.0}, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(percentile({5.0, 1.0, 3.0}, 1.0), 5.0);
  EXPECT_DOUBLE_EQ(percentile({5.0, 1.0, 3.0}, 0.75), 4.0);
  EXPECT_DOUBLE_EQ(percentile({}, 0.5), 0.0);
}

TEST(MonteCarlo, JsonSummary) {
  const Scenario s = loadScenario(test::fixturePath("scenarios/elastic_scale.json"));
  MonteCarloOptions o;
  o.seeds = 1;
  const auto one = summaryToJson(runMonteCarlo(s, o));
  for (const char* key :
       {"simulated_hours", "wall_seconds", "events", "ettr", "samples", "failures", "restarts",
        "lost_hours", "checkpoints", "world_size_hours"}) {
    EXPECT_TRUE(one.contains(key)) << key;
  }
  EXPECT_TRUE(one["ettr"].is_number());
  EXPECT_EQ(one["world_size_hours"].size(), 3u);  // 0 (the last call), 8 and 16 GPUs
  o.seeds = 3;
  const auto many = summaryToJson(runMonteCarlo(s, o));
  EXPECT_EQ(many["seeds"], 3);
  EXPECT_TRUE(many["ettr"].contains("mean"));
  EXPECT_TRUE(many["ettr"].contains("ci95"));
  EXPECT_TRUE(many["simulated_hours"].contains("p99"));
  EXPECT_EQ(many["ci95_method"], kCi95Method);
  EXPECT_EQ(many["ettr"]["ci95"], 0.0);  // no randomness in this scenario
  EXPECT_EQ(many["outcomes"]["horizon"], 3);
}

}  // namespace
}  // namespace stretch::sim
