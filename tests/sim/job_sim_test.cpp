// The job simulation on the real agent state machine: exact times without failures, aggregate
// and step-level modes agree to the nanosecond, determinism, elastic scaling keeps the global
// batch, the fault script's decisions, replacement policies, restart budget, wait timeout,
// and the timeline writers.

#include "sim/job_sim.hpp"

#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/agent/event_log.hpp"
#include "runtime/common/error.hpp"
#include "sim/step_model.hpp"
#include "sim/timeline.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::sim {
namespace {

using ::testing::HasSubstr;

Scenario fromJson(const nlohmann::json& j) {
  ScenarioOptions o;
  o.presetDir = test::fixturePath("clusters");
  Scenario s = parseScenario(j, test::fixturePath("scenarios"), o);
  EXPECT_TRUE(s.warnings.empty()) << ::testing::PrintToString(s.warnings);
  return s;
}

Scenario fixture(const std::string& name) {
  return loadScenario(test::fixturePath("scenarios/" + name + ".json"));
}

nlohmann::json cluster(int nodes, int gpus) {
  return {{"nodes", nodes},        {"gpus_per_node", gpus}, {"intra_node_GBps", 100},
          {"inter_node_GBps", 10}, {"intra_latency_us", 1}, {"inter_latency_us", 5}};
}

// The agent's records of a run, parsed from its JSON lines.
std::vector<nlohmann::json> eventsOf(const Scenario& s, RunResult* result = nullptr,
                                     SimMode mode = SimMode::Aggregate) {
  std::ostringstream out;
  agent::EventLog log(out);
  RunOptions o;
  o.eventLog = &log;
  o.mode = mode;
  RunResult r = simulate(s, o);
  if (result != nullptr) {
    *result = r;
  }
  std::vector<nlohmann::json> records;
  std::istringstream in(out.str());
  std::string line;
  while (std::getline(in, line)) {
    records.push_back(nlohmann::json::parse(line));
  }
  return records;
}

std::vector<nlohmann::json> recordsOf(const std::vector<nlohmann::json>& events,
                                      const std::string& kind) {
  std::vector<nlohmann::json> out;
  for (const auto& e : events) {
    if (e["event"] == kind) {
      out.push_back(e);
    }
  }
  return out;
}

std::vector<nlohmann::json> starts(const std::vector<nlohmann::json>& events) {
  return recordsOf(events, "start_workers");
}

void expectSameRun(const RunResult& a, const RunResult& b) {
  EXPECT_EQ(toString(a.outcome), toString(b.outcome));
  EXPECT_EQ(a.simulatedNs, b.simulatedNs);
  EXPECT_EQ(a.usefulNs, b.usefulNs);
  EXPECT_EQ(a.lostNs, b.lostNs);
  EXPECT_EQ(a.checkpointNs, b.checkpointNs);
  EXPECT_EQ(a.startupNs, b.startupNs);
  EXPECT_EQ(a.idleNs, b.idleNs);
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_EQ(a.samples, b.samples);
  EXPECT_EQ(a.failures, b.failures);
  EXPECT_EQ(a.preemptions, b.preemptions);
  EXPECT_EQ(a.restarts, b.restarts);
  EXPECT_EQ(a.checkpoints, b.checkpoints);
  EXPECT_EQ(a.generations, b.generations);
  EXPECT_EQ(a.liveRecoveries, b.liveRecoveries);
  EXPECT_EQ(a.checkpointFallbacks, b.checkpointFallbacks);
  EXPECT_EQ(a.worldSizeNs, b.worldSizeNs);
}

// Runs `s` in both modes, which must give the same results and event log after more than 3
// failures; returns the aggregate run's result.
RunResult expectModesAgree(const Scenario& s) {
  RunResult a;
  RunResult b;
  const auto ea = eventsOf(s, &a, SimMode::Aggregate);
  const auto eb = eventsOf(s, &b, SimMode::StepLevel);
  EXPECT_GT(a.failures, 3);
  expectSameRun(a, b);
  EXPECT_EQ(ea, eb);
  return a;
}

nlohmann::json simpleJob() {
  return nlohmann::json::parse(R"({
    "cluster": {"nodes": 1, "gpus_per_node": 4, "intra_node_GBps": 100, "inter_node_GBps": 10,
                "intra_latency_us": 1, "inter_latency_us": 5},
    "job": {"config": {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 3},
            "seconds_per_sample_per_gpu": 0.5, "total_steps": 100,
            "checkpoint": {"every_steps": 10, "save_seconds": 2, "load_seconds": 1},
            "restart_overhead_seconds": 5}
  })");
}

TEST(JobSim, WithoutFailuresEveryTimeIsExact) {
  const Scenario s = fromJson(simpleJob());
  RunResult r;
  const auto events = eventsOf(s, &r);
  // Start 5 s, 100 steps of 3 micro steps of 1 s, saves after steps 10..90 (none after the last).
  EXPECT_EQ(toString(r.outcome), "finished");
  EXPECT_EQ(r.simulatedNs, secondsToNanos(5 + 100 * 3 + 9 * 2));
  EXPECT_EQ(r.usefulNs, secondsToNanos(300));
  EXPECT_EQ(r.checkpointNs, secondsToNanos(18));
  EXPECT_EQ(r.startupNs, secondsToNanos(5));
  EXPECT_EQ(r.lostNs, 0);
  EXPECT_EQ(r.idleNs, 0);
  EXPECT_EQ(r.checkpoints, 9);
  EXPECT_EQ(r.steps, 100);
  EXPECT_EQ(r.samples, 100 * 2 * 3 * 4);
  EXPECT_EQ(r.restarts, 0);
  EXPECT_DOUBLE_EQ(r.ettr(), 300.0 / 323.0);
  EXPECT_EQ(r.worldSizeNs.at(4), r.simulatedNs);
  std::vector<std::string> kinds;
  for (const auto& e : events) {
    kinds.push_back(e["event"]);
  }
  EXPECT_EQ(kinds,
            (std::vector<std::string>{"node_joined", "start_workers", "exit_barrier", "finish"}));
  EXPECT_EQ(events.back()["time_ns"], r.simulatedNs);
  EXPECT_FALSE(events[1].contains("resume_step"));  // nothing saved yet
}

