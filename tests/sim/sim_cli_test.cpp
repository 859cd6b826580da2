// `stretch sim` end to end: help, the JSON summary, Monte Carlo figures, the output files, the
// unknown-key warning and the exit status 2 with a clear message on bad input.

#include <array>
#include <cstdio>
#include <fstream>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/test_support.hpp"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct CliRun {
  int status = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

CliRun runSim(const std::string& args, const stretch::test::TempDir& dir) {
  const auto errPath = dir.path() / "stderr.txt";
  const std::string cmd = std::string(STRETCH_CLI) + " sim " + args + " 2>" + errPath.string();
  CliRun r;
  const auto shell = stretch::test::runShell(cmd);
  r.out = shell.out;
  r.status = shell.exitCode;
  r.err = stretch::test::readFileIfAny(errPath);
  return r;
}

std::string fixture(const std::string& name) {
  return stretch::test::fixturePath("scenarios/" + name + ".json").string();
}

TEST(SimCli, HelpNamesEveryOption) {
  stretch::test::TempDir dir;
  const CliRun r = runSim("--help", dir);
  EXPECT_EQ(r.status, 0);
  for (const char* opt : {"--seeds", "--threads", "--json", "--trace", "--csv", "--events",
                          "--step-level", "SCENARIO"}) {
    EXPECT_THAT(r.out, HasSubstr(opt)) << opt;
  }
}

TEST(SimCli, JsonSummaryAndOutputFiles) {
  stretch::test::TempDir dir;
  const auto events = dir.path() / "events.jsonl";
  const auto trace = dir.path() / "trace.json";
  const auto csv = dir.path() / "rows.csv";
  const CliRun r = runSim(fixture("trace_replay") + " --json --events " + events.string() +
                              " --trace " + trace.string() + " --csv " + csv.string(),
                          dir);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["scenario"], "trace_replay");
  EXPECT_EQ(j["failures"], 6);
  EXPECT_EQ(j["outcome"], "horizon");
  EXPECT_NEAR(j["simulated_hours"].get<double>(), 48.0, 1e-9);
  EXPECT_EQ(stretch::test::readFile(events),
            stretch::test::readFile(stretch::test::sourceDir() /
                                    "tests/sim/golden/trace_replay.events.jsonl"));
  const auto t = nlohmann::json::parse(stretch::test::readFile(trace));
  EXPECT_GT(t["traceEvents"].size(), 20u);
  EXPECT_THAT(stretch::test::readFile(csv), HasSubstr(",failure,"));
}

TEST(SimCli, SeedsGiveMeanAndConfidenceInterval) {
  stretch::test::TempDir dir;
  const CliRun r = runSim(fixture("spot_preemptions") + " --seeds 6 --threads 2 --json", dir);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["seeds"], 6);
  EXPECT_GT(j["ettr"]["mean"].get<double>(), 0.5);
  EXPECT_GT(j["ettr"]["ci95"].get<double>(), 0.0);
  EXPECT_TRUE(j["world_size_hours"].is_object());
  // The human summary too.
  const CliRun h = runSim(fixture("spot_preemptions") + " --seeds 3 -q", dir);
  ASSERT_EQ(h.status, 0);
  EXPECT_THAT(h.out, HasSubstr("ETTR"));
  EXPECT_THAT(h.out, HasSubstr("±"));
}

