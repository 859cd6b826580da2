// Scenario files: every fixture parses; unknown keys are warnings; bad values are ConfigErrors
// naming the path, the value and what was expected; relative files resolve from the scenario's
// folder; cause tables and traces load.

#include "sim/scenario.hpp"

#include <fstream>

#include <nlohmann/json.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/common/error.hpp"
#include "sim/job_sim.hpp"
#include "tests/sim/scenario_support.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::sim {
namespace {

using ::testing::HasSubstr;

const std::filesystem::path kScenarios = test::fixturePath("scenarios");

using scenario_support::minimal;
using scenario_support::parse;

// The message of the ConfigError parsing `j` throws ("" when it does not throw).
std::string errorOf(const nlohmann::json& j) {
  try {
    parse(j);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Scenario, EveryFixtureParsesWithoutWarnings) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kScenarios)) {
    if (entry.path().extension() != ".json") {
      continue;
    }
    SCOPED_TRACE(entry.path().string());
    const Scenario s = loadScenario(entry.path());
    EXPECT_TRUE(s.warnings.empty()) << ::testing::PrintToString(s.warnings);
    EXPECT_EQ(s.name, entry.path().stem().string());
    EXPECT_GT(s.cluster.gpus(), 0);
    EXPECT_GT(s.job.secondsPerSample, 0.0);
    ++count;
  }
  EXPECT_GE(count, 6);
}

TEST(Scenario, MinimalDefaults) {
  const Scenario s = parse(minimal());
  EXPECT_EQ(s.cluster.nodes, 2);
  EXPECT_EQ(s.failures.model, FailureModelKind::None);
  EXPECT_EQ(s.failures.replacement, ReplacementKind::Immediate);
  EXPECT_EQ(s.agent.maxRestarts, kUnlimitedRestarts);
  EXPECT_EQ(s.job.bucketCount, 0);  // no gradient bytes: nothing to reduce
  EXPECT_FALSE(s.job.overlapComm);  // DeepSpeed's default below ZeRO stage 3
  EXPECT_EQ(s.seed, 0u);
  EXPECT_TRUE(s.warnings.empty());
}

TEST(Scenario, UnknownKeysAreWarningsWithTheirPath) {
  auto j = minimal();
  j["colour"] = "blue";
  j["job"]["checkpoint"] = {{"interval_minutes", 10}, {"save_secs", 3}};
  j["failures"] = {{"model", "exponential"}, {"node_mtbf_hours", 100}, {"mtbf", 3}};
  const Scenario s = parse(j);
  EXPECT_THAT(s.warnings, ::testing::Contains(HasSubstr("colour: unknown key")));
  EXPECT_THAT(s.warnings, ::testing::Contains(HasSubstr("job.checkpoint.save_secs: unknown key")));
  EXPECT_THAT(s.warnings, ::testing::Contains(HasSubstr("failures.mtbf: unknown key")));
  EXPECT_EQ(s.warnings.size(), 3u);
}

