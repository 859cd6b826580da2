// Costs that grow with the job's node count (sim/node_cost.hpp): the scenario's forms of
// job.restart_overhead_seconds and job.recovery.reconfigure_seconds, their errors, interpolation
// between measured points and extrapolation beyond them, and the simulator charging each start
// at the node count of the generation it starts.

#include "sim/node_cost.hpp"

#include <sstream>

#include <nlohmann/json.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/agent/event_log.hpp"
#include "runtime/common/error.hpp"
#include "sim/job_sim.hpp"
#include "sim/scenario.hpp"
#include "tests/sim/scenario_support.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::sim {
namespace {

using ::testing::HasSubstr;

using scenario_support::minimal;
using scenario_support::parse;

// The restart overhead a scenario with `cost` at job.restart_overhead_seconds gets.
SecondsByNodes restartOf(const nlohmann::json& cost) {
  nlohmann::json j = minimal();
  j["job"]["restart_overhead_seconds"] = cost;
  const Scenario s = parse(j);
  EXPECT_TRUE(s.warnings.empty()) << ::testing::PrintToString(s.warnings);
  return s.job.restartOverheadSeconds;
}

// The message of the ConfigError parsing `cost` as the restart overhead throws.
std::string errorOf(const nlohmann::json& cost) {
  nlohmann::json j = minimal();
  j["job"]["restart_overhead_seconds"] = cost;
  try {
    parse(j);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

nlohmann::json points(std::initializer_list<std::pair<int, double>> list) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [nodes, seconds] : list) {
    out.push_back({{"nodes", nodes}, {"seconds", seconds}});
  }
  return out;
}

TEST(NodeCost, APlainNumberIsTheSameAtEveryNodeCount) {
  const SecondsByNodes c = restartOf(300);
  EXPECT_TRUE(c.constant());
  for (const std::int64_t n : {0, 1, 2048, 10'000'000}) {
    EXPECT_EQ(c.at(n), 300.0) << n;
  }
  EXPECT_EQ(c.describe(2048), "given as a constant");
  // Absent: 0, as before.
  EXPECT_EQ(parse(minimal()).job.restartOverheadSeconds.at(64), 0.0);
}

TEST(NodeCost, AFixedPartPlusAPerNodePartIsALine) {
  const SecondsByNodes c = restartOf({{"fixed_seconds", 60}, {"per_node_seconds", 0.5}});
  EXPECT_FALSE(c.constant());
  EXPECT_DOUBLE_EQ(c.at(1), 60.5);
  EXPECT_DOUBLE_EQ(c.at(2048), 60.0 + 1024.0);
  EXPECT_DOUBLE_EQ(restartOf({{"per_node_seconds", 0.25}}).at(16), 4.0);
  EXPECT_EQ(c.describe(16), "given as 60 s + 0.5 s per node");
}

TEST(NodeCost, PointsAreInterpolatedBetweenAndExtrapolatedBeyondWithTheFittedSlope) {
  const SecondsByNodes c = restartOf({{"points", points({{256, 2.0}, {64, 1.0}, {1024, 5.0}})}});
  // Sorted by nodes whatever the order written.
  ASSERT_EQ(c.points().size(), 3u);
  EXPECT_EQ(c.points().front().nodes, 64);
  // At a point: its value; between two: the straight line between them.
  EXPECT_DOUBLE_EQ(c.at(64), 1.0);
  EXPECT_DOUBLE_EQ(c.at(256), 2.0);
  EXPECT_DOUBLE_EQ(c.at(128), 1.0 + 64.0 / 192.0);
  EXPECT_DOUBLE_EQ(c.at(640), 2.0 + 0.5 * 3.0);
  // Beyond the last: the least-squares slope of the three points (by hand: mean nodes 448, mean
  // seconds 8/3; Sxy = 2112, Sxx = 516096).
  const double slope = 2112.0 / 516096.0;
  EXPECT_NEAR(c.tableSlope(), slope, 1e-15);
  EXPECT_NEAR(c.at(2048), 5.0 + slope * 1024.0, 1e-12);
  EXPECT_NEAR(c.at(16384), 5.0 + slope * 15360.0, 1e-12);
  // Below the first: the same slope down from it, never below 0.
  EXPECT_NEAR(c.at(32), 1.0 - slope * 32.0, 1e-12);
  EXPECT_GT(c.at(1), 0.0);
  EXPECT_THAT(c.describe(2048), HasSubstr("measured at 64 to 1024 nodes (3 points)"));
  EXPECT_THAT(c.describe(2048), HasSubstr("extrapolated beyond 1024 nodes at 0.00409 s per node"));
  EXPECT_THAT(c.describe(128), HasSubstr("interpolated"));
  EXPECT_THAT(c.describe(256), ::testing::Not(HasSubstr("polated")));
}

TEST(NodeCost, OnePointGrowsInProportionToTheNodes) {
  // No slope is measured: the line goes through the origin (the pessimistic reading).
  const SecondsByNodes c =
      restartOf({{"fixed_seconds", 300}, {"points", points({{256, 0.67}})}, {"source", "dev VM"}});
  EXPECT_DOUBLE_EQ(c.tableSlope(), 0.67 / 256.0);
  EXPECT_DOUBLE_EQ(c.at(256), 300.67);
  EXPECT_NEAR(c.at(2048), 300.0 + 0.67 * 8.0, 1e-12);
  EXPECT_NEAR(c.at(128), 300.0 + 0.335, 1e-12);
  EXPECT_NEAR(c.at(0), 300.0, 1e-12);
  EXPECT_EQ(c.describe(2048),
            "300 s given, plus measured at 256 nodes (dev VM), extrapolated beyond 256 nodes at "
            "0.00262 s per node");
}

TEST(NodeCost, ACostThatFellWithTheNodesIsNotExtrapolatedDownwards) {
  const SecondsByNodes c = restartOf({{"points", points({{100, 5.0}, {200, 3.0}})}});
  EXPECT_EQ(c.tableSlope(), 0.0);
  EXPECT_DOUBLE_EQ(c.at(400), 3.0);
  EXPECT_DOUBLE_EQ(c.at(50), 5.0);
  EXPECT_DOUBLE_EQ(c.at(150), 4.0);
  // fitLine itself reports the measured slope.
  const std::vector<NodeCostPoint> p = {{100, 5.0}, {200, 3.0}};
  EXPECT_DOUBLE_EQ(fitLine(p).perNodeSeconds, -0.02);
  EXPECT_DOUBLE_EQ(fitLine(p).fixedSeconds, 7.0);
}

TEST(NodeCost, TheValueStaysWithinTheDurationLimit) {
  const SecondsByNodes c = restartOf(
      {{"fixed_seconds", kMaxScenarioSeconds}, {"per_node_seconds", maxPerNodeSeconds()}});
  EXPECT_EQ(c.at(kMaxClusterNodes), kMaxScenarioSeconds);
  EXPECT_LT(secondsToNanos(c.at(kMaxClusterNodes)), std::numeric_limits<SimTime>::max());
}

TEST(NodeCost, BadFormsAreErrorsNamingTheKeyTheValueAndWhatWasExpected) {
  const std::string key = "job.restart_overhead_seconds";
  EXPECT_THAT(errorOf("5"),
              HasSubstr(key + " = \"5\": expected a non-negative number of seconds, at most "
                              "3.6e+09, or an object {\"fixed_seconds\""));
  EXPECT_THAT(errorOf(-1), HasSubstr(key + " = -1: expected a non-negative number of seconds"));
  EXPECT_THAT(errorOf(nlohmann::json::object()),
              HasSubstr(key + " = {}: expected a number of seconds, or at least one of "
                              "fixed_seconds, per_node_seconds and points"));
  EXPECT_THAT(errorOf({{"fixed_seconds", -2}}),
              HasSubstr(key + ".fixed_seconds = -2: expected a non-negative number of seconds"));
  EXPECT_THAT(errorOf({{"per_node_seconds", 1000}}),
              HasSubstr(key + ".per_node_seconds = 1000: expected a non-negative number of "
                              "seconds per node, at most 360"));
  EXPECT_THAT(errorOf({{"points", nlohmann::json::array()}}),
              HasSubstr(key + ".points = []: expected a non-empty array of measured points"));
  EXPECT_THAT(errorOf({{"points", 3}}), HasSubstr(key + ".points = 3: expected a non-empty"));
  EXPECT_THAT(errorOf({{"points", {7}}}), HasSubstr(key + ".points[0] = 7: expected"));
  EXPECT_THAT(errorOf({{"points", points({{0, 1.0}})}}),
              HasSubstr(key + ".points[0].nodes = 0: expected a positive number of nodes, at "
                              "most 10000000"));
  EXPECT_THAT(errorOf({{"points", {{{"nodes", 4}}}}}),
              HasSubstr(key + ".points[0].seconds = (missing): expected a non-negative number "
                              "of seconds"));
  EXPECT_THAT(errorOf({{"points", {{{"seconds", 4}}}}}),
              HasSubstr(key + ".points[0].nodes = (missing): expected a positive number"));
  EXPECT_THAT(errorOf({{"points", points({{8, 1.0}, {16, 2.0}, {8, 3.0}})}}),
              HasSubstr(key + ".points[2].nodes = 8: expected a node count no other point of "
                              "the table has"));
  EXPECT_THAT(errorOf({{"points", points({{8, -1.0}})}}),
              HasSubstr(key + ".points[0].seconds = -1.0: expected"));
  EXPECT_THAT(errorOf({{"fixed_seconds", 1}, {"source", 3}}),
              HasSubstr(key + ".source = 3: expected a string"));
}

TEST(NodeCost, UnknownKeysOfTheFormAreWarnings) {
  nlohmann::json j = minimal();
  j["job"]["restart_overhead_seconds"] = {
      {"fixed_seconds", 1},
      {"note", "free text"},
      {"slope", 2},
      {"points", {{{"nodes", 2}, {"seconds", 1}, {"when", "x"}}}}};
  const Scenario s = parse(j);
  EXPECT_THAT(s.warnings, ::testing::UnorderedElementsAre(
                              "job.restart_overhead_seconds.points[0].when: unknown key, ignored",
                              "job.restart_overhead_seconds.slope: unknown key, ignored"));
}

TEST(NodeCost, ReconfigureSecondsTakesTheSameFormsAndStaysRequiredInLiveMode) {
  nlohmann::json j = minimal();
  j["job"]["recovery"] = {
      {"mode", "live"}, {"reconfigure_seconds", {{"fixed_seconds", 30}, {"per_node_seconds", 1}}}};
  const Scenario s = parse(j);
  EXPECT_DOUBLE_EQ(s.job.recovery.reconfigureSeconds.at(2048), 2078.0);
  j["job"]["recovery"]["reconfigure_seconds"] = {{"points", points({{0, 1.0}})}};
  try {
    parse(j);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("job.recovery.reconfigure_seconds.points[0].nodes = 0"));
  }
  j["job"]["recovery"].erase("reconfigure_seconds");
  EXPECT_THROW(parse(j), ConfigError);
}