TEST(SimCli, UnknownKeysWarnBadValuesFailWithStatus2) {
  stretch::test::TempDir dir;
  const auto path = dir.path() / "s.json";
  std::ofstream(path) << R"({"cluster": {"preset": "dgx-h100", "nodes": 2},
    "job": {"config": {"train_micro_batch_size_per_gpu": 1}, "seconds_per_sample_per_gpu": 0.1,
            "horizon_hours": 1, "flavour": "x"}})";
  const CliRun ok =
      runSim(path.string() + " --presets " + stretch::test::fixturePath("clusters").string(), dir);
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_THAT(ok.err, HasSubstr("warning: job.flavour: unknown key, ignored"));

  std::ofstream(path) << R"({"cluster": {"preset": "dgx-h100"},
    "job": {"config": {"train_micro_batch_size_per_gpu": 1}, "seconds_per_sample_per_gpu": 0.1,
            "horizon_hours": 1, "checkpoint": {"interval_minutes": -3}}})";
  const CliRun bad =
      runSim(path.string() + " --presets " + stretch::test::fixturePath("clusters").string(), dir);
  EXPECT_EQ(bad.status, 2);
  EXPECT_THAT(bad.err, HasSubstr("job.checkpoint.interval_minutes = -3: expected a positive "
                                 "number of minutes, at most 6e+07"));
  const CliRun badJson = runSim(
      path.string() + " --json --presets " + stretch::test::fixturePath("clusters").string(), dir);
  EXPECT_EQ(badJson.status, 2);
  EXPECT_EQ(nlohmann::json::parse(badJson.out)["error"], "ConfigError");

  const CliRun missing = runSim((dir.path() / "none.json").string(), dir);
  EXPECT_EQ(missing.status, 2);
  EXPECT_THAT(missing.err, HasSubstr("none.json"));
}

// Issue 42: `--seeds 100000000` aborted with std::bad_alloc (exit 134) and a Weibull shape of
// 1e-9 ended in an InternalError from the scheduler; both are bad input now (exit 2), named.
TEST(SimCli, SeedsAndShapesOutOfRangeAreBadInputNotAborts) {
  stretch::test::TempDir dir;
  const CliRun many = runSim(fixture("daly_exponential") + " -q --seeds 100000000", dir);
  EXPECT_EQ(many.status, 2) << many.err;
  EXPECT_THAT(many.err, HasSubstr("--seeds: Value 100000000 not in range 1 to 1000000"));

  const auto path = dir.path() / "s.json";
  std::ofstream(path) << R"({"cluster": {"nodes": 2, "gpus_per_node": 1, "intra_node_GBps": 0,
                "inter_node_GBps": 10, "intra_latency_us": 1, "inter_latency_us": 5},
    "job": {"config": {"train_micro_batch_size_per_gpu": 1}, "seconds_per_sample_per_gpu": 0.1,
            "horizon_hours": 10},
    "failures": {"model": "weibull", "node_mtbf_hours": 10, "shape": 1e-9}})";
  const CliRun shape = runSim(path.string() + " -q --json", dir);
  EXPECT_EQ(shape.status, 2) << shape.out;
  const auto e = nlohmann::json::parse(shape.out);
  EXPECT_EQ(e["error"], "ConfigError");
  EXPECT_EQ(e["message"],
            "failures.shape = 1e-09: expected the Weibull shape k, a number in [0.1, 100]");
}

}  // namespace