TEST(JobSim, TotalSamplesEndTheJobAtTheFirstStepThatReachesThem) {
  auto j = simpleJob();
  j["job"].erase("total_steps");
  j["job"]["total_samples"] = 1000;  // 24 samples per step: 42 steps
  RunResult r;
  eventsOf(fromJson(j), &r);
  EXPECT_EQ(r.steps, 42);
  EXPECT_EQ(r.samples, 42 * 24);
}

TEST(JobSim, StepTimeFollowsTheBucketedAllReduce) {
  auto j = simpleJob();
  j["cluster"] = cluster(2, 4);
  j["job"]["gradient_bytes"] = 4e8;
  j["job"]["bucket_count"] = 4;
  const Scenario s = fromJson(j);
  config::BatchTriple batch{48, 2, 3};
  const StepPlan noOverlap = planStep(s.job, s.cluster, batch, 8, 1);
  EXPECT_EQ(noOverlap.buckets, 4);
  EXPECT_GT(noOverlap.bucketNs, 0);
  EXPECT_EQ(noOverlap.stepNs, 3 * noOverlap.microNs + 4 * noOverlap.bucketNs);
  Scenario o = s;
  o.job.overlapComm = true;
  const StepPlan overlap = planStep(o.job, o.cluster, batch, 8, 1);
  EXPECT_LT(overlap.stepNs, noOverlap.stepNs);
  EXPECT_GE(overlap.stepNs, 3 * overlap.microNs + overlap.bucketNs);
  // One rank: nothing to reduce.
  EXPECT_EQ(planStep(s.job, s.cluster, batch, 1, 1).stepNs, 3 * noOverlap.microNs);
}

TEST(JobSim, StragglersAndOverheadAddToTheStep) {
  // Expected maxima of n standard normals (tables of order statistics).
  EXPECT_EQ(expectedMaxOfNormals(1), 0.0);
  EXPECT_NEAR(expectedMaxOfNormals(2), 1.0 / std::sqrt(M_PI), 1e-6);
  EXPECT_NEAR(expectedMaxOfNormals(3), 0.846284, 1e-5);
  EXPECT_NEAR(expectedMaxOfNormals(10), 1.538753, 1e-5);
  EXPECT_NEAR(expectedMaxOfNormals(100), 2.507594, 1e-4);
  auto j = simpleJob();
  j["cluster"] = cluster(2, 4);
  j["job"]["gradient_bytes"] = 4e8;
  j["job"]["bucket_count"] = 4;
  const Scenario s = fromJson(j);
  const config::BatchTriple batch{48, 2, 3};
  const StepPlan plain = planStep(s.job, s.cluster, batch, 8, 1);
  Scenario t = s;
  t.job.computeSpread = 0.25;
  t.job.stepOverheadSeconds = 0.5;
  const StepPlan slow = planStep(t.job, t.cluster, batch, 8, 1);
  const double compute = 3 * nanosToSeconds(plain.microNs);
  EXPECT_EQ(slow.stragglerNs, secondsToNanos(0.25 * compute * expectedMaxOfNormals(8)));
  EXPECT_EQ(slow.overheadNs, secondsToNanos(0.5));
  EXPECT_EQ(slow.stepNs, plain.stepNs + slow.stragglerNs + slow.overheadNs);
  EXPECT_EQ(slow.exposedCommNs, plain.exposedCommNs);
  // One rank waits for nobody; the overhead stays.
  const StepPlan alone = planStep(t.job, t.cluster, batch, 1, 1);
  EXPECT_EQ(alone.stragglerNs, 0);
  EXPECT_EQ(alone.stepNs, 3 * plain.microNs + secondsToNanos(0.5));
  // A negative spread is an error naming the key.
  j["job"]["compute_spread"] = -0.1;
  EXPECT_THROW(fromJson(j), ConfigError);
}

TEST(JobSim, AggregateAndStepLevelAgreeToTheNanosecond) {
  for (const std::string name : {"trace_replay", "elastic_scale", "sim_to_real_digits"}) {
    SCOPED_TRACE(name);
    Scenario s = fixture(name);
    if (name != "sim_to_real_digits") {
      s.job.horizonHours = 6.0;  // keep the step-level run short
    }
    RunResult a;
    RunResult b;
    const auto ea = eventsOf(s, &a, SimMode::Aggregate);
    const auto eb = eventsOf(s, &b, SimMode::StepLevel);
    expectSameRun(a, b);
    EXPECT_EQ(ea, eb);
    EXPECT_GT(b.events, a.events);
  }
  // With random failures striking mid-step, mid-save and mid-start.
  auto j = simpleJob();
  j["cluster"] = cluster(4, 4);
  j["job"]["gradient_bytes"] = 4e8;
  j["job"]["overlap_comm"] = true;
  j["job"]["compute_spread"] = 0.2;
  j["job"]["step_overhead_seconds"] = 0.01;
  j["job"].erase("total_steps");
  j["job"]["horizon_hours"] = 20;
  j["job"]["checkpoint"] = {{"interval_minutes", 10}, {"save_seconds", 20}, {"load_seconds", 30}};
  j["failures"] = {{"model", "exponential"}, {"node_mtbf_hours", 8}};
  expectModesAgree(fromJson(j));
}

TEST(JobSim, SameSeedSameRunOtherReplicaOtherRun) {
  Scenario s = fixture("spot_preemptions");
  RunOptions first;
  const RunResult a = simulate(s, first);
  const RunResult b = simulate(s, first);
  expectSameRun(a, b);
  RunOptions other;
  other.replica = 1;
  const RunResult c = simulate(s, other);
  EXPECT_NE(
      a.simulatedNs == c.simulatedNs && a.usefulNs == c.usefulNs && a.preemptions == c.preemptions,
      true);
}

