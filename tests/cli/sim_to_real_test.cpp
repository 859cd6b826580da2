// Sim-to-real: the same small job and fault script, run for real with `stretch launch` (two
// agents of 2 workers on this machine) and in the simulator
// (fixtures/scenarios/sim_to_real_digits.json), must produce the same decisions: the sequence of
// worker starts, stops and the finish, with their generation, world size, batch triple, restart
// count, resume step and nodes. That is the product's core promise (docs/architecture.md).
//
// The script: rank 1 is killed after step 15; node n1 leaves after step 25; it joins again after
// step 40; checkpoints every 10 steps. The real workers pause at steps 25 and 40 (the example's
// fault-script hooks) until the test has taken the node away or brought it back, so the real
// run meets each event at the same step as the simulated one.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/cli/launch_support.hpp"
#include "tests/support/test_support.hpp"

namespace {

using namespace stretch::test::launch;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

// The decisions of an event log: start_workers, stop_workers and finish records, reduced to what
// both worlds must agree on.
std::vector<nlohmann::json> decisions(const fs::path& log) {
  std::vector<nlohmann::json> out;
  for (const auto& e : eventsOf(log)) {
    const std::string kind = e["event"];
    if (kind != "start_workers" && kind != "stop_workers" && kind != "finish")
      continue;
    nlohmann::json d = {{"event", kind}, {"generation", e.value("generation", 0)}};
    if (kind == "start_workers") {
      d["world_size"] = e["world_size"];
      d["batch"] = e["batch"];
      d["restart_count"] = e["restart_count"];
      d["resume_step"] = e.contains("resume_step") ? e["resume_step"] : nlohmann::json();
      std::set<std::string> nodes;
      for (const auto& n : e["nodes"])
        nodes.insert(n.get<std::string>());
      d["nodes"] = nodes;
    }
    out.push_back(d);
  }
  return out;
}

bool waitForFile(const fs::path& path, std::chrono::seconds limit = 60s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!fs::exists(path)) {
    if (std::chrono::steady_clock::now() > deadline)
      return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

bool waitForStarts(const fs::path& log, std::size_t count, std::chrono::seconds limit = 60s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    std::size_t starts = 0;
    for (const auto& d : decisions(log))
      starts += d["event"] == "start_workers" ? 1 : 0;
    if (starts >= count)
      return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

TEST(SimToReal, TheRealJobAndTheSimulatorTakeTheSameDecisions) {
  const fs::path scenario =
      fs::path(STRETCH_SOURCE) / "fixtures" / "scenarios" / "sim_to_real_digits.json";
  stretch::test::TempDir dir("stretch-sim-to-real");

  // The simulator's decisions.
  {
    Launch sim(dir.path(), {scenario.string(), "--events", (dir.path() / "sim.jsonl").string()},
               "sim", "sim-");
    ASSERT_EQ(sim.wait(60s), 0) << sim.err();
  }
  const auto simulated = decisions(dir.path() / "sim.jsonl");
  ASSERT_GE(simulated.size(), 8u);

  // The real run, with the same script.
  const fs::path faults = dir.path() / "faults";
  fs::create_directories(faults);
  ::setenv("STRETCH_FAULT_DIR", faults.c_str(), 1);
  ::setenv("STRETCH_FAULT_KILL_AT_STEP", "15:1", 1);
  ::setenv("STRETCH_FAULT_PAUSE_AT_STEPS", "25,40", 1);
  { std::ofstream(dir.path() / "hostfile") << "n0 slots=2\nn1 slots=2\n"; }
  const std::string config =
      std::string(STRETCH_SOURCE) + "/fixtures/jobs/digits/ds_config_elastic.json";
  const int port = freePort();
  const fs::path events = dir.path() / "real.jsonl";
  Launch launch(dir.path(), {"--hostfile",
                             (dir.path() / "hostfile").string(),
                             "--launcher",
                             "local",
                             "--master_port",
                             std::to_string(port),
                             "--config",
                             config,
                             "--elastic",
                             "1:2",
                             "--last_call",
                             "1",
                             "--max_restarts",
                             "10",
                             "--monitor_interval",
                             "0.1",
                             "--heartbeat_timeout",
                             "5",
                             "--log_dir",
                             (dir.path() / "logs").string(),
                             "--event_log",
                             events.string(),
                             "--checkpoint_dir",
                             (dir.path() / "ckpt").string(),
                             STRETCH_TRAIN_DIGITS,
                             "--config",
                             config,
                             "--steps",
                             "60",
                             "--checkpoint-dir",
                             (dir.path() / "ckpt").string(),
                             "--save-every",
                             "10",
                             "--resume",
                             "--json"});
  for (const char* v :
       {"STRETCH_FAULT_DIR", "STRETCH_FAULT_KILL_AT_STEP", "STRETCH_FAULT_PAUSE_AT_STEPS"})
    ::unsetenv(v);

  // Step 25: node n1 leaves (its agent is stopped), then the workers may go on.
  ASSERT_TRUE(waitForFile(faults / "pause_25.reached")) << launch.err();
  std::ifstream pidFile(dir.path() / "logs" / "agent_n1.pid");
  pid_t n1 = -1;
  pidFile >> n1;
  ASSERT_GT(n1, 0);
  ::kill(n1, SIGTERM);
  ASSERT_TRUE(waitForStarts(events, 3)) << launch.err();
  std::ofstream(faults / "pause_25.release") << "\n";

  // Step 40: node n1 comes back, started by hand; the job grows again.
  ASSERT_TRUE(waitForFile(faults / "pause_40.reached")) << launch.err();
  Launch joiner(dir.path(),
                {"--rdzv", "127.0.0.1:" + std::to_string(port + 1), "--node_id", "n1", "--nproc",
                 "2", "--token_file", (dir.path() / "logs" / "job_token").string(), "--log_dir",
                 (dir.path() / "logs").string()},
                "agent", "n1-again-");
  ASSERT_TRUE(waitForStarts(events, 4)) << launch.err() << joiner.err();
  std::ofstream(faults / "pause_40.release") << "\n";

  ASSERT_EQ(launch.wait(120s), 0) << launch.err();
  EXPECT_EQ(joiner.wait(30s), 0) << joiner.err();

  const auto real = decisions(events);
  std::printf("simulated decisions:\n");
  for (const auto& d : simulated)
    std::printf("  %s\n", d.dump().c_str());
  std::printf("real decisions:\n");
  for (const auto& d : real)
    std::printf("  %s\n", d.dump().c_str());
  EXPECT_EQ(real, simulated);
  const auto summary = jobSummary(dir.path());
  ASSERT_FALSE(summary.is_null());
  EXPECT_EQ(summary["steps"], 60);
}

// `stretch sim --calibrate` measures, fits and writes a scenario the simulator runs; the
// accuracy of its held-out prediction is a measured figure (docs/simulator.md), not asserted here:
// a timing target belongs to benchmarks. What is asserted: the fit reproduces the runs it was
// fitted to (it is their decomposition), and the scenario it writes simulates the predicted step.
TEST(SimCalibrate, WritesAScenarioTheSimulatorRunsWithTheMeasuredFigures) {
  stretch::test::TempDir dir("stretch-calibrate");
  const fs::path out = dir.path() / "this_machine.json";
  Launch calibrate(dir.path(), {"--calibrate", "--calibration-out", out.string(), "--json", "-q"},
                   "sim", "calibrate-");
  ASSERT_EQ(calibrate.wait(180s), 0) << calibrate.err();
  const auto result = nlohmann::json::parse(stretch::test::readFile(out));
  EXPECT_GT(result["job"]["seconds_per_sample_per_gpu"].get<double>(), 0.0);
  EXPECT_EQ(result["job"]["gradient_bytes"], 9610 * 4);  // the example's 64-128-10 MLP in fp32
  EXPECT_GE(result["job"]["compute_spread"].get<double>(), 0.0);
  EXPECT_GE(result["job"]["step_overhead_seconds"].get<double>(), 0.0);
  EXPECT_GT(result["cluster"]["intra_node_GBps"].get<double>(), 0.0);
  EXPECT_GE(result["cluster"]["op_latency_us"].get<double>(),
            result["calibration"]["bench_op_latency_us"].get<double>());
  const auto& c = result["calibration"];
  ASSERT_EQ(c["runs"].size(), 3u);
  for (const auto& run : c["runs"]) {
    std::printf(
        "calibration: %lld worker(s), accumulation %lld (%s): predicted %.3f ms, "
        "measured %.3f ms (error %+.1f %%)\n",
        run["workers"].get<long long>(), run["gradient_accumulation_steps"].get<long long>(),
        run["role"].get<std::string>().c_str(), run["predicted_step_seconds"].get<double>() * 1e3,
        run["measured_step_seconds"].get<double>() * 1e3,
        run["relative_error"].get<double>() * 100);
  }
  // The 2-worker fit run is decomposed exactly (its all-reduce is the rest of its median step),
  // unless the rest was negative and clamped.
  const auto& fit = c["runs"][1];
  EXPECT_EQ(fit["role"], "fit");
  if (fit["measured_all_reduce_seconds"].get<double>() > 0) {
    // (to the nanosecond roundings of the step model's terms)
    EXPECT_NEAR(fit["relative_error"].get<double>(), 0.0, 1e-4);
  }
  const auto& heldOut = c["runs"][2];
  EXPECT_EQ(heldOut["role"], "held out");
  EXPECT_EQ(heldOut["gradient_accumulation_steps"], 6);
  EXPECT_EQ(c["predicted_step_seconds"], heldOut["predicted_step_seconds"]);
  EXPECT_GT(c["predicted_step_seconds"].get<double>(), c["compute_seconds"].get<double>());
  EXPECT_NEAR(
      c["relative_error"].get<double>(),
      (c["predicted_step_seconds"].get<double>() - c["measured_step_seconds"].get<double>()) /
          c["measured_step_seconds"].get<double>(),
      1e-9);
  // The written scenario runs, and the simulated step time is the predicted one.
  Launch sim(dir.path(), {out.string(), "--json"}, "sim", "sim-");
  ASSERT_EQ(sim.wait(60s), 0) << sim.err();
  const auto summary = nlohmann::json::parse(sim.out());
  EXPECT_EQ(summary["steps"], 300);
  EXPECT_NEAR(summary["simulated_hours"].get<double>() * 3600.0,
              300 * c["predicted_step_seconds"].get<double>(),
              1e-6 + 1e-3 * 300 * c["predicted_step_seconds"].get<double>());
}

// Any engine program calibrates with --job and --config; without --config it is a usage error.
TEST(SimCalibrate, CalibratesTheJobItIsGiven) {
  stretch::test::TempDir dir("stretch-calibrate-job");
  const std::string digits = STRETCH_TRAIN_DIGITS;
  const std::string config = std::string(STRETCH_SOURCE) + "/fixtures/jobs/digits/ds_config.json";
  Launch calibrate(
      dir.path(),
      {"--calibrate", "--job", digits + " --steps 60", "--config", config, "--json", "-q"}, "sim",
      "calibrate-job-");
  ASSERT_EQ(calibrate.wait(180s), 0) << calibrate.err();
  const auto result = nlohmann::json::parse(calibrate.out());
  const auto& c = result["calibration"];
  EXPECT_EQ(c["job"][1], "--steps");
  ASSERT_EQ(c["runs"].size(), 3u);
  EXPECT_EQ(c["runs"][2]["gradient_accumulation_steps"].get<int>(),
            2 * c["runs"][1]["gradient_accumulation_steps"].get<int>());
  EXPECT_GT(c["runs"][2]["steps_used"].get<int>(), 40);
  EXPECT_EQ(result["job"]["gradient_bytes"], 9610 * 4);

  Launch missing(dir.path(), {"--calibrate", "--job", digits, "-q"}, "sim", "calibrate-missing-");
  EXPECT_EQ(missing.wait(60s), 2);
  EXPECT_NE(missing.err().find("--config"), std::string::npos) << missing.err();
}

}  // namespace