namespace {

// `mpirun -n 3 stretch sim --seeds N`: the replicas are split over three processes and rank 0
// alone prints and writes, the same figures and the same event log as one process. Skipped
// where mpirun or an MPI build is missing (`stretch report` says which).
TEST(SimCli, MpirunSplitsTheReplicasAndRankZeroPrintsWhatOneProcessPrints) {
  const std::string mpirun = stretch::test::mpirunPrefix(STRETCH_CLI, 3, 120);
  if (mpirun.empty()) {
    GTEST_SKIP() << "mpirun or an MPI build of stretch is missing";
  }
  stretch::test::TempDir dir;
  auto shell = [&](const std::string& cmd) {
    CliRun r;
    const auto run = stretch::test::runShell(cmd + " 2>" + (dir.path() / "stderr.txt").string());
    r.out = run.out;
    r.status = run.exitCode;
    r.err = stretch::test::readFileIfAny(dir.path() / "stderr.txt");
    return r;
  };
  const auto oneLog = dir.path() / "one.jsonl";
  const auto ranksLog = dir.path() / "ranks.jsonl";
  const std::string args =
      " sim " + fixture("daly_exponential") + " --seeds 25 --threads 1 --json -q --events ";
  const CliRun one = shell(std::string(STRETCH_CLI) + args + oneLog.string());
  ASSERT_EQ(one.status, 0) << one.err;
  const CliRun ranks = shell(mpirun + STRETCH_CLI + args + ranksLog.string());
  ASSERT_EQ(ranks.status, 0) << ranks.err << ranks.out;
  auto figures = [](const std::string& out) {
    nlohmann::json j = nlohmann::json::parse(out);  // one object: rank 0 alone printed
    for (const char* key :
         {"wall_seconds", "agent_wall_seconds", "batch_wall_seconds", "threads", "processes"}) {
      j.erase(key);
    }
    return j;
  };
  EXPECT_EQ(nlohmann::json::parse(ranks.out)["processes"], 3);
  EXPECT_EQ(figures(ranks.out).dump(), figures(one.out).dump());
  EXPECT_GT(figures(one.out)["ettr"]["ci95"].get<double>(), 0.0);
  EXPECT_EQ(stretch::test::readFile(ranksLog), stretch::test::readFile(oneLog));
  // An error on every rank is printed once, by rank 0, with the usual exit status.
  const CliRun bad = shell(mpirun + STRETCH_CLI + " sim /no/such/scenario.json --seeds 6");
  EXPECT_EQ(bad.status, 2) << bad.err;
  std::size_t count = 0;
  for (std::size_t at = bad.err.find("stretch sim: error"); at != std::string::npos;
       at = bad.err.find("stretch sim: error", at + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 1u) << bad.err;
}

// `--calibrate --control-plane BENCH SCENARIO`: no runs; the benchmark's cost per node count is
// added to the scenario's restart overhead, and the result runs. A malformed benchmark is exit 2
// naming the file, the key and the value.
TEST(SimCli, ControlPlaneBenchmarkIsAddedToAScenario) {
  stretch::test::TempDir dir;
  const auto bench = dir.path() / "cp.json";
  std::ofstream(bench) << R"({"machine": "vm", "date": "2026-11-29", "points": [
      {"nodes": 2, "launch_s": 1, "kill_to_running_s": 0.4, "stop_noticed_s": 3,
       "idle_requests_per_node_s": 1, "agent_rss_mib": 8},
      {"nodes": 4, "launch_s": 2, "kill_to_running_s": 0.6, "stop_noticed_s": 3.2,
       "idle_requests_per_node_s": 1, "agent_rss_mib": 8},
      {"nodes": 8, "launch_s": 4, "kill_to_running_s": null, "stop_noticed_s": null,
       "idle_requests_per_node_s": 1, "agent_rss_mib": 8, "failed": true}]})";
  const auto out = dir.path() / "scenario.json";
  const CliRun r = runSim("--calibrate --control-plane " + bench.string() + " " +
                              fixture("elastic_scale") + " --calibration-out " + out.string(),
                          dir);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("control plane on vm, 2026-11-29: kill_to_running_s 0.4 s at 2 "
                               "nodes, 0.6 s at 4 nodes (fit 0.2 s + 0.1 s per node); "
                               "stop_noticed_s 3 s at 2 nodes, 3.2 s at 4 nodes (fit 2.8 s + 0.1 "
                               "s per node)"));
  EXPECT_THAT(r.out, HasSubstr("job.restart_overhead_seconds now grows with the nodes"));
  EXPECT_THAT(r.out, HasSubstr("job.failure_detection_seconds now grows with the nodes"));
  EXPECT_THAT(r.out, HasSubstr("note: kill_to_running_s null at 8 nodes (\"failed\": the job "
                               "ended during the recoveries): left out of the restart cost"));
  const auto written = nlohmann::json::parse(stretch::test::readFileIfAny(out));
  const auto& cost = written["job"]["restart_overhead_seconds"];
  EXPECT_EQ(cost["points"].size(), 2u);
  EXPECT_DOUBLE_EQ(cost["points"][1]["seconds"].get<double>(), 0.6);
  const auto& detection = written["job"]["failure_detection_seconds"];
  EXPECT_EQ(detection["points"].size(), 2u);
  EXPECT_DOUBLE_EQ(detection["points"][1]["seconds"].get<double>(), 3.2);
  EXPECT_EQ(written["calibration"]["control_plane"]["machine"], "vm");
  EXPECT_EQ(written["calibration"]["control_plane"]["points"][2]["failed"], true);
  // The written scenario runs; its starts now cost more than the fixture's constant.
  const CliRun before = runSim(fixture("elastic_scale") + " --json", dir);
  const CliRun after = runSim(out.string() + " --json", dir);
  ASSERT_EQ(before.status, 0) << before.err;
  ASSERT_EQ(after.status, 0) << after.err;
  EXPECT_THAT(after.err, Not(HasSubstr("unknown key")));  // failure_detection_seconds is known
  EXPECT_GT(nlohmann::json::parse(after.out)["startup_hours"].get<double>(),
            nlohmann::json::parse(before.out)["startup_hours"].get<double>());

  std::ofstream(bench) << R"({"machine": "vm", "date": "2026-11-29", "points": [
      {"nodes": 2, "launch_s": 1, "kill_to_running_s": -0.2, "stop_noticed_s": 3,
       "idle_requests_per_node_s": 1, "agent_rss_mib": 8}]})";
  const CliRun bad =
      runSim("--calibrate --control-plane " + bench.string() + " " + fixture("elastic_scale"), dir);
  EXPECT_EQ(bad.status, 2);
  EXPECT_THAT(bad.err, HasSubstr("cp.json: points[0].kill_to_running_s = -0.2: expected a "
                                 "non-negative number of seconds"));
  std::ofstream(bench) << "{\"machine\": ";
  const CliRun broken =
      runSim("--calibrate --control-plane " + bench.string() + " " + fixture("elastic_scale"), dir);
  EXPECT_EQ(broken.status, 2);
  EXPECT_THAT(broken.err, HasSubstr("invalid JSON"));
  // Every point failed: nothing to fit the restart from.
  std::ofstream(bench) << R"({"machine": "vm", "date": "2026-11-29", "points": [
      {"nodes": 2, "launch_s": null, "kill_to_running_s": null, "stop_noticed_s": null,
       "idle_requests_per_node_s": null, "agent_rss_mib": null, "failed": true}]})";
  const CliRun none =
      runSim("--calibrate --control-plane " + bench.string() + " " + fixture("elastic_scale"), dir);
  EXPECT_EQ(none.status, 2);
  EXPECT_THAT(none.err, HasSubstr("cp.json: points[].kill_to_running_s = null at every point (2 "
                                  "nodes; \"failed\" at 2): expected a number of seconds"));
  // A SCENARIO with --calibrate needs --control-plane.
  const CliRun usage = runSim("--calibrate " + fixture("elastic_scale"), dir);
  EXPECT_EQ(usage.status, 2);
  EXPECT_THAT(usage.err, HasSubstr("--control-plane"));
}