TEST(JobSim, ElasticScaleDownAndUpKeepsTheGlobalBatch) {
  const Scenario s = fixture("elastic_scale");
  RunResult r;
  const auto st = starts(eventsOf(s, &r));
  ASSERT_EQ(st.size(), 4u);
  std::vector<int> worlds;
  for (const auto& e : st) {
    worlds.push_back(e["world_size"]);
    const auto& b = e["batch"];
    EXPECT_EQ(b["train_batch_size"], st.front()["batch"]["train_batch_size"]);
    EXPECT_EQ(b["train_batch_size"].get<int>(), b["train_micro_batch_size_per_gpu"].get<int>() *
                                                    b["gradient_accumulation_steps"].get<int>() *
                                                    e["world_size"].get<int>());
  }
  EXPECT_EQ(worlds, (std::vector<int>{16, 12, 8, 16}));
  // The two departures are counted restarts; the scale up is not.
  EXPECT_EQ(r.restarts, 2);
  EXPECT_EQ(r.stops, 3);
  // Resume steps: the latest checkpoint before each stop.
  EXPECT_EQ(st[1]["resume_step"], st[2]["resume_step"]);
  EXPECT_GT(st[3]["resume_step"].get<int>(), st[2]["resume_step"].get<int>());
  EXPECT_GT(r.worldSizeNs.at(8), hoursToNanos(2.9));
}

TEST(JobSim, FaultScriptGivesTheExpectedDecisions) {
  RunResult r;
  const auto events = eventsOf(fixture("sim_to_real_digits"), &r);
  EXPECT_EQ(toString(r.outcome), "finished");
  EXPECT_EQ(r.scriptFired, 3);
  struct Start {
    int world, micro, gas;
    std::optional<int> resume;
  };
  std::vector<Start> got;
  std::vector<std::string> kinds;
  for (const auto& e : events) {
    if (e["event"] != "wait") {
      kinds.push_back(e["event"]);
    }
    if (e["event"] == "start_workers") {
      got.push_back({e["world_size"], e["batch"]["train_micro_batch_size_per_gpu"],
                     e["batch"]["gradient_accumulation_steps"],
                     e.contains("resume_step") ? std::optional<int>(e["resume_step"].get<int>())
                                               : std::nullopt});
    }
  }
  EXPECT_EQ(kinds, (std::vector<std::string>{"node_joined", "node_joined", "start_workers",
                                             "stop_workers", "start_workers", "stop_workers",
                                             "start_workers", "node_joined", "stop_workers",
                                             "start_workers", "exit_barrier", "finish"}));
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].world, 4);
  EXPECT_FALSE(got[0].resume.has_value());
  EXPECT_EQ(got[1].world, 4);
  EXPECT_EQ(got[1].resume, 10);  // killed after step 15: back to step 10
  EXPECT_EQ(got[2].world, 2);    // n1 left after step 25
  EXPECT_EQ(got[2].micro, 8);
  EXPECT_EQ(got[2].gas, 3);
  EXPECT_EQ(got[2].resume, 20);
  EXPECT_EQ(got[3].world, 4);  // n1 back after step 40 (saved first)
  EXPECT_EQ(got[3].resume, 40);
  EXPECT_EQ(got[3].micro, 4);
  EXPECT_EQ(r.steps, 60);
  EXPECT_EQ(r.checkpoints, 5);  // 10; 20 (after the kill); 30, 40 (on 2 GPUs); 50
}

TEST(JobSim, ScriptedKillOfARankThatDoesNotRunIsANote) {
  auto j = simpleJob();
  j["script"] = {{{"at_step", 5}, {"kind", "kill_worker"}, {"rank", 17}}};
  RunResult r;
  eventsOf(fromJson(j), &r);
  EXPECT_EQ(r.restarts, 0);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_THAT(r.notes[0], HasSubstr("rank 17 does not run at step 5"));
}

TEST(JobSim, ReplacementPolicies) {
  auto base = simpleJob();
  base["cluster"] = cluster(4, 8);
  base["job"].erase("total_steps");
  base["job"]["horizon_hours"] = 200;
  base["job"]["checkpoint"] = {{"interval_minutes", 30}, {"save_seconds", 10}};
  base["failures"] = {{"model", "exponential"}, {"node_mtbf_hours", 100}};

  // Immediate: the world never changes; every failure is a counted restart.
  RunResult imm;
  eventsOf(fromJson(base), &imm);
  EXPECT_GT(imm.failures, 0);
  EXPECT_EQ(imm.restarts, imm.failures);
  EXPECT_EQ(imm.worldSizeNs.size(), 1u);

  // One spare, never repaired: the first failure keeps 32 GPUs, later ones shrink the world.
  auto spares = base;
  spares["failures"]["replacement"] = "spares:1";
  RunResult sp;
  const auto st = starts(eventsOf(fromJson(spares), &sp));
  ASSERT_GE(sp.failures, 2);
  ASSERT_GE(st.size(), 3u);
  EXPECT_EQ(st[0]["world_size"], 32);
  EXPECT_EQ(st[1]["world_size"], 32);
  EXPECT_EQ(st[2]["world_size"], 24);
  EXPECT_THAT(st[1]["nodes"].dump(), HasSubstr("n4"));  // the spare

  // No replacement, repaired after 10 h: the node comes back and the world grows again.
  auto none = base;
  none["failures"]["replacement"] = "none";
  none["failures"]["repair_hours"] = 10;
  RunResult nr;
  const auto ns = starts(eventsOf(fromJson(none), &nr));
  EXPECT_GT(nr.stops, nr.restarts);  // scale ups after repairs are not counted restarts
  EXPECT_TRUE(nr.worldSizeNs.contains(24));
  EXPECT_EQ(ns.back()["batch"]["train_micro_batch_size_per_gpu"], 2);
}

TEST(JobSim, SoftwareCausesKeepTheNode) {
  auto j = simpleJob();
  j["cluster"] = cluster(4, 8);
  j["job"].erase("total_steps");
  j["job"]["horizon_hours"] = 300;
  j["failures"] = {{"model", "exponential"},
                   {"node_mtbf_hours", 100},
                   {"replacement", "none"},
                   {"causes", {{{"name", "bug"}, {"weight", 1}, {"node_lost", false}}}}};
  RunResult r;
  eventsOf(fromJson(j), &r);
  EXPECT_GT(r.failures, 3);
  EXPECT_EQ(r.restarts, r.failures);
  EXPECT_EQ(r.worldSizeNs.size(), 1u);  // never shrank
}

TEST(JobSim, FixedBatchShrinksToTheLargestValidSize) {
  auto j = simpleJob();
  j["cluster"] = cluster(4, 2);
  j["job"]["config"] = {{"train_batch_size", 32}, {"train_micro_batch_size_per_gpu", 4}};
  j["job"].erase("total_steps");
  j["job"]["horizon_hours"] = 1;
  j["failures"] = {{"model", "trace"},
                   {"replacement", "none"},
                   {"events", {{{"at_hours", 0.5}, {"node", "n3"}}}}};
  const auto st = starts(eventsOf(fromJson(j)));
  ASSERT_EQ(st.size(), 2u);
  EXPECT_EQ(st[0]["world_size"], 8);
  EXPECT_EQ(st[1]["world_size"], 4);  // 6 GPUs: 32 / 4 does not split over 6 ranks
  EXPECT_EQ(st[1]["batch"]["gradient_accumulation_steps"], 2);
}