TEST(Scenario, BadValuesNameThePathTheValueAndTheExpectation) {
  auto j = minimal();
  j["job"]["checkpoint"] = {{"interval_minutes", -3}};
  EXPECT_EQ(errorOf(j),
            "job.checkpoint.interval_minutes = -3: expected a positive number of "
            "minutes, at most 6e+07");

  j = minimal();
  j["failures"] = {{"model", "gamma"}};
  EXPECT_EQ(errorOf(j),
            "failures.model = \"gamma\": expected \"none\", \"exponential\", \"weibull\" or "
            "\"trace\"");

  j = minimal();
  j["failures"] = {{"model", "exponential"}};
  EXPECT_THAT(errorOf(j), HasSubstr("failures.node_mtbf_hours = (missing)"));

  j = minimal();
  j["failures"] = {{"model", "weibull"}, {"node_mtbf_hours", 10}};
  EXPECT_THAT(errorOf(j), HasSubstr("failures.shape = (missing): expected the Weibull shape"));

  j = minimal();
  j["failures"] = {{"replacement", "spares:x"}};
  EXPECT_THAT(errorOf(j), HasSubstr("failures.replacement = \"spares:x\": expected"));

  j = minimal();
  j["job"]["seconds_per_sample_per_gpu"] = 0;
  EXPECT_EQ(errorOf(j),
            "job.seconds_per_sample_per_gpu = 0: expected a positive number of "
            "seconds, at most 3.6e+09");

  j = minimal();
  j["job"].erase("horizon_hours");
  EXPECT_THAT(errorOf(j), HasSubstr("total_samples, total_steps or horizon_hours"));

  j = minimal();
  j["job"]["total_steps"] = 2.5;
  EXPECT_EQ(errorOf(j),
            "job.total_steps = 2.5: expected a positive number of steps, at most 1125899906842624");

  j = minimal();
  j["job"]["checkpoint"] = {{"interval_minutes", 10}, {"every_steps", 5}};
  EXPECT_THAT(errorOf(j), HasSubstr("either interval_minutes or every_steps"));

  j = minimal();
  j["scale_events"] = {{{"at_hours", 1}, {"kind", "grow"}}};
  EXPECT_EQ(errorOf(j), "scale_events[0].kind = \"grow\": expected \"join\" or \"leave\"");

  j = minimal();
  j["script"] = {{{"at_step", 3}, {"kind", "kill_worker"}}};
  EXPECT_THAT(errorOf(j), HasSubstr("script[0].rank = (missing)"));

  j = minimal();
  j["agent"] = {{"min_nodes", 3}, {"max_nodes", 2}};
  EXPECT_THAT(errorOf(j), HasSubstr("agent.max_nodes = 2: expected an integer >= agent.min_nodes"));

  j = minimal();
  j["node_names"] = {"a"};
  EXPECT_THAT(errorOf(j),
              HasSubstr("node_names = 1 name(s): expected one name per cluster node (2)"));

  j = minimal();
  j["job"]["config"] = {{"train_batch_size", -1}};
  EXPECT_THAT(errorOf(j), HasSubstr("train_batch_size"));

  j = minimal();
  j.erase("cluster");
  EXPECT_THAT(errorOf(j), HasSubstr("cluster = (missing)"));
}

