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
//
// With the transformer job (GPT small) and a scenario calibrated on this machine, the two must
// also agree on the time to train, within 10 % (issue 18's whole-run prediction).

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
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
// both worlds must agree on. With live recovery, how each stop and start recovers too; a live
// start's resume step is left out (the real agent does not log it: the survivors decide it, and
// the live test compares it with their own log).
std::vector<nlohmann::json> decisions(const fs::path& log) {
  std::vector<nlohmann::json> out;
  for (const auto& e : eventsOf(log)) {
    const std::string kind = e["event"];
    if (kind != "start_workers" && kind != "stop_workers" && kind != "finish")
      continue;
    nlohmann::json d = {{"event", kind}, {"generation", e.value("generation", 0)}};
    if (e.contains("recovery"))
      d["recovery"] = e["recovery"];
    if (kind == "start_workers") {
      d["world_size"] = e["world_size"];
      d["batch"] = e["batch"];
      d["restart_count"] = e["restart_count"];
      const bool live = e.value("recovery", "") == "live";
      d["resume_step"] = e.contains("resume_step") && !live ? e["resume_step"] : nlohmann::json();
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

// The simulator's event log for `scenario`.
fs::path simulate(const fs::path& dir, const fs::path& scenario, const std::string& name) {
  const fs::path events = dir / (name + ".jsonl");
  Launch sim(dir, {scenario.string(), "--events", events.string()}, "sim", name + "-");
  EXPECT_EQ(sim.wait(60s), 0) << sim.err();
  return events;
}

// Runs `trainer` (a job taking --checkpoint-dir, --save-every 10, --resume) under `stretch
// launch` on two local nodes n0 and n1 of `slots` workers each (elastic 1:2, last call 1 s,
// monitor 0.1 s) with the fault script of fixtures/scenarios/sim_to_real_digits.json: rank 1
// killed after step 15, n1 leaves after step 25 and joins again after step 40. The workers pause
// at steps 25 and 40 only until the test has taken n1 away or brought it back. `env` is set for
// the launch (and so for its workers). `recovery`: the launch's --recovery (restart: every
// failure restarts from the checkpoint, as the scenario's default mode). Returns the event log.
fs::path runWithFaultScript(const fs::path& dir, int slots, const std::string& config,
                            std::vector<std::string> trainer,
                            const std::vector<std::pair<std::string, std::string>>& env = {},
                            const std::string& recovery = "restart") {
  const fs::path faults = dir / "faults";
  fs::create_directories(faults);
  std::vector<std::pair<std::string, std::string>> all = {
      {"STRETCH_FAULT_DIR", faults.string()},
      {"STRETCH_FAULT_KILL_AT_STEP", "15:1"},
      {"STRETCH_FAULT_PAUSE_AT_STEPS", "25,40"}};
  all.insert(all.end(), env.begin(), env.end());
  for (const auto& [k, v] : all)
    ::setenv(k.c_str(), v.c_str(), 1);
  const int port = freePort();
  const fs::path events = dir / "real.jsonl";
  std::vector<std::string> args = localNodesOptions(dir, 2, slots, port, config, 2, events);
  args.insert(args.end(), {"--recovery", recovery, "--checkpoint_dir", (dir / "ckpt").string()});
  for (auto& a :
       std::vector<std::string>{"--config", config, "--checkpoint-dir", (dir / "ckpt").string(),
                                "--save-every", "10", "--resume"})
    trainer.push_back(a);
  args.insert(args.end(), trainer.begin(), trainer.end());
  Launch launch(dir, args);
  for (const auto& [k, v] : all)
    ::unsetenv(k.c_str());

  // Step 25: node n1 leaves (its agent is stopped), then the workers may go on.
  EXPECT_TRUE(waitForFile(faults / "pause_25.reached")) << launch.err();
  std::ifstream pidFile(dir / "logs" / "agent_n1.pid");
  pid_t n1 = -1;
  pidFile >> n1;
  EXPECT_GT(n1, 0);
  if (n1 > 0)
    ::kill(n1, SIGTERM);
  EXPECT_TRUE(waitForStarts(events, 3)) << launch.err();
  std::ofstream(faults / "pause_25.release") << "\n";

  // Step 40: node n1 comes back, started by hand; the job grows again.
  EXPECT_TRUE(waitForFile(faults / "pause_40.reached")) << launch.err();
  Launch joiner(dir,
                {"--rdzv", "127.0.0.1:" + std::to_string(port + 1), "--node_id", "n1", "--nproc",
                 std::to_string(slots), "--token_file", (dir / "logs" / "job_token").string(),
                 "--log_dir", (dir / "logs").string()},
                "agent", "n1-again-");
  EXPECT_TRUE(waitForStarts(events, 4)) << launch.err() << joiner.err();
  std::ofstream(faults / "pause_40.release") << "\n";

  EXPECT_EQ(launch.wait(120s), 0) << launch.err();
  EXPECT_EQ(joiner.wait(30s), 0) << joiner.err();
  return events;
}

void printDecisions(const char* title, const std::vector<nlohmann::json>& ds) {
  std::printf("%s:\n", title);
  for (const auto& d : ds)
    std::printf("  %s\n", d.dump().c_str());
}

TEST(SimToReal, TheRealJobAndTheSimulatorTakeTheSameDecisions) {
  const fs::path scenario =
      fs::path(STRETCH_SOURCE) / "fixtures" / "scenarios" / "sim_to_real_digits.json";
  stretch::test::TempDir dir("stretch-sim-to-real");
  const auto simulated = decisions(simulate(dir.path(), scenario, "sim"));
  ASSERT_GE(simulated.size(), 8u);

  const std::string config =
      std::string(STRETCH_SOURCE) + "/fixtures/jobs/digits/ds_config_elastic.json";
  const fs::path events =
      runWithFaultScript(dir.path(), 2, config, {STRETCH_TRAIN_DIGITS, "--steps", "60", "--json"});
  ASSERT_FALSE(HasFailure());
  const auto real = decisions(events);
  printDecisions("simulated decisions", simulated);
  printDecisions("real decisions", real);
  EXPECT_EQ(real, simulated);
  const auto summary = jobSummary(dir.path());
  ASSERT_FALSE(summary.is_null());
  EXPECT_EQ(summary["steps"], 60);
}

// The same fault script across hosts with live recovery (the scenario's recovery mode live):
// the kill, the node's departure and its return each keep the running workers, in the real job
// and in the simulator alike; the job ends at step 60.
TEST(SimToReal, LiveRecoveryAcrossHostsTakesTheSameDecisions) {
  stretch::test::TempDir dir("stretch-sim-to-real-mn-live");
  auto scenario = nlohmann::json::parse(stretch::test::readFile(
      fs::path(STRETCH_SOURCE) / "fixtures" / "scenarios" / "sim_to_real_digits.json"));
  scenario["name"] = "sim_to_real_digits_multinode_live";
  scenario["job"]["config_file"] =
      std::string(STRETCH_SOURCE) + "/fixtures/jobs/digits/ds_config_elastic.json";
  scenario["job"]["recovery"] = {{"mode", "live"}, {"reconfigure_seconds", 0.1}};
  const fs::path scenarioFile = dir.path() / "live.json";
  std::ofstream(scenarioFile) << scenario.dump(2) << "\n";
  const auto simulated = decisions(simulate(dir.path(), scenarioFile, "sim"));
  ASSERT_GE(simulated.size(), 8u);

  const std::string config =
      std::string(STRETCH_SOURCE) + "/fixtures/jobs/digits/ds_config_elastic.json";
  const fs::path events = runWithFaultScript(
      dir.path(), 2, config, {STRETCH_TRAIN_DIGITS, "--steps", "60", "--json"}, {}, "auto");
  ASSERT_FALSE(HasFailure());
  const auto real = decisions(events);
  printDecisions("simulated decisions", simulated);
  printDecisions("real decisions", real);
  EXPECT_EQ(real, simulated);
  int live = 0;
  for (const auto& d : real)
    live += d["event"] == "start_workers" && d.value("recovery", "") == "live" ? 1 : 0;
  EXPECT_EQ(live, 3) << "the kill, the departure and the return each continue live";
  const auto summary = jobSummary(dir.path());
  ASSERT_FALSE(summary.is_null());
  EXPECT_EQ(summary["steps"], 60);
}

// Live recovery on one host (fixtures/scenarios/sim_to_real_digits_live.json): 4 workers of the
// elastic digits job under `stretch launch` (--recovery live), rank 1 killed after step 15 by the
// fault script. The real agent and the simulator take the same decisions and recover the same
// way (live: the other 3 workers keep training); the step the survivors continue from (rank 0's
// "continuing live at step N") is the simulator's resume step; the job ends at step 60.
TEST(SimToReal, LiveRecoveryTakesTheSameDecisions) {
  const fs::path scenario =
      fs::path(STRETCH_SOURCE) / "fixtures" / "scenarios" / "sim_to_real_digits_live.json";
  stretch::test::TempDir dir("stretch-sim-to-real-live");
  const fs::path simEvents = simulate(dir.path(), scenario, "sim");
  const auto simulated = decisions(simEvents);
  std::optional<std::int64_t> simResume;
  for (const auto& e : eventsOf(simEvents)) {
    if (e["event"] == "start_workers" && e.value("recovery", "") == "live")
      simResume = e["resume_step"].get<std::int64_t>();
  }
  ASSERT_TRUE(simResume.has_value()) << "the simulator did not recover live";

  const std::string config =
      std::string(STRETCH_SOURCE) + "/fixtures/jobs/digits/ds_config_elastic.json";
  const fs::path faults = dir.path() / "faults";
  fs::create_directories(faults);
  ::setenv("STRETCH_FAULT_DIR", faults.string().c_str(), 1);
  ::setenv("STRETCH_FAULT_KILL_AT_STEP", "15:1", 1);
  const fs::path events = dir.path() / "real.jsonl";
  const fs::path ckpt = dir.path() / "ckpt";
  Launch launch(dir.path(), {"--num_gpus",
                             "4",
                             "--master_port",
                             std::to_string(freePort()),
                             "--config",
                             config,
                             "--max_restarts",
                             "10",
                             "--monitor_interval",
                             "0.1",
                             "--log_dir",
                             (dir.path() / "logs").string(),
                             "--event_log",
                             events.string(),
                             "--checkpoint_dir",
                             ckpt.string(),
                             STRETCH_TRAIN_DIGITS,
                             "--config",
                             config,
                             "--steps",
                             "60",
                             "--json",
                             "--checkpoint-dir",
                             ckpt.string(),
                             "--save-every",
                             "10",
                             "--resume"});
  ::unsetenv("STRETCH_FAULT_DIR");
  ::unsetenv("STRETCH_FAULT_KILL_AT_STEP");
  ASSERT_EQ(launch.wait(120s), 0) << launch.err() << launch.out();

  const auto real = decisions(events);
  printDecisions("simulated decisions", simulated);
  printDecisions("real decisions", real);
  EXPECT_EQ(real, simulated);
  const std::string rank0 =
      stretch::test::readFileIfAny(dir.path() / "logs" / "attempt_1" / "rank_0.log");
  const std::string marker = "continuing live at step ";
  const auto at = rank0.find(marker);
  ASSERT_NE(at, std::string::npos) << "rank 0 did not continue live:\n" << rank0;
  EXPECT_EQ(std::stoll(rank0.substr(at + marker.size())), *simResume);
  const auto summary = jobSummary(dir.path());
  ASSERT_FALSE(summary.is_null());
  EXPECT_EQ(summary["steps"], 60);
}

#ifdef STRETCH_TRAIN_GPT
// The time of each decision since the first start_workers (seconds), and of the end of training:
// the simulator's finish, or the real run's last optimizer step (its workers' timings; the
// processes' exit after it is not training).
std::vector<double> decisionTimes(const fs::path& events) {
  std::vector<double> out;
  std::int64_t first = -1;
  for (const auto& e : eventsOf(events)) {
    const std::string kind = e["event"];
    if (kind != "start_workers" && kind != "stop_workers" && kind != "finish")
      continue;
    const auto t = e["time_ns"].get<std::int64_t>();
    if (first < 0)
      first = t;
    out.push_back(static_cast<double>(t - first) * 1e-9);
  }
  return out;
}

std::int64_t firstStartNs(const fs::path& events) {
  for (const auto& e : eventsOf(events)) {
    if (e["event"] == "start_workers")
      return e["time_ns"].get<std::int64_t>();
  }
  return 0;
}

std::int64_t lastStepEndNs(const fs::path& timings, std::int64_t step) {
  std::int64_t last = 0;
  std::ifstream in(timings);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (!j.contains("event") && j["step"] == step)
      last = std::max(last, j["unix_ns"].get<std::int64_t>());
  }
  return last;
}

// What a real run measured (seconds): the median step period by world size (each generation's
// first step left out: its period includes the engine's set-up), the median start-up of its
// generations (first step's end - start_workers - the median step - the load), and the median
// save and load (the slowest rank's).
struct RealMeasurements {
  std::map<std::int64_t, double> step;  // world size -> median period
  double startup = 0, save = 0, load = 0;
};

double medianOf(std::vector<double> v) {
  if (v.empty())
    return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

RealMeasurements measure(const fs::path& events, const fs::path& timings) {
  struct Generation {
    std::int64_t start = 0, world = 0, firstEnd = 0;
    double load = 0;
  };
  std::vector<Generation> gens;
  for (const auto& e : eventsOf(events))
    if (e["event"] == "start_workers")
      gens.push_back({e["time_ns"].get<std::int64_t>(), e["world_size"].get<std::int64_t>()});
  auto generationAt = [&](std::int64_t t) -> Generation* {
    Generation* g = nullptr;
    for (auto& candidate : gens)
      if (candidate.start <= t)
        g = &candidate;
    return g;
  };
  std::map<std::int64_t, std::vector<double>> periods;
  std::map<std::int64_t, double> saves;
  std::ifstream in(timings);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    Generation* g = generationAt(j["unix_ns"].get<std::int64_t>());
    if (g == nullptr)
      continue;
    if (j.contains("event")) {
      const double seconds = j["seconds"].get<double>();
      if (j["event"] == "load")
        g->load = std::max(g->load, seconds);
      else
        saves[j["step"].get<std::int64_t>()] =
            std::max(saves[j["step"].get<std::int64_t>()], seconds);
      continue;
    }
    if (j["rank"] != 0)
      continue;
    if (g->firstEnd == 0)
      g->firstEnd = j["unix_ns"].get<std::int64_t>();
    else
      periods[g->world].push_back(j["period_ms"].get<double>() * 1e-3);
  }
  RealMeasurements m;
  for (const auto& [world, p] : periods)
    m.step[world] = medianOf(p);
  std::vector<double> startups, loads, saveSeconds;
  for (const auto& g : gens) {
    if (g.firstEnd == 0 || m.step.count(g.world) == 0)
      continue;
    startups.push_back(static_cast<double>(g.firstEnd - g.start) * 1e-9 - m.step[g.world] - g.load);
    if (g.load > 0)
      loads.push_back(g.load);
  }
  for (const auto& [step, seconds] : saves)
    saveSeconds.push_back(seconds);
  m.startup = std::max(0.0, medianOf(startups));
  m.load = medianOf(loads);
  m.save = medianOf(saveSeconds);
  return m;
}

// The whole-run prediction: the transformer job (GPT small) under `stretch launch` with the fault
// script (a kill, a node leave, a node join) and the simulator on a scenario made from `stretch
// sim --calibrate` of the same job a minute earlier (step model, restart, checkpoint save and
// load costs) take the same decisions; the test prints both times to train. Two nodes of one
// worker each: 2 workers per node on this 2-core machine would share cores, which the
// simulator's independent GPUs do not model.
//
// What is asserted about time: the simulator, given the step and start-up times this run itself
// measured (its timings file), reproduces the run's time to train within 10 %: the rollbacks,
// resume steps, checkpoint stalls, detection and last-call waits are the simulator's. The
// prediction from the calibration alone is printed, not asserted: this machine's speed changes
// by up to 1.7x within a minute (its two cores run at different, changing speeds), which no
// calibration can foresee; docs/simulator.md has its measured errors.
TEST(SimToReal, TheTransformerJobTrainsAsLongAsTheSimulatorPredicts) {
  const std::string gpt = STRETCH_TRAIN_GPT;
  const std::string source = STRETCH_SOURCE;
  const std::vector<std::string> quiet = {"--log-every",    "0", "--eval-every",   "0",
                                          "--eval-windows", "1", "--sample-chars", "0"};
  constexpr int kSteps = 60;
  {
    stretch::test::TempDir dir("stretch-sim-to-real-gpt");
    // 1. calibrate on this machine
    const fs::path calibration = dir.path() / "calibration.json";
    std::string job = gpt + " --steps 40";
    for (const auto& q : quiet)
      job += " " + q;
    Launch calibrate(
        dir.path(),
        {"--calibrate", "--job", job, "--config", source + "/fixtures/jobs/gpt/ds_config.json",
         "--checkpoint-args", "--checkpoint-dir {dir} --save-every 10", "--repeat", "3",
         "--calibration-out", calibration.string(), "-q"},
        "sim", "calibrate-");
    ASSERT_EQ(calibrate.wait(240s), 0) << calibrate.err();
    const auto cal = nlohmann::json::parse(stretch::test::readFile(calibration));

    // 2. the scenario: the calibrated figures, two nodes of one worker, the fault script
    nlohmann::json scenario = nlohmann::json::parse(stretch::test::readFile(
        fs::path(source) / "fixtures" / "scenarios" / "sim_to_real_digits.json"));
    scenario["name"] = "sim_to_real_gpt";
    scenario["description"] =
        "GPT small (fixtures/jobs/gpt/ds_config_elastic.json) on 2 nodes of 1 worker, "
        "calibrated by stretch sim --calibrate, with the sim_to_real fault script";
    scenario["cluster"] = cal["cluster"];
    scenario["cluster"]["nodes"] = 2;
    scenario["cluster"]["gpus_per_node"] = 1;
    nlohmann::json jobSpec = cal["job"];
    jobSpec.erase("config");
    jobSpec["config_file"] = source + "/fixtures/jobs/gpt/ds_config_elastic.json";
    jobSpec["total_steps"] = kSteps;
    jobSpec["checkpoint"]["every_steps"] = 10;
    jobSpec.erase("recovery");  // two node agents: the launcher restarts (live is one host's)
    scenario["job"] = jobSpec;
    scenario["failures"] = cal["failures"];
    scenario["script"][2]["slots"] = 1;  // n1 comes back as it was: one worker
    const fs::path scenarioFile = dir.path() / "sim_to_real_gpt.json";
    std::ofstream(scenarioFile) << scenario.dump(2) << "\n";
    const fs::path simEvents = simulate(dir.path(), scenarioFile, "sim");
    const auto simulated = decisions(simEvents);
    ASSERT_GE(simulated.size(), 8u);

    // 3. the real run
    const fs::path timings = dir.path() / "timings.jsonl";
    std::vector<std::string> trainer = {gpt, "--steps", std::to_string(kSteps), "--json"};
    trainer.insert(trainer.end(), quiet.begin(), quiet.end());
    const fs::path realEvents = runWithFaultScript(
        dir.path(), 1, source + "/fixtures/jobs/gpt/ds_config_elastic.json", trainer,
        {{"STRETCH_TIMINGS_FILE", timings.string()}, {"OMP_NUM_THREADS", "1"}});
    ASSERT_FALSE(HasFailure());
    const auto real = decisions(realEvents);
    printDecisions("simulated decisions", simulated);
    printDecisions("real decisions", real);
    ASSERT_EQ(real, simulated);

    // 4. the times
    const auto simTimes = decisionTimes(simEvents);
    auto realTimes = decisionTimes(realEvents);
    const double realSeconds =
        static_cast<double>(lastStepEndNs(timings, kSteps) - firstStartNs(realEvents)) * 1e-9;
    realTimes.back() = realSeconds;
    std::printf("calibrated: step %.1f ms (2 workers), restart %.3f s, save %.3f s, load %.3f s\n",
                cal["calibration"]["runs"][1]["measured_step_seconds"].get<double>() * 1e3,
                cal["job"]["restart_overhead_seconds"].get<double>(),
                cal["job"]["checkpoint"]["save_seconds"].get<double>(),
                cal["job"]["checkpoint"]["load_seconds"].get<double>());

    // What the real run itself measured, per generation: its steps' median period by world
    // size, its start-up (first step's end - start_workers - the median step - the load), and
    // its saves and loads.
    const RealMeasurements m = measure(realEvents, timings);
    const double overhead = cal["job"]["step_overhead_seconds"].get<double>();
    ASSERT_TRUE(m.step.count(1) && m.step.count(2));
    nlohmann::json replay = scenario;
    // World 1 runs micro 8 x accumulation 2, world 2 micro 8 x 1 (the elastic config's plan).
    const double perSample = std::max(0.0, (m.step.at(1) - overhead) / 16.0);
    const double e2 = 0.5641895835477563;  // E[max of 2 standard normals]
    const double calPerSample = cal["job"]["seconds_per_sample_per_gpu"].get<double>();
    const double calAllReduce =
        cal["calibration"]["runs"][1]["predicted_step_seconds"].get<double>() -
        calPerSample * 8 * (1 + cal["job"]["compute_spread"].get<double>() * e2) - overhead;
    const double allReduce = m.step.at(2) - perSample * 8 - overhead;
    replay["job"]["seconds_per_sample_per_gpu"] = perSample;
    replay["job"]["compute_spread"] = 0.0;
    replay["cluster"]["op_latency_us"] = std::max(
        0.0, cal["cluster"]["op_latency_us"].get<double>() + (allReduce - calAllReduce) * 1e6);
    replay["job"]["restart_overhead_seconds"] = m.startup;
    replay["job"]["checkpoint"]["save_seconds"] = m.save;
    replay["job"]["checkpoint"]["load_seconds"] = m.load;
    const fs::path replayFile = dir.path() / "sim_to_real_gpt_replay.json";
    std::ofstream(replayFile) << replay.dump(2) << "\n";
    const auto replayTimes = decisionTimes(simulate(dir.path(), replayFile, "replay"));
    std::printf(
        "measured in the real run: step %.1f ms (world 1), %.1f ms (world 2), start-up %.3f s, "
        "save %.3f s, load %.3f s\n",
        m.step.at(1) * 1e3, m.step.at(2) * 1e3, m.startup, m.save, m.load);

    std::printf("%-14s %10s %10s %10s\n", "decision", "predicted", "replayed", "real");
    for (std::size_t i = 0; i < simTimes.size() && i < realTimes.size(); ++i)
      std::printf("%-14s %9.3fs %9.3fs %9.3fs\n", simulated[i]["event"].get<std::string>().c_str(),
                  simTimes[i], i < replayTimes.size() ? replayTimes[i] : 0.0, realTimes[i]);
    const double predictedError = (simTimes.back() - realSeconds) / realSeconds;
    const double replayError = (replayTimes.back() - realSeconds) / realSeconds;
    std::printf(
        "time to train %d steps from the first start: real %.3f s; predicted from the "
        "calibration %.3f s (%+.1f %%); replayed with the run's own step and start-up times "
        "%.3f s (%+.1f %%)\n",
        kSteps, realSeconds, simTimes.back(), 100 * predictedError, replayTimes.back(),
        100 * replayError);
    EXPECT_LE(std::abs(replayError), 0.10);
  }
}
#endif

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
  // unless a term was clamped: the rest was negative, or smaller than the benchmark's
  // all-reduce, so that nothing was added to the per-collective latency (on a fast BLAS, a
  // clean clone's run on the 2-core VM predicted +2.0 %).
  const auto& fit = c["runs"][1];
  EXPECT_EQ(fit["role"], "fit");
  const bool residualAdded = result["cluster"]["op_latency_us"].get<double>() >
                             result["calibration"]["bench_op_latency_us"].get<double>();
  if (fit["measured_all_reduce_seconds"].get<double>() > 0 && residualAdded) {
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
  // The example saves every 50 steps: the restart, save and load costs are measured.
  EXPECT_TRUE(c["costs_measured"].get<bool>());
  const double restart = result["job"]["restart_overhead_seconds"].get<double>();
  EXPECT_GT(restart, 0.0);
  EXPECT_GT(result["job"]["checkpoint"]["save_seconds"].get<double>(), 0.0);
  EXPECT_GT(result["job"]["checkpoint"]["load_seconds"].get<double>(), 0.0);
  // The written scenario runs: one start, then the steps at the predicted step time.
  Launch sim(dir.path(), {out.string(), "--json"}, "sim", "sim-");
  ASSERT_EQ(sim.wait(60s), 0) << sim.err();
  const auto summary = nlohmann::json::parse(sim.out());
  EXPECT_EQ(summary["steps"], 300);
  EXPECT_NEAR(summary["simulated_hours"].get<double>() * 3600.0,
              restart + 300 * c["predicted_step_seconds"].get<double>(),
              1e-6 + 1e-3 * 300 * c["predicted_step_seconds"].get<double>());

  // Live recovery: 3 kills of rank 1 after step 150 on one host; the reconfiguration is the
  // median kill-to-next-step less the lone worker's step, and the scenario recovers live.
  const auto& live = c["live_recovery"];
  ASSERT_TRUE(live["measured"].get<bool>()) << live.dump();
  EXPECT_EQ(live["kill_step"], 150);
  std::vector<double> kills = live["kill_to_next_step_seconds"].get<std::vector<double>>();
  ASSERT_EQ(kills.size(), 3u);
  for (const double k : kills)
    EXPECT_GT(k, 0.0);
  std::sort(kills.begin(), kills.end());
  const double reconfigure = live["reconfigure_seconds"].get<double>();
  EXPECT_NEAR(reconfigure, std::max(0.0, kills[1] - c["single_worker_step_seconds"].get<double>()),
              1e-9);
  std::printf(
      "calibration: live recovery, kill to next step %.3f / %.3f / %.3f s, "
      "reconfigure %.3f s\n",
      kills[0], kills[1], kills[2], reconfigure);
  EXPECT_EQ(result["job"]["recovery"]["mode"], "live");
  EXPECT_EQ(result["job"]["recovery"]["reconfigure_seconds"].get<double>(), reconfigure);
  // ... which the simulator charges a kill as the measured runs went: the first start, then the
  // reconfiguration into the interim world of the lone survivor (the config fixes no
  // train_batch_size, so every size is valid, as in the runs), which trains while the restarted
  // worker starts. The last 150 steps take the survivor less than that start (restart_overhead
  // seconds), so the world of 2 never forms again and no state is sent.
  nlohmann::json killed = result;
  killed.erase("calibration");
  EXPECT_FALSE(killed["job"]["config"].contains("train_batch_size"));
  killed["script"] = {{{"at_step", 150}, {"kind", "kill_worker"}, {"rank", 1}}};
  const fs::path killedFile = dir.path() / "killed.json";
  std::ofstream(killedFile) << killed.dump(2) << "\n";
  const fs::path killedEvents = dir.path() / "killed.events";
  Launch simKilled(dir.path(), {killedFile.string(), "--json", "--events", killedEvents.string()},
                   "sim", "sim-killed-");
  ASSERT_EQ(simKilled.wait(60s), 0) << simKilled.err();
  const auto k = nlohmann::json::parse(simKilled.out());
  EXPECT_EQ(k["live_recoveries"], 1);
  EXPECT_EQ(k["steps"], 300);
  ASSERT_LT(150 * 2 * c["single_worker_step_seconds"].get<double>(), restart);
  EXPECT_NEAR(k["startup_hours"].get<double>() * 3600.0, restart + reconfigure, 1e-6);
  int interim = 0;
  for (const auto& e : eventsOf(killedEvents)) {
    if (e["event"] == "live_plan") {
      EXPECT_EQ(e["world_size"], 1) << e.dump();
      ++interim;
    }
  }
  EXPECT_EQ(interim, 1);
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