TEST(JobSim, RestartBudgetAndWaitTimeoutEndTheJob) {
  auto j = simpleJob();
  j["cluster"] = cluster(2, 4);
  j["job"].erase("total_steps");
  j["job"]["horizon_hours"] = 1000;
  j["failures"] = {{"model", "exponential"}, {"node_mtbf_hours", 10}};
  j["agent"] = {{"max_restarts", 3}};
  RunResult r;
  eventsOf(fromJson(j), &r);
  EXPECT_EQ(toString(r.outcome), "failed");
  EXPECT_THAT(r.message, HasSubstr("max_restarts (3) exhausted"));
  EXPECT_EQ(r.failures, 4);

  auto k = simpleJob();
  k["cluster"] = cluster(2, 4);
  k["job"].erase("total_steps");
  k["job"]["horizon_hours"] = 10;
  k["agent"] = {{"min_nodes", 2}, {"wait_timeout_seconds", 600}};
  k["failures"] = {
      {"model", "trace"}, {"replacement", "none"}, {"events", {{{"at_hours", 1}, {"node", 0}}}}};
  RunResult w;
  eventsOf(fromJson(k), &w);
  EXPECT_EQ(toString(w.outcome), "failed");
  EXPECT_THAT(w.message, HasSubstr("wait_timeout"));
  EXPECT_EQ(w.simulatedNs, hoursToNanos(1) + secondsToNanos(600));
  EXPECT_EQ(w.idleNs, secondsToNanos(600));
}

TEST(JobSim, TraceFailuresOnUnknownNodesAreConfigErrors) {
  auto j = simpleJob();
  j["failures"] = {{"model", "trace"}, {"events", {{{"at_hours", 1}, {"node", "n9"}}}}};
  EXPECT_THROW(simulate(fromJson(j)), ConfigError);
}

// ---- live recovery (job.recovery.mode live) ----------------------------------------------

// 4 nodes of 1 GPU, elastic on 1 to 4 (batch 48), steps of 12 ms at world 4, no communication;
// restarts cost 10 s (+ 2 s of load), live recovery 0.5 s (+ 1 s to send the state), saves
// every 50 steps. `zero`: the config's ZeRO stage.
nlohmann::json liveJob(int zero, const nlohmann::json& script) {
  nlohmann::json j = {
      {"cluster", cluster(4, 1)},
      {"node_names", {"n0", "n1", "n2", "n3"}},
      {"job",
       {{"config",
         {{"elasticity",
           {{"enabled", true},
            {"max_train_batch_size", 48},
            {"micro_batch_sizes", {4, 12}},
            {"min_gpus", 1},
            {"max_gpus", 4},
            {"version", 0.1}}},
          {"zero_optimization", {{"stage", zero}}}}},
        {"seconds_per_sample_per_gpu", 0.001},
        {"total_steps", 100},
        {"checkpoint", {{"every_steps", 50}, {"save_seconds", 1}, {"load_seconds", 2}}},
        {"restart_overhead_seconds", 10},
        {"recovery",
         {{"mode", "live"},
          {"reconfigure_seconds", 0.5},
          {"transfer_GBps", 1},
          {"state_bytes", 1e9}}}}},
      {"agent", {{"min_nodes", 1}, {"last_call_seconds", 1}, {"monitor_interval_seconds", 0.001}}},
      {"script", script}};
  return j;
}

TEST(LiveRecovery, SurvivorsResumeFromTheLastCompletedStepAndSendTheStateToTheRestartedWorker) {
  const nlohmann::json kill = {{{"at_step", 30}, {"kind", "kill_worker"}, {"rank", 1}}};
  RunResult live;
  const auto liveEvents = eventsOf(fromJson(liveJob(0, kill)), &live);
  const auto liveStarts = starts(liveEvents);
  auto checkpointJob = liveJob(0, kill);
  checkpointJob["job"]["recovery"]["mode"] = "checkpoint";
  RunResult restart;
  const auto restartEvents = eventsOf(fromJson(checkpointJob), &restart);
  const auto restartStarts = starts(restartEvents);
  // The stop says how the start after it recovers, as `stretch launch` writes it.
  ASSERT_EQ(recordsOf(liveEvents, "stop_workers").size(), 1u);
  EXPECT_EQ(recordsOf(liveEvents, "stop_workers")[0]["recovery"], "live");
  EXPECT_FALSE(recordsOf(restartEvents, "stop_workers")[0].contains("recovery"));

  // The same decisions; the live start resumes from step 30 and says so.
  ASSERT_EQ(liveStarts.size(), 2u);
  ASSERT_EQ(restartStarts.size(), 2u);
  EXPECT_EQ(liveStarts[1]["world_size"], restartStarts[1]["world_size"]);
  EXPECT_EQ(liveStarts[1]["recovery"], "live");
  EXPECT_EQ(liveStarts[1]["resume_step"], 30);
  EXPECT_FALSE(liveStarts[0].contains("recovery"));
  // (the checkpoint mode's log is as it always was)
  EXPECT_FALSE(restartStarts[1].contains("recovery"));
  EXPECT_FALSE(restartStarts[1].contains("resume_step"));  // no checkpoint before step 50
  EXPECT_EQ(live.liveRecoveries, 1);
  EXPECT_EQ(live.checkpointFallbacks, 0);
  EXPECT_EQ(restart.liveRecoveries, 0);
  EXPECT_EQ(restart.checkpointFallbacks, 0);
  EXPECT_EQ(live.steps, 100);
  EXPECT_EQ(restart.steps, 100);
  // Nothing computed is lost (the kill comes at a step's end and the agent stops the workers at
  // once); the restart path loses the 30 steps.
  const SimTime step = secondsToNanos(12 * 0.001);
  EXPECT_EQ(live.lostNs, 0);
  EXPECT_EQ(restart.lostNs, 30 * step);
  // Starting: the first start's 10 s, then 0.5 s for the 3 survivors' interim world to form; it
  // trains the last 70 steps (16 ms each) while the restarted worker takes its 10 s to start, so
  // the job ends before the world of 4 forms (against 10 s again on the restart path: no
  // checkpoint to load yet).
  EXPECT_EQ(live.startupNs, secondsToNanos(10) + secondsToNanos(0.5));
  EXPECT_EQ(restart.startupNs, secondsToNanos(20));
  EXPECT_GT(live.ettr(), restart.ettr());
}