TEST(NodeCost, FailureDetectionSecondsTakesTheSameFormsAndDefaultsToZero) {
  nlohmann::json j = minimal();
  EXPECT_EQ(parse(j).job.failureDetectionSeconds.at(4096), 0.0);
  j["job"]["failure_detection_seconds"] = 5;
  EXPECT_EQ(parse(j).job.failureDetectionSeconds.at(4096), 5.0);
  j["job"]["failure_detection_seconds"] = {{"points", points({{256, 4.5}, {2048, 5.8}})},
                                           {"source", "bench/control_plane.sh stop_noticed_s"}};
  const Scenario s = parse(j);
  EXPECT_DOUBLE_EQ(s.job.failureDetectionSeconds.at(256), 4.5);
  EXPECT_DOUBLE_EQ(s.job.failureDetectionSeconds.at(2048), 5.8);
  EXPECT_EQ(s.job.failureDetectionSeconds.source(), "bench/control_plane.sh stop_noticed_s");
  j["job"]["failure_detection_seconds"] = -1;
  try {
    parse(j);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("job.failure_detection_seconds = -1"));
  }
}

// ---- the simulator charges each start at its generation's node count -----------------------

// 4 nodes of 1 GPU, elastic on 1 to 4 (batch 48), no checkpoint before step 50, a fault script;
// restarts cost `restart`, live starts `reconfigure` (no state transfer: 0 bytes).
nlohmann::json elasticJob(const nlohmann::json& restart, const nlohmann::json& script,
                          const nlohmann::json& reconfigure = nullptr) {
  nlohmann::json j = {
      {"cluster",
       {{"nodes", 4},
        {"gpus_per_node", 1},
        {"intra_node_GBps", 100},
        {"inter_node_GBps", 10},
        {"intra_latency_us", 1},
        {"inter_latency_us", 5}}},
      {"node_names", {"n0", "n1", "n2", "n3"}},
      {"job",
       {{"config",
         {{"elasticity",
           {{"enabled", true},
            {"max_train_batch_size", 48},
            {"micro_batch_sizes", {4, 12}},
            {"min_gpus", 1},
            {"max_gpus", 4},
            {"version", 0.1}}}}},
        {"seconds_per_sample_per_gpu", 0.001},
        {"total_steps", 100},
        {"checkpoint", {{"every_steps", 50}, {"save_seconds", 1}, {"load_seconds", 2}}},
        {"restart_overhead_seconds", restart}}},
      {"agent", {{"min_nodes", 1}, {"last_call_seconds", 1}, {"monitor_interval_seconds", 0.001}}},
      {"script", script}};
  if (!reconfigure.is_null()) {
    j["job"]["recovery"] = {
        {"mode", "live"}, {"reconfigure_seconds", reconfigure}, {"state_bytes", 0}};
  }
  return j;
}

