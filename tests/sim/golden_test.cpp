// Golden runs: the deterministic scenarios (no random draws: scripted faults, scale events, a
// replayed trace) must reproduce their committed agent event log (the JSON lines of
// `stretch sim --events`, the format of `stretch launch --event_log`) and metrics exactly.
// After an intended change, regenerate with STRETCH_UPDATE_GOLDEN=1 and review the diff.

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "runtime/agent/event_log.hpp"
#include "sim/monte_carlo.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::sim {
namespace {

std::filesystem::path goldenDir() {
  return test::sourceDir() / "tests" / "sim" / "golden";
}

bool updating() {
  const char* v = std::getenv("STRETCH_UPDATE_GOLDEN");
  return v != nullptr && std::string(v) == "1";
}

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, EventsAndMetricsMatchTheCommittedFiles) {
  const std::string name = GetParam();
  const Scenario s = loadScenario(test::fixturePath("scenarios/" + name + ".json"));
  std::ostringstream events;
  agent::EventLog log(events);
  RunOptions o;
  o.eventLog = &log;
  nlohmann::json metrics = runToJson(simulate(s, o));
  metrics.erase("wall_seconds");
  metrics.erase("agent_wall_seconds");
  const auto eventsPath = goldenDir() / (name + ".events.jsonl");
  const auto metricsPath = goldenDir() / (name + ".metrics.json");
  if (updating()) {
    std::filesystem::create_directories(goldenDir());
    std::ofstream(eventsPath, std::ios::binary) << events.str();
    std::ofstream(metricsPath, std::ios::binary) << metrics.dump(2) << "\n";
    GTEST_SKIP() << "golden files written: " << eventsPath << ", " << metricsPath;
  }
  EXPECT_EQ(events.str(), test::readFile(eventsPath)) << "agent events differ from " << eventsPath;
  const auto expected = nlohmann::json::parse(test::readFile(metricsPath));
  EXPECT_EQ(metrics, expected) << "got " << metrics.dump(2);
  // The step-level mode takes the same decisions at the same times.
  std::ostringstream stepEvents;
  agent::EventLog stepLog(stepEvents);
  RunOptions step;
  step.mode = SimMode::StepLevel;
  step.eventLog = &stepLog;
  Scenario shorter = s;
  if (shorter.job.horizonHours) {
    shorter.job.horizonHours = std::min(*shorter.job.horizonHours, 4.0);
  }
  const RunResult r = simulate(shorter, step);
  if (!s.job.horizonHours || *s.job.horizonHours <= 4.0) {
    EXPECT_EQ(stepEvents.str(), events.str());
  }
  EXPECT_GT(r.events, 0u);
}

INSTANTIATE_TEST_SUITE_P(Scenarios, Golden,
                         ::testing::Values("elastic_scale", "trace_replay", "sim_to_real_digits"));

}  // namespace
}  // namespace stretch::sim