// What `stretch launch` does while a replacement starts: the survivors train in an interim world,
// then the full world forms (reconfigure) and sends the replacement the state (transfer). Without
// a valid interim world (only 4 GPUs valid) the survivors wait for the replacement's start.
TEST(LiveRecovery, SurvivorsTrainInTheInterimWorldWhileTheReplacementStarts) {
  const nlohmann::json kill = {{{"at_step", 30}, {"kind", "kill_worker"}, {"rank", 1}}};
  for (const SimMode mode : {SimMode::Aggregate, SimMode::StepLevel}) {
    SCOPED_TRACE(mode == SimMode::Aggregate ? "aggregate" : "step-level");
    auto j = liveJob(0, kill);
    j["job"]["total_steps"] = 2000;
    j["job"]["checkpoint"]["every_steps"] = 5000;
    RunResult r;
    const auto events = eventsOf(fromJson(j), &r, mode);
    const auto plans = recordsOf(events, "live_plan");
    ASSERT_EQ(plans.size(), 1u);
    EXPECT_EQ(plans[0]["world_size"], 3);  // the interim world
    EXPECT_EQ(r.steps, 2000);
    EXPECT_EQ(r.liveRecoveries, 1);
    // The first start, the interim world forming, then the world of 4 forming and sending the
    // state once the replacement has started (10 s after the stop).
    EXPECT_EQ(r.startupNs,
              secondsToNanos(10) + secondsToNanos(0.5) + secondsToNanos(0.5) + secondsToNanos(1.0));
    // The interim world trained 9.5 s at 16 ms a step: 593 steps; the 594th was in flight at the
    // handover and is lost.
    EXPECT_EQ(r.lostNs, secondsToNanos(9.5) - 593 * secondsToNanos(0.016));
    // Nothing idles; every other second trains: 30 + 1,377 steps at 12 ms, 593 at 16 ms.
    EXPECT_EQ(r.usefulNs, 1407 * secondsToNanos(0.012) + 593 * secondsToNanos(0.016));

    j["job"]["config"]["elasticity"]["min_gpus"] = 4;
    const auto waiting = eventsOf(fromJson(j), &r, mode);
    ASSERT_EQ(recordsOf(waiting, "live_plan").size(), 1u);
    EXPECT_EQ(r.liveRecoveries, 1);
    EXPECT_EQ(r.lostNs, 0);
    EXPECT_EQ(r.startupNs,
              secondsToNanos(10) + secondsToNanos(10) + secondsToNanos(0.5) + secondsToNanos(1.0));
  }
}

// Timeline records kept in memory.
struct RecordSink final : TimelineSink {
  void record(const TimelineRecord& r) override { records.push_back(r); }
  std::vector<TimelineRecord> records;
};

// The world-size timeline while a replacement starts shows the interim world that trains, not the
// full generation: 4 workers until the kill, 3 from the stop until the replacement has started,
// then 4 again; the world-size hours, the markers and the compute spans agree.
TEST(LiveRecovery, TheTimelineShowsTheInterimWorldUntilTheReplacementHasStarted) {
  const nlohmann::json kill = {{{"at_step", 30}, {"kind", "kill_worker"}, {"rank", 1}}};
  auto j = liveJob(0, kill);
  j["job"]["total_steps"] = 2000;
  j["job"]["checkpoint"]["every_steps"] = 5000;
  const Scenario s = fromJson(j);
  for (const SimMode mode : {SimMode::Aggregate, SimMode::StepLevel}) {
    SCOPED_TRACE(mode == SimMode::Aggregate ? "aggregate" : "step-level");
    RecordSink sink;
    RunOptions o;
    o.mode = mode;
    o.timeline = &sink;
    const RunResult r = simulate(s, o);
    ASSERT_EQ(r.liveRecoveries, 1);
    // The kill after 10 s of start-up and 30 steps of 12 ms; the replacement starts for 10 s.
    const SimTime stop = secondsToNanos(10) + 30 * secondsToNanos(0.012);
    const SimTime handover = stop + secondsToNanos(10);
    std::vector<std::pair<SimTime, std::int64_t>> changes;
    for (const TimelineRecord& rec : sink.records) {
      if (rec.kind == TimelineKind::WorldSize &&
          (changes.empty() || changes.back().second != rec.worldSize)) {
        changes.emplace_back(rec.time, rec.worldSize);
      }
      if (rec.kind == TimelineKind::Compute || rec.kind == TimelineKind::MicroStep) {
        const bool interim = rec.time >= stop && rec.time < handover;
        EXPECT_EQ(rec.worldSize, interim ? 3 : 4) << rec.name << " at " << rec.time;
      }
    }
    EXPECT_EQ(changes,
              (std::vector<std::pair<SimTime, std::int64_t>>{{0, 4}, {stop, 3}, {handover, 4}}));
    EXPECT_EQ(r.worldSizeNs, (std::map<std::int64_t, SimTime>{
                                 {3, handover - stop}, {4, r.simulatedNs - (handover - stop)}}));
  }
}

