// `stretch sim --calibrate --control-plane FILE` (tools/sim_calibrate_control_plane.cpp): reading
// a control-plane benchmark result (bench/control_plane.sh's JSON), rejecting malformed ones with
// errors that name the file, the key, the value and what was expected, the fit, and the scenario
// it gives (the measured points added to the per-job costs).

#include <fstream>

#include <nlohmann/json.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/common/error.hpp"
#include "runtime/config/json_reader.hpp"
#include "sim/node_cost.hpp"
#include "sim/scenario.hpp"
#include "tests/support/error_of.hpp"
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

// What parseControlPlane says of `j` (a test failure when it accepts it).
std::string errorOf(const nlohmann::json& j) {
  return test::errorOf<ConfigError>([&] { parseControlPlane(j, "cp.json"); });
}

TEST(CalibrateControlPlane, ReadsTheBenchmarkAndFitsFixedPlusPerNode) {
  const ControlPlaneBench b = parseControlPlane(bench(), "cp.json");
  EXPECT_EQ(b.machine, "test VM");
  EXPECT_EQ(b.date, "2026-11-29");
  ASSERT_EQ(b.points.size(), 3u);
  EXPECT_EQ(b.points[0].nodes, 256);  // by node count
  EXPECT_EQ(b.points[2].agentRssMib, std::nullopt);
  EXPECT_EQ(b.points[1].launchSeconds, 6.0);
  // Two costs: kill -> running (the restart) and stop -> noticed (the detection).
  EXPECT_EQ(b.restart.field, "kill_to_running_s");
  EXPECT_EQ(b.restart.points,
            (std::vector<sim::NodeCostPoint>{{256, 0.5}, {1024, 1.5}, {2048, 3.0}}));
  EXPECT_EQ(b.detection.field, "stop_noticed_s");
  EXPECT_EQ(b.detection.points,
            (std::vector<sim::NodeCostPoint>{{256, 5.1}, {1024, 5.5}, {2048, 6.0}}));
  // Least squares by hand over the three restart costs.
  const double mx = 3328.0 / 3.0;
  const double my = 5.0 / 3.0;
  double sxx = 0;
  double sxy = 0;
  for (const auto& [n, s] : {std::pair{256.0, 0.5}, {1024.0, 1.5}, {2048.0, 3.0}}) {
    sxx += (n - mx) * (n - mx);
    sxy += (n - mx) * (s - my);
  }
  EXPECT_NEAR(b.restart.fit.perNodeSeconds, sxy / sxx, 1e-15);
  EXPECT_NEAR(b.restart.fit.fixedSeconds, my - sxy / sxx * mx, 1e-12);
  EXPECT_GT(b.restart.fit.perNodeSeconds, 0.0013);
  EXPECT_LT(b.restart.fit.perNodeSeconds, 0.0015);
  EXPECT_GT(b.detection.fit.fixedSeconds, 4.9);
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
  j["points"][0]["failed"] = "yes";
  EXPECT_THAT(errorOf(j), HasSubstr("cp.json: points[0].failed = \"yes\": expected true or false"));
  j = bench();
  j["points"][0]["stop_to_running_s"] = -2;
  EXPECT_THAT(errorOf(j), HasSubstr("cp.json: points[0].stop_to_running_s = -2: expected a "
                                    "non-negative number of seconds"));
  j = bench();
  j["points"][0].erase("kill_to_running_s");
  EXPECT_THAT(errorOf(j), HasSubstr("cp.json: points[0].kill_to_running_s = (missing): expected"));
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

// A failed 2,048-agent point (the job ended during its recoveries: both times null) is left out
// of both costs, and the notes say where and why; the point stays in the record.
TEST(CalibrateControlPlane, AFailedPointIsLeftOutOfTheCostsItLacks) {
  nlohmann::json j = bench();
  j["points"][2]["kill_to_running_s"] = nullptr;
  j["points"][2]["stop_noticed_s"] = nullptr;
  j["points"][2]["failed"] = true;
  const ControlPlaneBench b = parseControlPlane(j, "cp.json");
  ASSERT_EQ(b.points.size(), 3u);
  EXPECT_TRUE(b.points[2].failed);
  EXPECT_EQ(b.points[2].launchSeconds, 11.0);  // its other quantities are kept
  EXPECT_EQ(b.restart.points, (std::vector<sim::NodeCostPoint>{{256, 0.5}, {1024, 1.5}}));
  EXPECT_EQ(b.detection.points, (std::vector<sim::NodeCostPoint>{{256, 5.1}, {1024, 5.5}}));
  EXPECT_NEAR(b.restart.fit.perNodeSeconds, 1.0 / 768, 1e-15);
  ASSERT_EQ(b.notes.size(), 2u) << ::testing::PrintToString(b.notes);
  EXPECT_EQ(b.notes[0],
            "kill_to_running_s null at 2048 nodes (\"failed\": the job ended during the "
            "recoveries): left out of the restart cost");
  EXPECT_EQ(b.notes[1],
            "stop_noticed_s null at 2048 nodes (\"failed\": the job ended during the recoveries): "
            "left out of the detection cost");

  // Failed after its kill was timed: the kill is kept, the missing stop left out.
  j["points"][2]["kill_to_running_s"] = 3.0;
  const ControlPlaneBench kept = parseControlPlane(j, "cp.json");
  EXPECT_EQ(kept.restart.points.size(), 3u);
  EXPECT_EQ(kept.detection.points.size(), 2u);
  ASSERT_EQ(kept.notes.size(), 2u) << ::testing::PrintToString(kept.notes);
  EXPECT_EQ(kept.notes[0],
            "kill_to_running_s at 2048 nodes was measured in a run that then failed (\"failed\": "
            "true): kept in the restart cost");
  // Written into a scenario: each cost gets its own points; the record keeps all three.
  nlohmann::json scenario = {{"job", {{"restart_overhead_seconds", 2.0}}}};
  EXPECT_EQ(
      addControlPlane(scenario, kept),
      (std::vector<std::string>{"job.restart_overhead_seconds", "job.failure_detection_seconds"}));
  EXPECT_EQ(scenario["job"]["restart_overhead_seconds"]["points"].size(), 3u);
  EXPECT_EQ(scenario["job"]["failure_detection_seconds"]["points"].size(), 2u);
  EXPECT_EQ(scenario["job"]["failure_detection_seconds"]["fixed_seconds"], 0.0);
  const auto& cp = scenario["calibration"]["control_plane"];
  EXPECT_EQ(cp["points"].size(), 3u);
  EXPECT_EQ(cp["points"][2]["failed"], true);
  EXPECT_EQ(cp["points"][2]["stop_noticed_s"], nullptr);
  EXPECT_EQ(cp["fit"]["stop_noticed_s"]["nodes"], nlohmann::json({256, 1024}));
  EXPECT_EQ(cp["notes"].size(), kept.notes.size());
}

// One null stop_noticed_s (not measured, the run did not fail): the detection is fitted from the
// other two, the restart from all three.
TEST(CalibrateControlPlane, ANullStopNoticedIsLeftOutOfTheDetectionOnly) {
  nlohmann::json j = bench();
  j["points"][0]["stop_noticed_s"] = nullptr;  // 1,024 nodes
  const ControlPlaneBench b = parseControlPlane(j, "cp.json");
  EXPECT_EQ(b.restart.points.size(), 3u);
  EXPECT_EQ(b.detection.points, (std::vector<sim::NodeCostPoint>{{256, 5.1}, {2048, 6.0}}));
  EXPECT_EQ(b.notes, (std::vector<std::string>{
                         "stop_noticed_s null at 1024 nodes (not measured): left out of the "
                         "detection cost"}));
  // Null at every point: the detection is not calibrated, and the scenario's key is left alone.
  for (auto& p : j["points"]) {
    p["stop_noticed_s"] = nullptr;
  }
  const ControlPlaneBench none = parseControlPlane(j, "cp.json");
  EXPECT_TRUE(none.detection.points.empty());
  EXPECT_THAT(none.notes.back(), HasSubstr("stop_noticed_s measured at no node count: "
                                           "job.failure_detection_seconds is left as it was"));
  nlohmann::json scenario = {{"job", {{"failure_detection_seconds", 7.0}}}};
  EXPECT_EQ(addControlPlane(scenario, none),
            (std::vector<std::string>{"job.restart_overhead_seconds"}));
  EXPECT_EQ(scenario["job"]["failure_detection_seconds"], 7.0);
  EXPECT_EQ(scenario["calibration"]["control_plane"]["fit"]["stop_noticed_s"], nullptr);
}

// Nothing to fit the restart from: an error naming the file, the field, the value and what was
// expected.
TEST(CalibrateControlPlane, NoKillToRunningAnywhereIsAnError) {
  nlohmann::json j = bench();
  for (auto& p : j["points"]) {
    for (const char* key : {"launch_s", "kill_to_running_s", "stop_noticed_s",
                            "idle_requests_per_node_s", "agent_rss_mib"}) {
      p[key] = nullptr;
    }
  }
  j["points"][2]["failed"] = true;
  EXPECT_THAT(errorOf(j),
              HasSubstr("cp.json: points[].kill_to_running_s = null at every point (256, 1024, "
                        "2048 nodes; \"failed\" at 2048): expected a number of seconds at one "
                        "node count at least (the restart cost is fitted from it)"));
}

// Node counts far apart (256 / 1,024 / 2,048) with a cost that grows faster than linearly: the
// least-squares line has a negative fixed part. The note says so, and the scenario's cost (the
// points, not the line) is never below the per-job cost and never falls with more nodes.
TEST(CalibrateControlPlane, ANegativeFittedFixedPartNeverMakesANegativeCost) {
  nlohmann::json j = bench();
  j["points"][1]["kill_to_running_s"] = 0.5;  // 256
  j["points"][0]["kill_to_running_s"] = 1.0;  // 1,024
  j["points"][2]["kill_to_running_s"] = 4.0;  // 2,048
  const ControlPlaneBench b = parseControlPlane(j, "cp.json");
  EXPECT_LT(b.restart.fit.fixedSeconds, -0.3);
  EXPECT_GT(b.restart.fit.perNodeSeconds, 0.0019);
  ASSERT_EQ(b.notes.size(), 1u) << ::testing::PrintToString(b.notes);
  EXPECT_THAT(b.notes[0], HasSubstr("kill_to_running_s: the fitted line -0.392 s + 0.00201 s per "
                                    "node is under 0 s below 195 nodes; the simulator takes the "
                                    "measured points instead, and below 256 nodes the line down "
                                    "from that point (0.5 s), which reaches 0 s at 7 nodes"));
  nlohmann::json scenario = {{"job", {{"restart_overhead_seconds", 1.25}}}};
  addControlPlane(scenario, b);
  std::vector<std::string> warnings;
  const sim::SecondsByNodes cost = *sim::readSecondsByNodes(
      config::json::ObjectReader(scenario["job"], "job"), "restart_overhead_seconds", warnings);
  double previous = 0.0;
  for (std::int64_t n : {1, 2, 7, 8, 16, 64, 128, 255, 256, 512, 1024, 2048, 4096, 16384}) {
    const double at = cost.at(n);
    EXPECT_GE(at, 1.25) << n;
    EXPECT_GE(at, previous) << n;
    previous = at;
  }
  EXPECT_DOUBLE_EQ(cost.at(1), 1.25);
  EXPECT_DOUBLE_EQ(cost.at(256), 1.75);
  EXPECT_NEAR(cost.at(64), 1.25 + 0.5 - b.restart.fit.perNodeSeconds * 192, 1e-12);
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
  ControlPlaneBench b = parseControlPlane(bench(), "cp.json");
  b.file = "/some/dir/cp.json";
  const auto changed = addControlPlane(scenario, b);
  EXPECT_EQ(changed, (std::vector<std::string>{"job.restart_overhead_seconds",
                                               "job.recovery.reconfigure_seconds",
                                               "job.failure_detection_seconds"}));
  const sim::Scenario s = parse(scenario);
  EXPECT_TRUE(s.warnings.empty()) << ::testing::PrintToString(s.warnings);
  const sim::SecondsByNodes& restart = s.job.restartOverheadSeconds;
  const sim::SecondsByNodes& reconfigure = s.job.recovery.reconfigureSeconds;
  EXPECT_DOUBLE_EQ(restart.at(256), 1.25 + 0.5);
  EXPECT_DOUBLE_EQ(restart.at(1024), 1.25 + 1.5);
  EXPECT_DOUBLE_EQ(reconfigure.at(2048), 0.05 + 3.0);
  // Beyond the measured: the fitted slope.
  EXPECT_NEAR(restart.at(16384), 1.25 + 3.0 + b.restart.fit.perNodeSeconds * (16384 - 2048), 1e-9);
  EXPECT_THAT(restart.describe(16384),
              HasSubstr("1.25 s given, plus measured at 256 to 2048 nodes (3 points) (control "
                        "plane on test VM, 2026-11-29, cp.json), extrapolated beyond 2048 nodes"));
  // The detection: stop -> noticed per node count, from 0 s (the scenario had none), with the
  // same source.
  const auto& detection = scenario["job"]["failure_detection_seconds"];
  EXPECT_EQ(detection["fixed_seconds"], 0.0);
  EXPECT_EQ(
      detection["points"],
      nlohmann::json::parse(R"([{"nodes": 256, "seconds": 5.1}, {"nodes": 1024, "seconds": 5.5},
                                      {"nodes": 2048, "seconds": 6.0}])"));
  EXPECT_EQ(detection["source"], "control plane on test VM, 2026-11-29, cp.json");
  const sim::SecondsByNodes& detect = s.job.failureDetectionSeconds;
  EXPECT_DOUBLE_EQ(detect.at(256), 5.1);
  EXPECT_DOUBLE_EQ(detect.at(2048), 6.0);
  EXPECT_NEAR(detect.at(640), 5.3, 1e-12);  // between 256 and 1,024: interpolated
  EXPECT_EQ(detect.source(), "control plane on test VM, 2026-11-29, cp.json");
  // The benchmark is recorded beside the fits; the calibration's own figures stay.
  const auto& cp = scenario["calibration"]["control_plane"];
  EXPECT_EQ(cp["machine"], "test VM");
  EXPECT_EQ(cp["file"], "cp.json");
  EXPECT_EQ(cp["points"].size(), 3u);
  EXPECT_EQ(cp["points"][2]["agent_rss_mib"], nullptr);
  EXPECT_EQ(cp["points"][2]["failed"], false);
  EXPECT_DOUBLE_EQ(cp["fit"]["kill_to_running_s"]["per_node_seconds"].get<double>(),
                   b.restart.fit.perNodeSeconds);
  EXPECT_DOUBLE_EQ(cp["fit"]["stop_noticed_s"]["fixed_seconds"].get<double>(),
                   b.detection.fit.fixedSeconds);
  EXPECT_EQ(scenario["calibration"]["restart_overhead_seconds"], 1.25);

  // Checkpoint mode: only the restart grows; an object keeps its fixed and per-node parts and
  // gets the new points.
  nlohmann::json restartOnly = scenario;
  restartOnly["job"].erase("recovery");
  restartOnly["job"]["restart_overhead_seconds"] = {{"fixed_seconds", 2},
                                                    {"per_node_seconds", 0.001},
                                                    {"points", {{{"nodes", 8}, {"seconds", 1}}}}};
  restartOnly["job"]["failure_detection_seconds"] = {{"fixed_seconds", 1}, {"note", "keep"}};
  EXPECT_EQ(
      addControlPlane(restartOnly, b),
      (std::vector<std::string>{"job.restart_overhead_seconds", "job.failure_detection_seconds"}));
  const sim::Scenario r = parse(restartOnly);
  EXPECT_EQ(r.job.restartOverheadSeconds.points().size(), 3u);
  EXPECT_DOUBLE_EQ(r.job.restartOverheadSeconds.at(1024), 2 + 1.024 + 1.5);
  EXPECT_TRUE(r.warnings.empty()) << ::testing::PrintToString(r.warnings);
  EXPECT_DOUBLE_EQ(r.job.failureDetectionSeconds.at(1024), 1 + 5.5);
}

// One point, without stop_noticed_s (the shape of the hand-copied dev-VM fixture): the restart
// cost grows in proportion to the nodes, the detection is not calibrated, and the notes say both.
TEST(CalibrateControlPlane, OnePointWithoutStopNoticed) {
  const ControlPlaneBench b = parseControlPlane(nlohmann::json::parse(R"({
    "machine": "vm", "date": "2026-11-29",
    "points": [{"nodes": 256, "launch_s": 2.53, "kill_to_running_s": 0.67, "stop_noticed_s": null,
                "idle_requests_per_node_s": null, "agent_rss_mib": null}]})"),
                                                "cp.json");
  ASSERT_EQ(b.points.size(), 1u);
  EXPECT_EQ(b.points[0].launchSeconds, 2.53);
  EXPECT_FALSE(b.points[0].failed);
  EXPECT_EQ(b.restart.points, (std::vector<sim::NodeCostPoint>{{256, 0.67}}));
  EXPECT_DOUBLE_EQ(b.restart.fit.perNodeSeconds, 0.67 / 256);
  EXPECT_EQ(b.restart.fit.fixedSeconds, 0.0);
  EXPECT_TRUE(b.detection.points.empty());
  EXPECT_EQ(b.notes,
            (std::vector<std::string>{
                "kill_to_running_s: one node count (256): no slope is measured; the restart cost "
                "is taken to grow in proportion to the nodes beyond it (the pessimistic reading)",
                "stop_noticed_s null at 256 nodes (not measured): left out of the detection cost",
                "stop_noticed_s measured at no node count: job.failure_detection_seconds is left "
                "as it was (a hung node's detection, --keepalive_timeout, is not calibrated)"}));
}