// The calibrated detection is charged: the same Daly scenario calibrated from a benchmark whose
// 4-node stop_noticed_s is 60 s loses at least most of 60 s more per node failure than from one
// that did not measure it (same restart points, same seed).
TEST(SimCli, TheCalibratedFailureDetectionIsChargedAtEveryNodeFailure) {
  stretch::test::TempDir dir;
  auto lostHours = [&](const char* stopNoticed) {
    const auto bench = dir.path() / "cp.json";
    std::ofstream(bench) << R"({"machine": "vm", "date": "2026-11-29", "points": [
        {"nodes": 4, "launch_s": 2, "kill_to_running_s": 0.6, "stop_noticed_s": )"
                         << stopNoticed << R"(, "idle_requests_per_node_s": 1,
         "agent_rss_mib": 8}]})";
    const auto out = dir.path() / "scenario.json";
    const CliRun calibrate =
        runSim("--calibrate --control-plane " + bench.string() + " " + fixture("daly_exponential") +
                   " --calibration-out " + out.string(),
               dir);
    EXPECT_EQ(calibrate.status, 0) << calibrate.err;
    const CliRun run = runSim(out.string() + " --json", dir);
    EXPECT_EQ(run.status, 0) << run.err;
    const auto result = nlohmann::json::parse(run.out);
    return std::pair{result["lost_hours"].get<double>(), result["failures"].get<double>()};
  };
  const auto [withoutLost, withoutFailures] = lostHours("null");
  const auto [withLost, withFailures] = lostHours("60");
  ASSERT_GT(withFailures, 10.0);
  EXPECT_GT(withLost - withoutLost, 0.9 * withFailures * 60.0 / 3600.0)
      << withoutLost << " h lost without, " << withLost << " h with, " << withFailures
      << " failures";
}

}  // namespace