// The checkpoint cadence counts the job's global step, as the example jobs' --save-every does: a
// live recovery that keeps training does not reset it (it used to restart at every start, so
// failures more frequent than the interval meant no checkpoint ever), and a restart from a
// checkpoint resumes it at the loaded step.
TEST(LiveRecovery, LiveRecoveriesDoNotResetTheCheckpointCadence) {
  nlohmann::json kills = nlohmann::json::array();
  for (const int step : {30, 70, 110, 150}) {
    kills.push_back({{"at_step", step}, {"kind", "kill_worker"}, {"rank", 1}});
  }
  auto j = liveJob(0, kills);
  j["job"]["total_steps"] = 200;
  // 0.6 s at 12 ms a step: every 50 steps; no interim world (only 4 GPUs valid), so every
  // generation trains at world 4.
  j["job"]["checkpoint"] = {{"interval_minutes", 0.01}, {"save_seconds", 1}, {"load_seconds", 2}};
  j["job"]["config"]["elasticity"]["min_gpus"] = 4;
  auto savedSteps = [](const Scenario& s, RunResult& r) {
    RecordSink sink;
    RunOptions o;
    o.timeline = &sink;
    r = simulate(s, o);
    std::vector<std::string> saves;
    for (const TimelineRecord& rec : sink.records) {
      if (rec.kind == TimelineKind::Checkpoint) {
        saves.push_back(rec.name);
      }
    }
    return saves;
  };
  RunResult r;
  // Each kill comes 40 steps after the previous start (the old rule, 50 steps after each start,
  // saved nothing).
  EXPECT_EQ(savedSteps(fromJson(j), r),
            (std::vector<std::string>{"save step 50", "save step 100", "save step 150"}));
  EXPECT_EQ(r.liveRecoveries, 4);
  EXPECT_EQ(r.steps, 200);

  // Restarts from the checkpoint: the kills roll back to 0, 50, 100 and 150 and the count goes on
  // from the loaded step, so the saves are the same.
  j["job"]["recovery"] = {{"mode", "checkpoint"}};
  EXPECT_EQ(savedSteps(fromJson(j), r),
            (std::vector<std::string>{"save step 50", "save step 100", "save step 150"}));
  EXPECT_EQ(r.checkpointFallbacks, 0);
  EXPECT_EQ(r.restarts, 4);
  EXPECT_EQ(r.steps, 200);
}

TEST(LiveRecovery, ZeroPartitionsLostWithTheirCopyFallBackToTheCheckpoint) {
  // n1 and n2 leave at the same step: with ZeRO 1 or 2, n1's partition had its copy on n2.
  const nlohmann::json neighbours = {{{"at_step", 60}, {"kind", "leave"}, {"node", "n1"}},
                                     {{"at_step", 60}, {"kind", "leave"}, {"node", "n2"}}};
  const nlohmann::json apart = {{{"at_step", 60}, {"kind", "leave"}, {"node", "n1"}},
                                {{"at_step", 60}, {"kind", "leave"}, {"node", "n3"}}};
  struct Case {
    int zero;
    const nlohmann::json* script;
    const char* recovery;
    int resume;
  };
  for (const Case& c : {Case{0, &neighbours, "live", 60}, Case{1, &neighbours, "checkpoint", 50},
                        Case{2, &neighbours, "checkpoint", 50}, Case{2, &apart, "live", 60}}) {
    SCOPED_TRACE(testing::Message()
                 << "ZeRO " << c.zero << ", " << (c.script == &apart ? "n1 and n3" : "n1 and n2"));
    RunResult r;
    const auto st = starts(eventsOf(fromJson(liveJob(c.zero, *c.script)), &r));
    ASSERT_GE(st.size(), 2u);
    const auto& last = st.back();
    EXPECT_EQ(last["world_size"], 2);
    EXPECT_EQ(last["recovery"], c.recovery);
    EXPECT_EQ(last["resume_step"], c.resume);
    EXPECT_EQ(r.steps, 100);
  }
}

// The survivors are workers, not nodes: on one node of 4 workers, a killed worker leaves 3
// that keep the state (as `stretch launch` does on one host); a lone worker leaves none.
TEST(LiveRecovery, AKilledWorkersNodeMatesAreSurvivors) {
  auto j = liveJob(0, {{{"at_step", 30}, {"kind", "kill_worker"}, {"rank", 0}}});
  j["cluster"] = cluster(1, 4);
  j["node_names"] = {"n0"};
  RunResult r;
  auto st = starts(eventsOf(fromJson(j), &r));
  ASSERT_EQ(st.size(), 2u);
  EXPECT_EQ(st[1]["recovery"], "live");
  EXPECT_EQ(st[1]["resume_step"], 30);
  EXPECT_EQ(r.liveRecoveries, 1);
  // After the first 10 s, 0.5 s for the interim world of 3 to form: it trains the last 70 steps
  // while the restarted worker starts.
  EXPECT_EQ(r.startupNs, secondsToNanos(10) + secondsToNanos(0.5));

  j["cluster"] = cluster(1, 1);
  j["job"]["config"]["elasticity"]["max_gpus"] = 1;
  st = starts(eventsOf(fromJson(j), &r));
  ASSERT_EQ(st.size(), 2u);
  EXPECT_EQ(st[1]["recovery"], "checkpoint");
  EXPECT_EQ(r.checkpointFallbacks, 1);
}

// ZeRO 1/2 on one node of 4 workers: rank r's partition has its copy on rank r + 1 (mod 4).
// Ranks 1 and 2 killed in the same step take partition 1 and its only copy; ranks 1 and 3 leave
// every partition somewhere.
TEST(LiveRecovery, OnOneNodeAPartitionIsLostOnlyWithItsBuddy) {
  struct Case {
    int zero;
    int second;
    const char* recovery;
  };
  for (const Case& c : {Case{1, 2, "checkpoint"}, Case{2, 2, "checkpoint"}, Case{1, 3, "live"},
                        Case{0, 2, "live"}}) {
    SCOPED_TRACE(testing::Message() << "ZeRO " << c.zero << ", ranks 1 and " << c.second);
    auto j = liveJob(c.zero, {{{"at_step", 60}, {"kind", "kill_worker"}, {"rank", 1}},
                              {{"at_step", 60}, {"kind", "kill_worker"}, {"rank", c.second}}});
    j["cluster"] = cluster(1, 4);
    j["node_names"] = {"n0"};
    RunResult r;
    const auto events = eventsOf(fromJson(j), &r);
    const auto st = starts(events);
    ASSERT_GE(st.size(), 2u);
    EXPECT_EQ(st.back()["recovery"], c.recovery);
    EXPECT_EQ(recordsOf(events, "stop_workers").back()["recovery"], c.recovery);
    EXPECT_EQ(st.back()["resume_step"], std::string(c.recovery) == "live" ? 60 : 50);
    EXPECT_EQ(r.steps, 100);
  }
}