// Issue 42: every number has a range, and a value outside it is a ConfigError naming the key,
// the value and the range, never an InternalError from deep inside a run (a Weibull shape of
// 1e-9 gave "sim/scheduler.cpp:11: check ... failed (duration -nan ns)", and a cost of 1e300
// seconds an infinite duration). Each value at its limit runs.
TEST(Scenario, EveryNumberHasARangeNamedInItsError) {
  using nlohmann::json;
  struct Case {
    const char* pointer;  // where the value goes
    json tooFar;          // refused
    json atLimit;         // accepted, and runs
    const char* message;  // what the error says
  };
  const Case cases[] = {
      {"/failures/shape", 1e-9, 0.1,
       "failures.shape = 1e-09: expected the Weibull shape k, a number in [0.1, 100]"},
      {"/failures/shape", 1000, 100, "failures.shape = 1000: expected the Weibull shape k"},
      {"/failures/node_mtbf_hours", 1e300, 1e9,
       "failures.node_mtbf_hours = 1e+300: expected a number of hours in [0.01, 1e+09]"},
      // 1e-300 used to run: 2.6 s a replica of failures alone, up to the event cap.
      {"/failures/node_mtbf_hours", 1e-300, 0.01,
       "failures.node_mtbf_hours = 1e-300: expected a number of hours in [0.01, 1e+09]"},
      {"/failures/repair_hours", 1e7, 1e6, "failures.repair_hours = 10000000.0: expected"},
      {"/job/seconds_per_sample_per_gpu", 1e300, 3.6e9,
       "job.seconds_per_sample_per_gpu = 1e+300: expected a positive number of seconds, at most "
       "3.6e+09"},
      {"/job/horizon_hours", 1.7e308, 1e6, "job.horizon_hours = 1.7e+308: expected"},
      {"/job/checkpoint/save_seconds", 1e300, 3.6e9, "job.checkpoint.save_seconds = 1e+300"},
      {"/job/checkpoint/load_seconds", 1e300, 3.6e9, "job.checkpoint.load_seconds = 1e+300"},
      {"/job/checkpoint/interval_minutes", 1e300, 6e7, "job.checkpoint.interval_minutes"},
      {"/job/restart_overhead_seconds", 1e300, 3.6e9, "job.restart_overhead_seconds = 1e+300"},
      {"/job/step_overhead_seconds", 1e300, 3.6e9, "job.step_overhead_seconds = 1e+300"},
      {"/job/compute_spread", 1e300, 100,
       "job.compute_spread = 1e+300: expected a non-negative fraction of the step's compute, at "
       "most 100"},
      {"/job/gradient_bytes", 1e300, 1e15, "job.gradient_bytes = 1e+300: expected"},
      {"/job/bucket_count", 1e15, 1000000, "job.bucket_count = 1e+15: expected"},
      {"/job/total_steps", 9007199254740993.0, 1000, "job.total_steps = "},
      {"/agent/last_call_seconds", 1e300, 3.6e9, "agent.last_call_seconds = 1e+300"},
      {"/agent/monitor_interval_seconds", 1e300, 3.6e9, "agent.monitor_interval_seconds"},
      {"/agent/wait_timeout_seconds", 1e300, 3.6e9, "agent.wait_timeout_seconds = 1e+300"},
      {"/agent/max_nodes", 1e9, 2,
       "agent.max_nodes = 1000000000.0: expected a positive integer, at most 10000000"},
      {"/spot/return_hours", 1e300, 1e6, "spot.return_hours = 1e+300"},
      {"/spot/node_mean_hours_between_preemptions", 1e300, 1e9,
       "spot.node_mean_hours_between_preemptions = 1e+300"},
      {"/scale_events/0/at_hours", 1e300, 1e6, "scale_events[0].at_hours = 1e+300"},
      {"/scale_events/0/nodes", 1e9, 1, "scale_events[0].nodes = 1000000000.0"},
      {"/cluster/inter_node_GBps", 1e-300, 1e-6,
       "cluster.inter_node_GBps = 1e-300: expected a finite number > 0 (GB/s per GPU), at least "
       "1e-06 and at most 1e+09"},
      {"/cluster/intra_latency_us", 1.7e308, 1e12, "cluster.intra_latency_us = 1.7e+308"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.pointer);
    json base = minimal();
    base["failures"] = {{"model", "weibull"}, {"node_mtbf_hours", 100}, {"shape", 1.5}};
    base["spot"] = {{"node_mean_hours_between_preemptions", 50}};
    base["scale_events"] = {{{"at_hours", 0.5}, {"kind", "join"}, {"nodes", 1}}};
    json j = base;
    j[json::json_pointer(c.pointer)] = c.tooFar;
    EXPECT_THAT(errorOf(j), HasSubstr(c.message));
    j[json::json_pointer(c.pointer)] = c.atLimit;
    try {
      const RunResult r = simulate(parse(j));
      EXPECT_GE(r.simulatedNs, 0);
    } catch (const Error& e) {
      ADD_FAILURE() << "at its limit: " << e.kind() << ": " << e.what();
    }
  }
  // Derived figures are checked too: FLOPs that give an infinite time per sample.
  json j = minimal();
  j["job"].erase("seconds_per_sample_per_gpu");
  j["job"]["flops_per_sample"] = 1e30;
  j["job"]["peak_tflops"] = 1e-300;
  j["job"]["mfu"] = 1;
  EXPECT_THAT(errorOf(j), HasSubstr("job.flops_per_sample = 1e+30: expected FLOPs that give"));
  // And so is the bucket count a gradient size implies.
  j = minimal();
  j["job"]["gradient_bytes"] = 1e15;
  j["job"]["config"]["zero_optimization"] = {{"reduce_bucket_size", 1}};
  EXPECT_THAT(errorOf(j),
              HasSubstr("job.gradient_bytes = 1e+15: expected at most 1000000 buckets"));
}

TEST(Scenario, SyntaxErrorsAndUnreadableFilesUseTheSharedFormats) {
  try {
    parseScenarioText("{\n  \"cluster\": ,\n}", kScenarios);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), ::testing::StartsWith("scenario:2:14: invalid JSON: "));
  }
  const auto missing = kScenarios / "none.json";
  try {
    loadScenario(missing);
    FAIL() << "expected an IoError";
  } catch (const IoError& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot read scenario " + missing.string() + ": No such file or directory");
  }
  auto j = minimal();
  j["agent"] = 3;
  EXPECT_EQ(errorOf(j), "agent = 3: expected a JSON object");
  EXPECT_EQ(errorOf(nlohmann::json::array()), "scenario = []: expected a JSON object");
}