// fixtures/control_plane/dev_vm.json reads, and the 16,384-GPU live plan carries exactly what the
// calibration writes from it (fixtures/README.md: regenerate the plan when the benchmark file is
// replaced).
TEST(CalibrateControlPlane, TheLivePlanFixtureCarriesTheDevVmBenchmark) {
  const std::string benchPath = test::fixturePath("control_plane/dev_vm.json").string();
  const ControlPlaneBench b = readControlPlane(benchPath);
  ASSERT_FALSE(b.restart.points.empty());
  const std::filesystem::path plan = test::fixturePath("plans/llama3_16k_live.json");
  std::vector<std::string> changed;
  const std::string regenerated = scenarioWithControlPlane(plan.string(), b, "", changed);
  EXPECT_EQ(test::readFile(plan), regenerated)
      << "regenerate it: stretch sim --calibrate --control-plane " << benchPath << " " << plan
      << " --calibration-out " << plan;
  // On its assumed per-job costs (restart 300 s, reconfiguration 30 s).
  const sim::Scenario live = sim::loadScenario(plan);
  EXPECT_EQ(live.job.restartOverheadSeconds.points(), b.restart.points);
  EXPECT_EQ(live.job.restartOverheadSeconds.fixedSeconds(), 300.0);
  EXPECT_EQ(live.job.recovery.reconfigureSeconds.fixedSeconds(), 30.0);
  EXPECT_EQ(live.job.failureDetectionSeconds.points(), b.detection.points);
}

}  // namespace
}  // namespace stretch::tools