// The world sizes of a run's starts, and its result.
std::vector<std::int64_t> startWorlds(const Scenario& s, RunResult& r) {
  std::ostringstream out;
  agent::EventLog log(out);
  RunOptions o;
  o.eventLog = &log;
  r = simulate(s, o);
  std::vector<std::int64_t> worlds;
  std::istringstream in(out.str());
  for (std::string line; std::getline(in, line);) {
    const auto e = nlohmann::json::parse(line);
    if (e["event"] == "start_workers") {
      worlds.push_back(e["world_size"].get<std::int64_t>());
    }
  }
  return worlds;
}

TEST(NodeCost, EachRestartIsChargedAtTheNodesOfTheGenerationItStarts) {
  const nlohmann::json leave = {{{"at_step", 30}, {"kind", "leave"}, {"node", "n1"}}};
  const nlohmann::json perNode = {{"fixed_seconds", 1}, {"per_node_seconds", 10}};
  RunResult r;
  const Scenario s = parse(elasticJob(perNode, leave));
  ASSERT_EQ(startWorlds(s, r), (std::vector<std::int64_t>{4, 3}));
  // 1 + 10 x 4 at the start, 1 + 10 x 3 after n1 left (no checkpoint to load before step 50).
  EXPECT_EQ(r.startupNs, secondsToNanos(41) + secondsToNanos(31));
  // In step-level mode too.
  RunOptions o;
  o.mode = SimMode::StepLevel;
  EXPECT_EQ(simulate(s, o).startupNs, r.startupNs);
  // More nodes, more cost: the same job without the leave pays 41 s once; a constant cost of
  // 41 s would have charged the 3-node start 41 s too.
  RunResult constant;
  ASSERT_EQ(startWorlds(parse(elasticJob(41, leave)), constant).size(), 2u);
  EXPECT_EQ(constant.startupNs, secondsToNanos(82));
  EXPECT_LT(r.startupNs, constant.startupNs);
  EXPECT_GT(r.ettr(), constant.ettr());
}