TEST(Scenario, FlopsGiveSecondsPerSample) {
  auto j = minimal();
  j["job"].erase("seconds_per_sample_per_gpu");
  j["job"]["flops_per_sample"] = 1e15;
  j["job"]["peak_tflops"] = 1000;
  j["job"]["mfu"] = 0.5;
  j["job"]["model_parallel_size"] = 2;
  EXPECT_DOUBLE_EQ(parse(j).job.secondsPerSample, 1.0);
  j["job"]["seconds_per_sample_per_gpu"] = 1;
  EXPECT_THAT(errorOf(j), HasSubstr("either seconds_per_sample_per_gpu or flops_per_sample"));
  j["job"].erase("flops_per_sample");  // the message names a key that is set, with its value
  EXPECT_THAT(errorOf(j), HasSubstr("job.peak_tflops = 1000: expected either"));
}

TEST(Scenario, BucketsFollowReduceBucketSizeAndElementSize) {
  auto j = minimal();
  j["job"]["gradient_bytes"] = 5e9;
  EXPECT_EQ(parse(j).job.bucketCount, 3);  // 500M fp32 elements = 2 GB per bucket
  j["job"]["config"]["bf16"] = {{"enabled", true}};
  EXPECT_EQ(parse(j).job.bucketCount, 5);  // 1 GB per bucket
  j["job"]["bucket_count"] = 7;
  EXPECT_EQ(parse(j).job.bucketCount, 7);
}

TEST(Scenario, RelativeFilesResolveFromTheScenarioFolder) {
  const Scenario s = loadScenario(kScenarios / "sim_to_real_digits.json");
  ASSERT_TRUE(s.job.configFile.has_value());
  EXPECT_TRUE(std::filesystem::exists(*s.job.configFile));
  EXPECT_TRUE(s.job.config.elasticity.enabled);
  EXPECT_EQ(s.script.size(), 3u);
  EXPECT_EQ(s.job.checkpoint.everySteps, 10);
  EXPECT_EQ(s.job.totalSteps, 60);

  const Scenario t = loadScenario(kScenarios / "trace_replay.json");
  EXPECT_EQ(t.failures.model, FailureModelKind::Trace);
  EXPECT_EQ(t.failures.trace.size(), 6u);
  EXPECT_EQ(t.failures.causes.size(), 18u);
  EXPECT_EQ(t.failures.replacement, ReplacementKind::None);
}

TEST(Scenario, MissingConfigFileIsAnIoError) {
  auto j = minimal();
  j["job"].erase("config");
  j["job"]["config_file"] = "no/such/config.json";
  EXPECT_THROW(parse(j), IoError);
}

TEST(CauseTable, Llama3TableHasThe419Interruptions) {
  const auto causes = loadCauseTable(test::fixturePath("failures/llama3_causes.json"));
  double total = 0;
  double software = 0;
  for (const FailureCause& c : causes) {
    total += c.weight;
    if (!c.nodeLost) {
      software += c.weight;
      EXPECT_FALSE(c.repairHours.has_value()) << c.name;
    } else {
      EXPECT_TRUE(c.repairHours.has_value()) << c.name;
    }
  }
  EXPECT_EQ(total, 419);
  EXPECT_EQ(causes.front().name, "Faulty GPU");
  EXPECT_EQ(causes.front().weight, 148);
  EXPECT_EQ(software, 54 + 7 + 2);
}

TEST(FailureTrace, CsvAndJsonLoadTheSameFailures) {
  const auto csv = loadFailureTrace(test::fixturePath("failures/sample_trace.csv"));
  ASSERT_EQ(csv.size(), 6u);
  EXPECT_EQ(csv[0].node, "n2");
  EXPECT_EQ(csv[0].cause, "Faulty GPU");
  EXPECT_FALSE(csv[0].repairHours.has_value());
  EXPECT_EQ(csv[2].repairHours, 2.0);

  test::TempDir dir;
  const auto path = dir.path() / "trace.json";
  std::ofstream(path) << R"({"events": [{"at_hours": 2, "node": 1, "cause": "NIC"},
                                        {"at_hours": 1, "node": "n0", "repair_hours": 3}]})";
  const auto json = loadFailureTrace(path);
  ASSERT_EQ(json.size(), 2u);
  EXPECT_EQ(json[0].node, "n0");  // sorted by time
  EXPECT_EQ(json[1].node, "1");

  const auto bad = dir.path() / "bad.csv";
  std::ofstream(bad) << "time_hours,node\n-1,n0\n";
  try {
    loadFailureTrace(bad);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("bad.csv:2 time_hours = -1: expected a non-negative number"));
  }
}

}  // namespace
}  // namespace stretch::sim
