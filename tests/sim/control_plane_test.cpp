// `stretch sim --calibrate --control-plane FILE` (tools/sim_calibrate_control_plane.cpp): reading
// a control-plane benchmark result (bench/control_plane.sh's JSON), rejecting malformed ones with
// errors that name the file, the key, the value and what was expected, the fit, and the scenario
// it gives (the measured points added to the per-job costs).

#include <fstream>

#include <nlohmann/json.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/common/error.hpp"
#include "sim/scenario.hpp"
#include "tests/support/test_support.hpp"
#include "tools/sim_calibrate.hpp"

namespace stretch::tools {
namespace {

using ::testing::HasSubstr;

nlohmann::json bench() {
  return nlohmann::json::parse(R"({
    "machine": "test VM", "date": "2026-11-29", "commit": "abc",
    "points": [
      {"nodes": 1024, "launch_s": 6.0, "kill_to_running_s": 1.5, "stop_noticed_s": 5.5,
       "idle_requests_per_node_s": 1.2, "agent_rss_mib": 9.5, "load": 3},
      {"nodes": 256, "launch_s": 2.5, "kill_to_running_s": 0.5, "stop_noticed_s": 5.1,
       "idle_requests_per_node_s": 1.5, "agent_rss_mib": 9.0},
      {"nodes": 2048, "launch_s": 11.0, "kill_to_running_s": 3.0, "stop_noticed_s": 6.0,
       "idle_requests_per_node_s": null, "agent_rss_mib": null}
    ]
  })");
}

std::string errorOf(const nlohmann::json& j) {
  try {
    parseControlPlane(j, "cp.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CalibrateControlPlane, ReadsTheBenchmarkAndFitsFixedPlusPerNode) {
  const ControlPlaneBench b = parseControlPlane(bench(), "cp.json");
  EXPECT_EQ(b.machine, "test VM");
  EXPECT_EQ(b.date, "2026-11-29");
  ASSERT_EQ(b.points.size(), 3u);
  EXPECT_EQ(b.points[0].nodes, 256);  // by node count
  EXPECT_EQ(b.points[2].agentRssMib, std::nullopt);
  EXPECT_EQ(b.points[1].launchSeconds, 6.0);
  // The cost: kill -> running plus stop -> noticed.
  ASSERT_EQ(b.cost.size(), 3u);
  EXPECT_DOUBLE_EQ(b.cost[0].seconds, 5.6);
  EXPECT_DOUBLE_EQ(b.cost[1].seconds, 7.0);
  EXPECT_DOUBLE_EQ(b.cost[2].seconds, 9.0);
  // Least squares by hand over the three costs.
  const double mx = 3328.0 / 3.0;
  const double my = 21.6 / 3.0;
  double sxx = 0;
  double sxy = 0;
  for (const auto& [n, s] : {std::pair{256.0, 5.6}, {1024.0, 7.0}, {2048.0, 9.0}}) {
    sxx += (n - mx) * (n - mx);
    sxy += (n - mx) * (s - my);
  }
  EXPECT_NEAR(b.fit.perNodeSeconds, sxy / sxx, 1e-15);
  EXPECT_NEAR(b.fit.fixedSeconds, my - sxy / sxx * mx, 1e-12);
  EXPECT_GT(b.fit.perNodeSeconds, 0.0018);
  EXPECT_LT(b.fit.perNodeSeconds, 0.0020);
  EXPECT_TRUE(b.notes.empty()) << ::testing::PrintToString(b.notes);
}

TEST(CalibrateControlPlane, MalformedResultsAreRejectedNamingTheFileKeyAndValue) {
  EXPECT_THAT(errorOf(nlohmann::json::array()),
              HasSubstr("cp.json: (top level) = []: expected a control-plane benchmark result"));
  auto without = [](const std::string& key) {
    nlohmann::json j = bench();
    j.erase(key);
    return j;
  };
  EXPECT_THAT(errorOf(without("machine")),
              HasSubstr("cp.json: machine = (missing): expected the machine the benchmark ran on"));
  EXPECT_THAT(errorOf(without("date")), HasSubstr("cp.json: date = (missing): expected the date"));
  EXPECT_THAT(errorOf(without("points")),
              HasSubstr("cp.json: points = (missing): expected a non-empty array of {\"nodes\""));
  nlohmann::json j = bench();
  j["points"] = nlohmann::json::array();
  EXPECT_THAT(errorOf(j), HasSubstr("cp.json: points = []: expected a non-empty array"));
  j = bench();
  j["points"][1]["kill_to_running_s"] = -1;
  EXPECT_THAT(errorOf(j), HasSubstr("cp.json: points[1].kill_to_running_s = -1: expected a "
                                    "non-negative number of seconds"));
  j = bench();
  j["points"][0]["kill_to_running_s"] = nullptr;
  EXPECT_THAT(errorOf(j), HasSubstr("cp.json: points[0].kill_to_running_s = null: expected"));
  j = bench();
  j["points"][2].erase("stop_noticed_s");
  EXPECT_THAT(errorOf(j), HasSubstr("cp.json: points[2].stop_noticed_s = (missing): expected a "
                                    "non-negative number of seconds, at most 3.6e+09, or null"));
  j = bench();
  j["points"][0]["launch_s"] = "fast";
  EXPECT_THAT(errorOf(j), HasSubstr("cp.json: points[0].launch_s = \"fast\": expected"));
  j = bench();
  j["points"][0]["nodes"] = 0;
  EXPECT_THAT(errorOf(j), HasSubstr("cp.json: points[0].nodes = 0: expected a positive number of "
                                    "node agents"));
  j = bench();
  j["points"][0]["nodes"] = 2048;
  EXPECT_THAT(errorOf(j), HasSubstr("cp.json: points[2].nodes = 2048: expected a node count no "
                                    "other point has"));
  j = bench();
  j["points"][1] = 5;
  EXPECT_THAT(errorOf(j), HasSubstr("cp.json: points[1] = 5: expected"));
}

TEST(CalibrateControlPlane, AFileThatIsNotJsonIsAnErrorNamingIt) {
  const test::TempDir temp("control-plane");
  const std::filesystem::path dir = temp.path();
  const auto path = (dir / "broken.json").string();
  std::ofstream(path) << "{\"machine\": \"vm\", \"points\": [\n";
  try {
    readControlPlane(path);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr(path + ":2:"));
    EXPECT_THAT(e.what(), HasSubstr("invalid JSON"));
  }
  EXPECT_THROW(readControlPlane((dir / "absent.json").string()), IoError);
}

sim::Scenario parse(const nlohmann::json& j) {
  sim::ScenarioOptions o;
  o.presetDir = test::fixturePath("clusters");
  return sim::parseScenario(j, test::fixturePath("scenarios"), o);
}

TEST(CalibrateControlPlane, ThePointsAreAddedToTheMeasuredPerJobCosts) {
  nlohmann::json scenario = nlohmann::json::parse(R"({
    "cluster": {"nodes": 2, "gpus_per_node": 4, "intra_node_GBps": 100, "inter_node_GBps": 10,
                "intra_latency_us": 1, "inter_latency_us": 5},
    "job": {"config": {"train_micro_batch_size_per_gpu": 2},
            "seconds_per_sample_per_gpu": 0.1, "horizon_hours": 1,
            "restart_overhead_seconds": 1.25,
            "recovery": {"mode": "live", "reconfigure_seconds": 0.05}},
    "calibration": {"restart_overhead_seconds": 1.25}
  })");
  const ControlPlaneBench b = parseControlPlane(bench(), "cp.json");
  const auto changed = addControlPlane(scenario, b);
  EXPECT_EQ(changed, (std::vector<std::string>{"job.restart_overhead_seconds",
                                               "job.recovery.reconfigure_seconds"}));
  const sim::Scenario s = parse(scenario);
  EXPECT_TRUE(s.warnings.empty()) << ::testing::PrintToString(s.warnings);
  const sim::SecondsByNodes& restart = s.job.restartOverheadSeconds;
  const sim::SecondsByNodes& reconfigure = s.job.recovery.reconfigureSeconds;
  EXPECT_DOUBLE_EQ(restart.at(256), 1.25 + 5.6);
  EXPECT_DOUBLE_EQ(restart.at(1024), 1.25 + 7.0);
  EXPECT_DOUBLE_EQ(reconfigure.at(2048), 0.05 + 9.0);
  // Beyond the measured: the fitted slope.
  EXPECT_NEAR(restart.at(16384), 1.25 + 9.0 + b.fit.perNodeSeconds * (16384 - 2048), 1e-9);
  EXPECT_THAT(restart.describe(16384),
              HasSubstr("1.25 s given, plus measured at 256 to 2048 nodes (3 points) (control "
                        "plane on test VM, 2026-11-29), extrapolated beyond 2048 nodes"));
  // The benchmark is recorded beside the fit; the calibration's own figures stay.
  const auto& cp = scenario["calibration"]["control_plane"];
  EXPECT_EQ(cp["machine"], "test VM");
  EXPECT_EQ(cp["points"].size(), 3u);
  EXPECT_EQ(cp["points"][2]["agent_rss_mib"], nullptr);
  EXPECT_DOUBLE_EQ(cp["fit"]["per_node_seconds"].get<double>(), b.fit.perNodeSeconds);
  EXPECT_EQ(scenario["calibration"]["restart_overhead_seconds"], 1.25);

  // Checkpoint mode: only the restart grows; an object keeps its fixed and per-node parts and
  // gets the new points.
  nlohmann::json restartOnly = scenario;
  restartOnly["job"].erase("recovery");
  restartOnly["job"]["restart_overhead_seconds"] = {{"fixed_seconds", 2},
                                                    {"per_node_seconds", 0.001},
                                                    {"points", {{{"nodes", 8}, {"seconds", 1}}}}};
  EXPECT_EQ(addControlPlane(restartOnly, b),
            (std::vector<std::string>{"job.restart_overhead_seconds"}));
  const sim::Scenario r = parse(restartOnly);
  EXPECT_EQ(r.job.restartOverheadSeconds.points().size(), 3u);
  EXPECT_DOUBLE_EQ(r.job.restartOverheadSeconds.at(1024), 2 + 1.024 + 7.0);
}

TEST(CalibrateControlPlane, TheDevVmFixtureIsOnePointWithoutStopNoticed) {
  const ControlPlaneBench b =
      readControlPlane(test::fixturePath("control_plane/dev_vm.json").string());
  ASSERT_EQ(b.points.size(), 1u);
  EXPECT_EQ(b.points[0].nodes, 256);
  EXPECT_EQ(b.points[0].killToRunningSeconds, 0.67);
  EXPECT_EQ(b.points[0].launchSeconds, 2.53);
  EXPECT_EQ(b.points[0].stopNoticedSeconds, std::nullopt);
  EXPECT_EQ(b.cost[0].seconds, 0.67);
  EXPECT_DOUBLE_EQ(b.fit.perNodeSeconds, 0.67 / 256);
  EXPECT_EQ(b.fit.fixedSeconds, 0.0);
  ASSERT_EQ(b.notes.size(), 2u);
  EXPECT_THAT(b.notes[0], HasSubstr("stop_noticed_s not measured at 256 node(s)"));
  EXPECT_THAT(b.notes[1], HasSubstr("one node count (256): no slope is measured"));

  // The 16,384-GPU live plan carries exactly this benchmark on its assumed per-job costs.
  const sim::Scenario live = sim::loadScenario(test::fixturePath("plans/llama3_16k_live.json"));
  EXPECT_DOUBLE_EQ(live.job.restartOverheadSeconds.at(2048), 300.0 + 0.67 * 8);
  EXPECT_DOUBLE_EQ(live.job.recovery.reconfigureSeconds.at(2048), 30.0 + 0.67 * 8);
  EXPECT_EQ(live.job.restartOverheadSeconds.points(),
            (std::vector<sim::NodeCostPoint>{{256, 0.67}}));
}

}  // namespace
}  // namespace stretch::tools