// With 2 workers per node the buddy is on the next node (distance 2): a whole node lost keeps
// every partition; a worker of n1 and the worker of n2 that holds its copy do not.
TEST(LiveRecovery, WithSeveralWorkersPerNodeTheCopyIsOnTheNextNode) {
  auto j = liveJob(1, {{{"at_step", 60}, {"kind", "leave"}, {"node", "n1"}}});
  j["cluster"] = cluster(4, 2);
  j["job"]["config"]["elasticity"]["max_gpus"] = 8;
  RunResult r;
  auto st = starts(eventsOf(fromJson(j), &r));
  ASSERT_GE(st.size(), 2u);
  EXPECT_EQ(st.back()["recovery"], "live");
  // rank 2 (n1, local 0) and rank 4 (n2, local 0, its buddy)
  j["script"] = {{{"at_step", 60}, {"kind", "kill_worker"}, {"rank", 2}},
                 {{"at_step", 60}, {"kind", "kill_worker"}, {"rank", 4}}};
  st = starts(eventsOf(fromJson(j), &r));
  ASSERT_GE(st.size(), 2u);
  EXPECT_EQ(st.back()["recovery"], "checkpoint");
  // rank 2 and rank 5: partition 2's copy (rank 4) and partition 5's (rank 7) survive
  j["script"][1]["rank"] = 5;
  st = starts(eventsOf(fromJson(j), &r));
  ASSERT_GE(st.size(), 2u);
  EXPECT_EQ(st.back()["recovery"], "live");
}

// A node struck twice before a generation completes a step still counts once: with 2 nodes,
// the other one survives both restarts.
TEST(LiveRecovery, ANodeStruckTwiceCountsOnce) {
  auto j = liveJob(0, {{{"at_step", 30}, {"kind", "kill_worker"}, {"rank", 1}},
                       {{"at_step", 30}, {"kind", "kill_worker"}, {"rank", 1}}});
  j["cluster"] = cluster(2, 1);
  j["node_names"] = {"n0", "n1"};
  RunResult r;
  const auto st = starts(eventsOf(fromJson(j), &r));
  ASSERT_EQ(st.size(), 3u);
  EXPECT_EQ(st[1]["recovery"], "live");
  EXPECT_EQ(st[2]["recovery"], "live");
  EXPECT_EQ(st[2]["resume_step"], 30);
  EXPECT_EQ(r.liveRecoveries, 2);
  EXPECT_EQ(r.checkpointFallbacks, 0);
}

TEST(LiveRecovery, AggregateAndStepLevelAgreeToTheNanosecondUnderRandomFailures) {
  auto j = liveJob(2, nlohmann::json::array());
  j["cluster"] = cluster(8, 2);
  j["job"]["gradient_bytes"] = 4e8;
  j["job"]["compute_spread"] = 0.1;
  j["job"].erase("total_steps");
  j["job"]["horizon_hours"] = 3;
  j["job"]["seconds_per_sample_per_gpu"] = 0.05;
  j["job"]["checkpoint"] = {{"interval_minutes", 10}, {"save_seconds", 20}, {"load_seconds", 30}};
  j["job"]["config"]["elasticity"]["max_gpus"] = 16;
  j["job"]["config"]["elasticity"]["max_train_batch_size"] = 96;
  j["agent"]["monitor_interval_seconds"] = 1;
  j["failures"] = {{"model", "exponential"}, {"node_mtbf_hours", 4}, {"repair_hours", 1}};
  j.erase("node_names");
  j.erase("script");
  const RunResult a = expectModesAgree(fromJson(j));
  EXPECT_GT(a.liveRecoveries, 0);
  // With failure detection, whose blocked spans cut steps and saves at any time.
  j["job"]["failure_detection_seconds"] = 7.5;
  const RunResult detected = expectModesAgree(fromJson(j));
  EXPECT_GT(detected.liveRecoveries, 0);
  EXPECT_NE(detected.lostNs, a.lostNs);
}

TEST(LiveRecovery, LiveModeNeedsItsReconfigurationTime) {
  auto j = liveJob(0, nlohmann::json::array());
  j["job"]["recovery"].erase("reconfigure_seconds");
  EXPECT_THAT([&] { fromJson(j); },
              testing::ThrowsMessage<ConfigError>(HasSubstr("reconfigure_seconds")));
  j["job"]["recovery"] = {{"mode", "fast"}};
  EXPECT_THAT([&] { fromJson(j); }, testing::ThrowsMessage<ConfigError>(HasSubstr("mode")));
}

// ---- failure detection (job.failure_detection_seconds) --------------------------------------

// liveJob's cluster in checkpoint mode, with `detection` seconds of failure detection and one
// traced failure of n1 at `atHours` (`nodeLost`: the cause takes the node; it then stays away).
nlohmann::json detectionJob(double detection, double atHours, bool nodeLost) {
  auto j = liveJob(0, nlohmann::json::array());
  j["job"].erase("recovery");
  j["job"]["failure_detection_seconds"] = detection;
  j["failures"] = {{"model", "trace"},
                   {"events", {{{"at_hours", atHours}, {"node", "n1"}, {"cause", "crash"}}}},
                   {"causes", {{{"name", "crash"}, {"count", 1}, {"node_lost", nodeLost}}}},
                   {"replacement", "none"},
                   {"repair_hours", 1000}};
  return j;
}