TEST(NodeCost, EachLiveStartIsChargedAtItsNodes) {
  const nlohmann::json kill = {{{"at_step", 30}, {"kind", "kill_worker"}, {"rank", 1}}};
  const nlohmann::json leave = {{{"at_step", 30}, {"kind", "leave"}, {"node", "n1"}}};
  const nlohmann::json reconfigure = {{"points", points({{2, 0.2}, {4, 2.0}})}};
  RunResult killed;
  ASSERT_EQ(startWorlds(parse(elasticJob(10, kill, reconfigure)), killed),
            (std::vector<std::int64_t>{4, 4}));
  EXPECT_EQ(killed.liveRecoveries, 1);
  // The first start's 10 s, then the live start of 4 nodes: the point at 4, 2 s.
  EXPECT_EQ(killed.startupNs, secondsToNanos(10) + secondsToNanos(2.0));
  RunResult left;
  ASSERT_EQ(startWorlds(parse(elasticJob(10, leave, reconfigure)), left),
            (std::vector<std::int64_t>{4, 3}));
  EXPECT_EQ(left.liveRecoveries, 1);
  // 3 nodes: halfway between the points at 2 and 4.
  EXPECT_EQ(left.startupNs, secondsToNanos(10) + secondsToNanos(1.1));
}

}  // namespace
}  // namespace stretch::sim