// A node that dies silently reaches the agent failure_detection_seconds later; meanwhile the
// generation blocks (no step completes: the time is lost), then everything happens as it would
// have without detection, that much later.
TEST(FailureDetection, ASilentNodeFailureReachesTheAgentAfterTheDetectionTime) {
  // The failure after the first 10 s start-up and 40 steps of 12 ms (no checkpoint before 50).
  const double atHours = (10 + 40 * 0.012 + 0.006) / 3600;
  const SimTime failure = hoursToNanos(atHours);
  const SimTime detection = secondsToNanos(5);
  for (const SimMode mode : {SimMode::Aggregate, SimMode::StepLevel}) {
    SCOPED_TRACE(mode == SimMode::Aggregate ? "aggregate" : "step-level");
    RunResult noticed;
    RunResult silent;
    const auto at0 = eventsOf(fromJson(detectionJob(0, atHours, true)), &noticed, mode);
    const auto at5 = eventsOf(fromJson(detectionJob(5, atHours, true)), &silent, mode);
    const auto stops0 = recordsOf(at0, "stop_workers");
    const auto stops5 = recordsOf(at5, "stop_workers");
    ASSERT_EQ(stops0.size(), 1u);
    ASSERT_EQ(stops5.size(), 1u);
    EXPECT_EQ(stops0[0]["time_ns"], failure);
    EXPECT_EQ(stops5[0]["time_ns"], failure + detection);
    // The same decisions, 5 s later; the run is 5 s longer, all of them lost.
    ASSERT_EQ(starts(at5).size(), 2u);
    EXPECT_EQ(starts(at5)[1]["world_size"], 3);
    EXPECT_EQ(starts(at5)[1]["resume_step"], starts(at0)[1]["resume_step"]);
    EXPECT_EQ(silent.simulatedNs, noticed.simulatedNs + detection);
    EXPECT_EQ(silent.lostNs, noticed.lostNs + detection);
    EXPECT_EQ(silent.usefulNs, noticed.usefulNs);
    EXPECT_EQ(silent.steps, noticed.steps);
    EXPECT_EQ(silent.failures, 1);
  }

  // The timeline shows the blocked span, at the world that blocks.
  RecordSink sink;
  RunOptions o;
  o.timeline = &sink;
  simulate(fromJson(detectionJob(5, atHours, true)), o);
  std::vector<TimelineRecord> blocked;
  std::copy_if(sink.records.begin(), sink.records.end(), std::back_inserter(blocked),
               [](const TimelineRecord& r) { return r.kind == TimelineKind::Blocked; });
  ASSERT_EQ(blocked.size(), 1u);
  EXPECT_EQ(blocked[0].time, failure);
  EXPECT_EQ(blocked[0].duration, detection);
  EXPECT_EQ(blocked[0].worldSize, 4);
  EXPECT_EQ(blocked[0].step, 40);
}

// Live recovery: the survivors resume from the last step completed before the failure, not from
// anything in the blocked time.
TEST(FailureDetection, LiveSurvivorsResumeFromTheLastStepBeforeTheFailure) {
  const double atHours = (10 + 40 * 0.012 + 0.006) / 3600;
  auto j = detectionJob(5, atHours, true);
  j["job"]["recovery"] = liveJob(0, nlohmann::json::array())["job"]["recovery"];
  for (const SimMode mode : {SimMode::Aggregate, SimMode::StepLevel}) {
    RunResult r;
    const auto events = eventsOf(fromJson(j), &r, mode);
    const auto st = starts(events);
    ASSERT_EQ(st.size(), 2u);
    EXPECT_EQ(st[1]["recovery"], "live");
    EXPECT_EQ(st[1]["resume_step"], 40);
    EXPECT_EQ(st[1]["time_ns"], hoursToNanos(atHours) + secondsToNanos(5));
  }
}

// Exits the agent sees at once cost no detection: a software failure (its node stays), a worker
// the script kills, a spot preemption (the node's agent is stopped by a signal and says so).
TEST(FailureDetection, ProcessExitsAndPreemptionsAreNoticedAtOnce) {
  const double atHours = (10 + 40 * 0.012 + 0.006) / 3600;
  RunResult a;
  RunResult b;
  EXPECT_EQ(eventsOf(fromJson(detectionJob(0, atHours, false)), &a),
            eventsOf(fromJson(detectionJob(5, atHours, false)), &b));
  expectSameRun(a, b);

  auto kill = liveJob(0, {{{"at_step", 40}, {"kind", "kill_worker"}, {"rank", 1}}});
  kill["job"].erase("recovery");
  const auto killed0 = eventsOf(fromJson(kill), &a);
  kill["job"]["failure_detection_seconds"] = 5;
  EXPECT_EQ(eventsOf(fromJson(kill), &b), killed0);
  expectSameRun(a, b);

  auto spot = liveJob(0, nlohmann::json::array());
  spot["job"].erase("recovery");
  spot["job"]["total_steps"] = 20000;
  spot["spot"] = {{"node_mean_hours_between_preemptions", 0.02}, {"return_hours", 0.01}};
  const auto preempted0 = eventsOf(fromJson(spot), &a);
  EXPECT_GT(a.preemptions, 2);
  spot["job"]["failure_detection_seconds"] = 5;
  EXPECT_EQ(eventsOf(fromJson(spot), &b), preempted0);
  expectSameRun(a, b);
}

TEST(Timeline, TraceAndCsvWriters) {
  test::TempDir dir;
  Scenario s = fixture("trace_replay");
  {
    ChromeTraceWriter trace(dir.path() / "t.json", 1'000'000);
    CsvTimelineWriter csv(dir.path() / "t.csv", 1'000'000);
    TimelineTee tee(&trace, &csv);
    RunOptions o;
    o.timeline = &tee;
    o.mode = SimMode::StepLevel;
    s.job.horizonHours = 0.6;
    simulate(s, o);
    trace.finish();
    csv.finish();
  }
  const auto doc = nlohmann::json::parse(test::readFile(dir.path() / "t.json"));
  std::set<std::string> phases;
  std::set<std::string> cats;
  for (const auto& e : doc["traceEvents"]) {
    phases.insert(e["ph"]);
    if (e.contains("cat")) {
      cats.insert(e["cat"]);
    }
  }
  EXPECT_EQ(phases, (std::set<std::string>{"M", "X", "i", "C"}));
  EXPECT_TRUE(cats.contains("micro_step"));
  EXPECT_TRUE(cats.contains("collective"));
  EXPECT_TRUE(cats.contains("checkpoint"));
  EXPECT_TRUE(cats.contains("startup"));
  EXPECT_TRUE(cats.contains("agent"));
  const std::string csv = test::readFile(dir.path() / "t.csv");
  EXPECT_THAT(csv,
              ::testing::StartsWith(
                  "time_ns,time_hours,duration_ns,kind,generation,world_size,step,name,detail\n"));
  EXPECT_THAT(csv, HasSubstr(",collective,"));

  // A cap keeps the file small and says how much it dropped.
  ChromeTraceWriter small(dir.path() / "small.json", 10);
  RunOptions o;
  o.timeline = &small;
  o.mode = SimMode::StepLevel;
  simulate(s, o);
  small.finish();
  EXPECT_EQ(small.written(), 10u);
  EXPECT_GT(small.dropped(), 0u);
  const auto capped = nlohmann::json::parse(test::readFile(dir.path() / "small.json"));
  EXPECT_EQ(capped["traceEvents"].back()["name"], "dropped_records");
}

}  // namespace
}  // namespace stretch::sim
