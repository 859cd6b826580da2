// The lr schedules against DeepSpeed: every table DeepSpeed's own lr_schedules.py recorded
// (fixtures/engine/lr_samples.txt, HEAD and v0.18.2) reproduced value for value; the formulas of
// deepspeed_engine.md section 3.2 restated independently (oracles below) and compared to 1e-12 on
// random configs; config errors; state save/load; warnings.
//
// The recorded values are printed with 10 significant digits ("%.10g"), so a table row matches
// when our value printed the same way is the same string: that is exact at the recorded precision.

#include "runtime/engine/lr_schedules.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <numbers>
#include <optional>
#include <rapidcheck.h>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "runtime/common/error.hpp"
#include "runtime/config/ds_config.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/test_support.hpp"
#include "tests/support/text_support.hpp"

namespace stretch::engine {
namespace {

using config::Params;
using config::SchedulerConfig;
using test::trim;
using ::testing::HasSubstr;

// ---- The recorded tables ------------------------------------------------------------------------

struct Row {
  int k = 0;
  std::int64_t t = 0;
  std::string lr;
  std::optional<std::string> beta1;
};

struct Table {
  std::string version;  // "head" or "v0182"
  std::string title;    // spaces collapsed
  std::vector<Row> rows;
};

std::string collapseSpaces(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == ' ' && !out.empty() && out.back() == ' ') {
      continue;
    }
    out += c;
  }
  return trim(out);
}

std::vector<Table> parseLrSamples(const std::string& text) {
  std::vector<Table> tables;
  std::string version;
  for (const std::string& line : test::trimmedLines(text)) {
    if (line.starts_with("k(")) {
      continue;
    }
    if (line.starts_with("================")) {
      version = trim(line.substr(line.find(' '), line.rfind(' ') - line.find(' ')));
      continue;
    }
    if (line.starts_with("### ")) {
      tables.push_back(Table{version, collapseSpaces(line.substr(4)), {}});
      continue;
    }
    const auto parts = test::trimmedFields(line, '|');
    if (tables.empty() || (parts.size() != 3 && parts.size() != 4)) {
      ADD_FAILURE() << "unexpected line in lr_samples.txt: " << line;
      continue;
    }
    Row row;
    row.k = std::stoi(parts[0]);
    row.t = std::stoll(parts[1]);
    row.lr = parts[2];
    if (parts.size() == 4) {
      row.beta1 = parts[3];
    }
    tables.back().rows.push_back(row);
  }
  return tables;
}

std::string g10(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.10g", v);
  return buffer;
}

// The configs the tables were recorded with (titles as in the file, spaces collapsed).
struct SampleConfig {
  SchedulerConfig config;
  double optimizerLr = 0.5;  // a value no table expects unless the schedule reads it
};

const std::map<std::string, SampleConfig>& sampleConfigs() {
  static const std::map<std::string, SampleConfig> configs = {
      {"WarmupLR log min=0 max=1e-3 warmup=10",
       {{"WarmupLR", Params{{"warmup_min_lr", std::int64_t{0}},
                            {"warmup_max_lr", 1e-3},
                            {"warmup_num_steps", std::int64_t{10}},
                            {"warmup_type", std::string("log")}}}}},
      {"WarmupLR linear min=0 max=1e-3 warmup=10",
       {{"WarmupLR", Params{{"warmup_min_lr", std::int64_t{0}},
                            {"warmup_max_lr", 1e-3},
                            {"warmup_num_steps", std::int64_t{10}},
                            {"warmup_type", std::string("linear")}}}}},
      {"WarmupDecayLR linear total=20 warmup=5 min=0 max=1e-3",
       {{"WarmupDecayLR", Params{{"total_num_steps", std::int64_t{20}},
                                 {"warmup_min_lr", std::int64_t{0}},
                                 {"warmup_max_lr", 1e-3},
                                 {"warmup_num_steps", std::int64_t{5}},
                                 {"warmup_type", std::string("linear")}}}}},
      {"WarmupDecayLR log total=20 warmup=5 min=0 max=1e-3",
       {{"WarmupDecayLR", Params{{"total_num_steps", std::int64_t{20}},
                                 {"warmup_min_lr", std::int64_t{0}},
                                 {"warmup_max_lr", 1e-3},
                                 {"warmup_num_steps", std::int64_t{5}},
                                 {"warmup_type", std::string("log")}}}}},
      {"WarmupCosineLR linear base_lr=1e-3 total=20 warmup=5 warmup_min_ratio=0 "
       "cos_min_ratio=1e-4",
       {{"WarmupCosineLR", Params{{"total_num_steps", std::int64_t{20}},
                                  {"warmup_num_steps", std::int64_t{5}},
                                  {"warmup_min_ratio", std::int64_t{0}},
                                  {"cos_min_ratio", 1e-4},
                                  {"warmup_type", std::string("linear")}}},
        1e-3}},
      {"WarmupCosineLR log base_lr=1e-3 total=20 warmup=5 warmup_min_ratio=0.1 "
       "cos_min_ratio=1e-4",
       {{"WarmupCosineLR", Params{{"total_num_steps", std::int64_t{20}},
                                  {"warmup_num_steps", std::int64_t{5}},
                                  {"warmup_min_ratio", 0.1},
                                  {"cos_min_ratio", 1e-4},
                                  {"warmup_type", std::string("log")}}},
        1e-3}},
      {"OneCycle min=1e-4 max=1e-3 first=4 second=4 decay_lr_rate=0.5 decay_step_size=2 mom "
       "0.85..0.95",
       {{"OneCycle", Params{{"cycle_min_lr", 1e-4},
                            {"cycle_max_lr", 1e-3},
                            {"cycle_first_step_size", std::int64_t{4}},
                            {"cycle_second_step_size", std::int64_t{4}},
                            {"decay_lr_rate", 0.5},
                            {"decay_step_size", std::int64_t{2}},
                            {"cycle_min_mom", 0.85},
                            {"cycle_max_mom", 0.95}}}}},
      {"OneCycle stairs: min=1e-4 max=1e-3 first=4 second=4 first_stair_count=2 (decay off)",
       {{"OneCycle", Params{{"cycle_min_lr", 1e-4},
                            {"cycle_max_lr", 1e-3},
                            {"cycle_first_step_size", std::int64_t{4}},
                            {"cycle_second_step_size", std::int64_t{4}},
                            {"cycle_first_stair_count", std::int64_t{2}}}}}},
      {"LRRangeTest continuous min=1e-3 step_size=4 step_rate=1.0",
       {{"LRRangeTest", Params{{"lr_range_test_min_lr", 1e-3},
                               {"lr_range_test_step_size", std::int64_t{4}},
                               {"lr_range_test_step_rate", 1.0}}}}},
      {"LRRangeTest staircase min=1e-3 step_size=4 step_rate=1.0",
       {{"LRRangeTest", Params{{"lr_range_test_min_lr", 1e-3},
                               {"lr_range_test_step_size", std::int64_t{4}},
                               {"lr_range_test_step_rate", 1.0},
                               {"lr_range_test_staircase", true}}}}},
  };
  return configs;
}

LrFormulas formulasOf(const std::string& version) {
  return version == "v0182" ? LrFormulas::kV0_18_2 : LrFormulas::kHead;
}

TEST(LrSchedulesSamples, ReproducesEveryRecordedTable) {
  const auto tables = parseLrSamples(test::readFile(test::fixturePath("engine/lr_samples.txt")));
  ASSERT_EQ(tables.size(), 20u) << "10 tables for HEAD and 10 for v0.18.2";
  std::set<std::pair<std::string, std::string>> seen;
  int rows = 0;
  for (const Table& table : tables) {
    SCOPED_TRACE(table.version + " / " + table.title);
    const auto it = sampleConfigs().find(table.title);
    ASSERT_NE(it, sampleConfigs().end()) << "no config for this table";
    seen.emplace(table.version, table.title);
    for (const int groups : {1, 3}) {
      auto schedule = makeLrSchedule(it->second.config, groups, it->second.optimizerLr,
                                     {formulasOf(table.version), true});
      ASSERT_FALSE(table.rows.empty());
      for (std::size_t i = 0; i < table.rows.size(); ++i) {
        const Row& row = table.rows[i];
        ASSERT_EQ(row.k, static_cast<int>(i)) << "rows are consecutive step counts";
        if (i > 0) {
          const auto returned = schedule->step();
          EXPECT_EQ(returned, schedule->getLastLr());
        }
        SCOPED_TRACE("k=" + std::to_string(row.k));
        EXPECT_EQ(schedule->lastBatchIteration(), row.t);
        ASSERT_EQ(schedule->getLastLr().size(), static_cast<std::size_t>(groups));
        for (const double lr : schedule->getLastLr()) {
          EXPECT_EQ(g10(lr), row.lr) << "lr " << lr;
        }
        if (row.beta1) {
          ASSERT_TRUE(schedule->cyclesMomentum());
          ASSERT_EQ(schedule->getLastMomentum().size(), static_cast<std::size_t>(groups));
          for (const Betas& betas : schedule->getLastMomentum()) {
            EXPECT_EQ(g10(betas.beta1), *row.beta1) << "beta1 " << betas.beta1;
            EXPECT_EQ(betas.beta2, 0.99);
          }
        }
        rows += groups == 1 ? 1 : 0;
      }
    }
  }
  EXPECT_EQ(seen.size(), 2 * sampleConfigs().size()) << "every config is recorded for both";
  std::cout << "reproduced " << rows << " recorded rows from " << tables.size() << " tables\n";
}

// Section 3.3 of the reference: WarmupLR(AdamW(lr=3e-4), W=4, linear) with max omitted, run
// with real torch 1.13.
TEST(LrSchedules, WarmupLrWithoutMaxUsesTheOptimizerLr) {
  auto schedule = makeLrSchedule(
      {"WarmupLR", {{"warmup_num_steps", std::int64_t{4}}, {"warmup_type", std::string("linear")}}},
      1, 3e-4);
  const std::vector<double> expected = {0, 0, 7.5e-5, 1.5e-4, 2.25e-4, 3e-4, 3e-4};
  for (std::size_t k = 0; k < expected.size(); ++k) {
    if (k > 0) {
      schedule->step();
    }
    EXPECT_NEAR(schedule->getLastLr()[0], expected[k], 1e-12 * expected[k] + 1e-15) << k;
  }
}

TEST(LrSchedules, WarmupLrWithoutMaxTakesTheFirstGroupsLrForEveryGroup) {
  const std::vector<double> groupLrs = {3e-4, 1e-2};
  auto schedule = makeLrSchedule(
      {"WarmupLR", {{"warmup_num_steps", std::int64_t{2}}, {"warmup_type", std::string("linear")}}},
      groupLrs);
  for (int k = 0; k < 4; ++k) {
    schedule->step();
  }
  EXPECT_EQ(schedule->getLastLr(), (std::vector<double>{3e-4, 3e-4}));
}

TEST(LrSchedules, PerGroupListsApplyPerGroup) {
  auto warmup = makeLrSchedule({"WarmupDecayLR",
                                {{"total_num_steps", std::int64_t{10}},
                                 {"warmup_num_steps", std::int64_t{4}},
                                 {"warmup_type", std::string("linear")},
                                 {"warmup_min_lr", std::vector<double>{0.0, 1e-4}},
                                 {"warmup_max_lr", std::vector<double>{1e-3, 2e-3}}}},
                               2, 0.1);
  EXPECT_EQ(warmup->getLastLr(), (std::vector<double>{0.0, 1e-4}));
  warmup->stepTo(2);  // gamma = 2/4
  EXPECT_DOUBLE_EQ(warmup->getLastLr()[0], 0.5e-3);
  EXPECT_DOUBLE_EQ(warmup->getLastLr()[1], 1e-4 + 0.5 * 1.9e-3);
  warmup->stepTo(10);  // T: back to min
  EXPECT_EQ(warmup->getLastLr(), (std::vector<double>{0.0, 1e-4}));

  auto range = makeLrSchedule({"LRRangeTest",
                               {{"lr_range_test_min_lr", std::vector<double>{1e-3, 1e-2}},
                                {"lr_range_test_step_size", std::int64_t{2}}}},
                              2, 0.1);
  range->stepTo(3);  // interval 2
  EXPECT_DOUBLE_EQ(range->getLastLr()[0], 3e-3);
  EXPECT_DOUBLE_EQ(range->getLastLr()[1], 3e-2);

  const std::vector<double> bases = {1e-3, 4e-3};
  auto cosine = makeLrSchedule(
      {"WarmupCosineLR",
       {{"total_num_steps", std::int64_t{20}}, {"warmup_num_steps", std::int64_t{5}}}},
      bases);
  for (int k = 0; k < 12; ++k) {
    cosine->step();
    EXPECT_DOUBLE_EQ(cosine->getLastLr()[1], 4 * cosine->getLastLr()[0]);
  }
}

TEST(LrSchedules, ResumedScheduleWritesNothingUntilItsFirstStep) {
  auto schedule = makeLrSchedule({"WarmupLR",
                                  {{"warmup_max_lr", 1e-3},
                                   {"warmup_num_steps", std::int64_t{10}},
                                   {"warmup_type", std::string("linear")},
                                   {"last_batch_iteration", std::int64_t{4}}}},
                                 1, 0.1);
  EXPECT_EQ(schedule->lastBatchIteration(), 4);
  EXPECT_TRUE(schedule->getLastLr().empty());
  EXPECT_DOUBLE_EQ(schedule->getLr()[0], 4e-4);
  EXPECT_DOUBLE_EQ(schedule->step()[0], 5e-4);

  auto cycle = makeLrSchedule(
      {"OneCycle",
       {{"cycle_min_lr", 1e-4}, {"cycle_max_lr", 1e-3}, {"last_batch_iteration", std::int64_t{3}}}},
      1, 0.1);
  EXPECT_TRUE(cycle->getLastLr().empty());
  EXPECT_TRUE(cycle->getLastMomentum().empty());
  cycle->step();
  EXPECT_EQ(cycle->getLastMomentum().size(), 1u);
}

TEST(LrSchedules, StateSaveLoadContinuesIdentically) {
  for (const auto& [title, sample] : sampleConfigs()) {
    SCOPED_TRACE(title);
    auto original = makeLrSchedule(sample.config, 2, sample.optimizerLr);
    for (int k = 0; k < 7; ++k) {
      original->step();
    }
    const LrScheduleState saved = original->state();
    EXPECT_EQ(saved.lastBatchIteration, 6);
    auto resumed = makeLrSchedule(sample.config, 2, sample.optimizerLr);
    resumed->loadState(saved);
    EXPECT_EQ(resumed->state(), saved);
    for (int k = 0; k < 12; ++k) {
      EXPECT_EQ(resumed->step(), original->step()) << k;
      EXPECT_EQ(resumed->getLastMomentum(), original->getLastMomentum()) << k;
    }
  }
}

TEST(LrSchedules, LoadStateRejectsAnIterationBelowMinusOne) {
  auto schedule = makeLrSchedule({"WarmupLR", {}}, 1, 1e-3);
  EXPECT_EQ(test::errorOf<ConfigError>([&] { schedule->loadState(LrScheduleState{-2}); }),
            "lr_scheduler.last_batch_iteration = -2: expected an integer >= -1");
}

TEST(LrSchedules, StepToMatchesRepeatedSteps) {
  for (const auto& [title, sample] : sampleConfigs()) {
    SCOPED_TRACE(title);
    auto stepped = makeLrSchedule(sample.config, 1, sample.optimizerLr);
    auto jumped = makeLrSchedule(sample.config, 1, sample.optimizerLr);
    for (std::int64_t t = 0; t < 30; ++t) {
      stepped->step();
      EXPECT_EQ(jumped->stepTo(t), stepped->getLastLr());
      EXPECT_EQ(jumped->getLastMomentum(), stepped->getLastMomentum());
    }
  }
}

TEST(LrSchedules, WarmupCosineAtHeadSurvivesTotalEqualToWarmup) {
  auto schedule = makeLrSchedule(
      {"WarmupCosineLR",
       {{"total_num_steps", std::int64_t{5}}, {"warmup_num_steps", std::int64_t{5}}}},
      1, 1e-3);
  for (int k = 0; k < 12; ++k) {
    schedule->step();
  }
  EXPECT_DOUBLE_EQ(schedule->getLastLr()[0], 1e-3 * 1e-4);
  ASSERT_EQ(schedule->warnings().size(), 0u);
}

TEST(LrSchedules, OneCycleWithoutBetasDoesNotCycleMomentum) {
  LrScheduleOptions options;
  options.optimizerHasBetas = false;
  auto schedule = makeLrSchedule({"OneCycle", {{"cycle_min_lr", 1e-4}, {"cycle_max_lr", 1e-3}}}, 1,
                                 0.1, options);
  EXPECT_FALSE(schedule->cyclesMomentum());
  EXPECT_TRUE(schedule->getLastMomentum().empty());
  schedule->step();
  EXPECT_TRUE(schedule->getLastMomentum().empty());
  ASSERT_EQ(schedule->warnings().size(), 1u);
  EXPECT_THAT(schedule->warnings()[0], HasSubstr("cycle_momentum is disabled"));

  auto off = makeLrSchedule(
      {"OneCycle", {{"cycle_min_lr", 1e-4}, {"cycle_max_lr", 1e-3}, {"cycle_momentum", false}}}, 1,
      0.1);
  EXPECT_FALSE(off->cyclesMomentum());
  EXPECT_TRUE(off->warnings().empty());
}

TEST(LrSchedules, OneCycleDefaultsAndMomentumDecay) {
  // cycle_second_step_size defaults to the first; decay of momentum after the cycle.
  auto schedule = makeLrSchedule({"OneCycle",
                                  {{"cycle_min_lr", 1e-4},
                                   {"cycle_max_lr", 1e-3},
                                   {"cycle_first_step_size", std::int64_t{2}},
                                   {"decay_step_size", std::int64_t{1}},
                                   {"decay_mom_rate", 0.1}}},
                                 1, 0.1);
  EXPECT_EQ(schedule->getLastMomentum()[0], (Betas{0.8, 0.99}));
  schedule->stepTo(1);  // peak
  EXPECT_DOUBLE_EQ(schedule->getLastLr()[0], 1e-3);
  EXPECT_DOUBLE_EQ(schedule->getLastMomentum()[0].beta1, 0.8);
  schedule->stepTo(5);  // d = 2: lr decay off (rate 0), beta1 = 0.9 * (1 + 0.1 * 2)
  EXPECT_DOUBLE_EQ(schedule->getLastLr()[0], 1e-4);
  EXPECT_DOUBLE_EQ(schedule->getLastMomentum()[0].beta1, 0.9 * 1.2);
}

TEST(LrSchedules, WarningsAsDeepSpeedLogsThem) {
  auto unknownType = makeLrSchedule({"WarmupLR",
                                     {{"warmup_max_lr", 1e-3},
                                      {"warmup_num_steps", std::int64_t{10}},
                                      {"warmup_type", std::string("cosine")}}},
                                    1, 0.1);
  ASSERT_EQ(unknownType->warnings().size(), 1u);
  EXPECT_THAT(unknownType->warnings()[0], HasSubstr("Using unknown warmup_type: cosine"));
  unknownType->stepTo(1);  // log: log(2)/log(10)
  EXPECT_DOUBLE_EQ(unknownType->getLastLr()[0], 1e-3 * std::log(2.0) / std::log(10.0));

  auto shortDecay = makeLrSchedule(
      {"WarmupDecayLR",
       {{"total_num_steps", std::int64_t{3}}, {"warmup_num_steps", std::int64_t{10}}}},
      1, 0.1);
  ASSERT_EQ(shortDecay->warnings().size(), 1u);
  EXPECT_EQ(shortDecay->warnings()[0], "total_num_steps 3 is less than warmup_num_steps 10");
}

// ---- Config errors ------------------------------------------------------------------------------

std::string errorOf(const SchedulerConfig& config, int groups = 1, LrScheduleOptions options = {}) {
  return test::errorOf<ConfigError>([&] { makeLrSchedule(config, groups, 1e-3, options); });
}

TEST(LrScheduleConfig, UnknownTypeListsTheFiveNames) {
  const std::string message = errorOf({"WarmupLr", {}});
  EXPECT_THAT(message, HasSubstr("scheduler.type = \"WarmupLr\": expected one of LRRangeTest, "
                                 "OneCycle, WarmupLR, WarmupDecayLR, WarmupCosineLR"));
  EXPECT_THAT(message, HasSubstr("did you mean \"WarmupLR\""));
  EXPECT_THAT(errorOf({"StepLR", {}}), HasSubstr("torch.optim.lr_scheduler"));
}

TEST(LrScheduleConfig, ErrorsNameTheKeyTheValueAndWhatWasExpected) {
  EXPECT_EQ(errorOf({"WarmupLR", {{"warmup_num_steps", std::int64_t{-1}}}}),
            "scheduler.params.warmup_num_steps = -1: expected a positive integer");
  EXPECT_EQ(errorOf({"WarmupLR", {{"warmup_num_steps", std::int64_t{0}}}}),
            "scheduler.params.warmup_num_steps = 0: expected a positive integer");
  EXPECT_EQ(errorOf({"WarmupLR", {{"warmup_num_steps", 10.5}}}),
            "scheduler.params.warmup_num_steps = 10.5: expected a positive integer");
  EXPECT_EQ(errorOf({"WarmupLR", {{"warmup_num_steps", true}}}),
            "scheduler.params.warmup_num_steps = true: expected a positive integer");
  EXPECT_EQ(errorOf({"WarmupLR", {{"warmup_max_lr", std::string("0.001")}}}),
            "scheduler.params.warmup_max_lr = \"0.001\": expected a finite number >= 0 (a "
            "learning rate) or a list of 1 such numbers, one per parameter group");
  EXPECT_EQ(errorOf({"WarmupLR", {{"warmup_min_lr", -1e-3}}}),
            "scheduler.params.warmup_min_lr = -0.001: expected a finite number >= 0 (a learning "
            "rate) or a list of 1 such numbers, one per parameter group");
  EXPECT_EQ(errorOf({"WarmupLR", {{"warmup_type", std::int64_t{3}}}}),
            "scheduler.params.warmup_type = 3: expected a string, \"log\" or \"linear\"");
  EXPECT_EQ(errorOf({"WarmupLR", {{"last_batch_iteration", std::int64_t{-2}}}}),
            "scheduler.params.last_batch_iteration = -2: expected an integer >= -1");
  EXPECT_EQ(errorOf({"WarmupDecayLR", {{"total_num_steps", std::int64_t{-5}}}}),
            "scheduler.params.total_num_steps = -5: expected an integer >= 0");
  EXPECT_EQ(errorOf({"WarmupCosineLR",
                     {{"total_num_steps", std::int64_t{100}}, {"cos_min_ratio", -0.1}}}),
            "scheduler.params.cos_min_ratio = -0.1: expected a finite number >= 0 (one for all "
            "groups)");
  EXPECT_EQ(errorOf({"OneCycle",
                     {{"cycle_min_lr", 1e-4},
                      {"cycle_max_lr", 1e-3},
                      {"cycle_first_step_size", std::int64_t{0}}}}),
            "scheduler.params.cycle_first_step_size = 0: expected a number > 0 (training steps)");
  EXPECT_EQ(errorOf({"OneCycle",
                     {{"cycle_min_lr", 1e-4}, {"cycle_max_lr", 1e-3}, {"cycle_min_mom", 1.5}}}),
            "scheduler.params.cycle_min_mom = 1.5: expected a number in [0, 1) (beta1)");
  EXPECT_EQ(errorOf({"OneCycle",
                     {{"cycle_min_lr", 1e-4},
                      {"cycle_max_lr", 1e-3},
                      {"cycle_momentum", std::string("yes")}}}),
            "scheduler.params.cycle_momentum = \"yes\": expected true or false");
  EXPECT_EQ(errorOf({"OneCycle",
                     {{"cycle_min_lr", std::vector<double>{1e-4, 2e-4}}, {"cycle_max_lr", 1e-3}}},
                    2),
            "scheduler.params.cycle_min_lr = [0.0001, 0.0002]: expected a finite number >= 0 "
            "(a learning rate; OneCycle takes one value for all parameter groups)");
  EXPECT_EQ(errorOf({"LRRangeTest", {{"lr_range_test_step_size", 0.0}}}),
            "scheduler.params.lr_range_test_step_size = 0: expected a number > 0 (training "
            "steps)");
  EXPECT_EQ(errorOf({"OneCycle",
                     {{"cycle_min_lr", 1e-4},
                      {"cycle_max_lr", 1e-3},
                      {"cycle_second_stair_count", std::int64_t{-1}}}}),
            "scheduler.params.cycle_second_stair_count = -1: expected an integer >= 0 (0 = no "
            "stairs)");
}

TEST(LrScheduleConfig, PerGroupListsMustHaveOneValuePerGroup) {
  EXPECT_EQ(errorOf({"WarmupLR", {{"warmup_min_lr", std::vector<double>{0.0, 1e-4}}}}, 3),
            "scheduler.params.warmup_min_lr = [0, 0.0001]: expected a finite number >= 0 (a "
            "learning rate) or a list of 3 such numbers, one per parameter group");
  EXPECT_EQ(errorOf({"LRRangeTest", {{"lr_range_test_min_lr", std::vector<double>{1e-3}}}}, 2),
            "scheduler.params.lr_range_test_min_lr = [0.001]: expected a finite number >= 0 (a "
            "learning rate) or a list of 2 such numbers, one per parameter group");
}

TEST(LrScheduleConfig, MissingRequiredParams) {
  EXPECT_EQ(errorOf({"WarmupDecayLR", {}}),
            "scheduler.params.total_num_steps = (missing): expected an integer >= 0 (required)");
  EXPECT_EQ(errorOf({"WarmupCosineLR", {}}),
            "scheduler.params.total_num_steps = (missing): expected an integer >= 0 (required)");
  EXPECT_THAT(errorOf({"OneCycle", {{"cycle_max_lr", 1e-3}}}),
              HasSubstr("scheduler.params.cycle_min_lr = (missing): expected"));
  EXPECT_THAT(errorOf({"OneCycle", {{"cycle_min_lr", 1e-3}}}),
              HasSubstr("scheduler.params.cycle_max_lr = (missing): expected"));
}

TEST(LrScheduleConfig, UnknownKeysAreErrorsListingTheAcceptedOnes) {
  const std::string message = errorOf({"WarmupLR", {{"warmup_num_step", std::int64_t{10}}}});
  EXPECT_THAT(message,
              HasSubstr("scheduler.params.warmup_num_step = 10: expected a parameter of WarmupLR"));
  EXPECT_THAT(message, HasSubstr("accepted: warmup_min_lr, warmup_max_lr, warmup_num_steps, "
                                 "warmup_type, last_batch_iteration"));
  EXPECT_THAT(message, HasSubstr("did you mean \"warmup_num_steps\""));
  // total_num_steps belongs to WarmupDecayLR, not WarmupLR (DeepSpeed: TypeError).
  EXPECT_THAT(errorOf({"WarmupLR", {{"total_num_steps", std::int64_t{10}}}}),
              HasSubstr("scheduler.params.total_num_steps = 10: expected a parameter of WarmupLR"));
  EXPECT_THAT(
      errorOf({"OneCycle",
               {{"cycle_min_lr", 1e-4},
                {"cycle_max_lr", 1e-3},
                {"warmup_num_steps", std::int64_t{10}}}}),
      HasSubstr("scheduler.params.warmup_num_steps = 10: expected a parameter of OneCycle"));
}

TEST(LrScheduleConfig, ErrorDetailCarriesThePath) {
  try {
    makeLrSchedule({"LRRangeTest", {{"lr_range_test_step_rate", -1.0}}}, 1, 1e-3);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    ASSERT_TRUE(e.detail().has_value());
    EXPECT_EQ(e.detail()->path, "scheduler.params.lr_range_test_step_rate");
    EXPECT_EQ(e.detail()->value, "-1");
  }
}

TEST(LrScheduleConfig, V0182CosineRejectsTotalEqualToWarmup) {
  LrScheduleOptions options;
  options.formulas = LrFormulas::kV0_18_2;
  EXPECT_THAT(
      errorOf({"WarmupCosineLR",
               {{"total_num_steps", std::int64_t{5}}, {"warmup_num_steps", std::int64_t{5}}}},
              1, options),
      HasSubstr("scheduler.params.total_num_steps = 5: expected a value other than"));
}

TEST(LrScheduleConfig, IntegralFloatTotalIsAccepted) {
  auto schedule = makeLrSchedule({"WarmupDecayLR", {{"total_num_steps", 1e5}}}, 1, 1e-3);
  EXPECT_EQ(schedule->name(), "WarmupDecayLR");
  EXPECT_THAT(errorOf({"WarmupDecayLR", {{"total_num_steps", 10.5}}}),
              HasSubstr("scheduler.params.total_num_steps = 10.5: expected an integer >= 0"));
}

// ---- Properties: independent restatements of section 3.2 ----------------------------------------

bool close(double actual, double expected) {
  return std::fabs(actual - expected) <= 1e-12 * std::fabs(expected) + 1e-15;
}

double warmupGamma(std::int64_t t, std::int64_t w, bool log) {
  return log ? std::log(static_cast<double>(t + 1)) / std::log(static_cast<double>(w))
             : static_cast<double>(t) / static_cast<double>(w);
}

rc::Gen<double> lrGen() {
  return rc::gen::map(rc::gen::inRange(0, 100001), [](int i) { return i * 1e-7; });
}

RC_GTEST_PROP(LrSchedulesProperty, WarmupAndDecayMatchTheFormulas, ()) {
  const bool decay = *rc::gen::arbitrary<bool>();
  const bool log = *rc::gen::arbitrary<bool>();
  const double minLr = *lrGen();
  const double maxLr = *lrGen();
  const auto warmup = *rc::gen::inRange<std::int64_t>(1, 60);
  const auto total = *rc::gen::inRange<std::int64_t>(0, 120);
  Params params{{"warmup_min_lr", minLr},
                {"warmup_max_lr", maxLr},
                {"warmup_num_steps", warmup},
                {"warmup_type", std::string(log ? "log" : "linear")}};
  if (decay) {
    params.emplace("total_num_steps", total);
  }
  auto schedule = makeLrSchedule({decay ? "WarmupDecayLR" : "WarmupLR", params}, 1, 0.5);
  const std::int64_t w = std::max<std::int64_t>(2, warmup);
  for (std::int64_t t = -1; t < 200; ++t) {
    if (t >= 0) {
      schedule->step();
    }
    double expected = minLr;
    if (t >= 0 && t < w) {
      expected = minLr + (maxLr - minLr) * warmupGamma(t, w, log);
    } else if (t >= w) {
      expected = decay ? minLr + (maxLr - minLr) *
                                     std::max(0.0, static_cast<double>(total - t) /
                                                       static_cast<double>(
                                                           std::max<std::int64_t>(1, total - w)))
                       : maxLr;
    }
    RC_ASSERT(close(schedule->getLastLr()[0], expected));
  }
}

// The usual configuration, min <= max. (With min > max, DeepSpeed's own arithmetic can land a
// rounding error beyond max, e.g. -4e-19 for max = 0: not a property of the formula.)
RC_GTEST_PROP(LrSchedulesProperty, WarmupDecayNeverNegativeAndEndsAtMin, ()) {
  const double a = *lrGen();
  const double b = *lrGen();
  const double minLr = std::min(a, b);
  const double maxLr = std::max(a, b);
  const auto warmup = *rc::gen::inRange<std::int64_t>(1, 60);
  const auto total = *rc::gen::inRange<std::int64_t>(0, 120);
  const bool log = *rc::gen::arbitrary<bool>();
  auto schedule = makeLrSchedule({"WarmupDecayLR",
                                  {{"warmup_min_lr", minLr},
                                   {"warmup_max_lr", maxLr},
                                   {"warmup_num_steps", warmup},
                                   {"total_num_steps", total},
                                   {"warmup_type", std::string(log ? "log" : "linear")}}},
                                 1, 0.5);
  const std::int64_t end = std::max<std::int64_t>({total, warmup, 2});
  for (std::int64_t t = 0; t <= end + 20; ++t) {
    const double lr = schedule->step()[0];
    RC_ASSERT(lr >= 0.0);
    RC_ASSERT(lr >= minLr);
    RC_ASSERT(lr <= maxLr * (1 + 1e-15));
    if (t >= end) {
      RC_ASSERT(lr == minLr);
    }
  }
}

RC_GTEST_PROP(LrSchedulesProperty, WarmupCosineMatchesTheFormulaAndHoldsItsFloor, ()) {
  const bool log = *rc::gen::arbitrary<bool>();
  const double base = *lrGen();
  const double wmin = *rc::gen::inRange(0, 1001) * 1e-3;
  const double cmin = *rc::gen::inRange(0, 1001) * 1e-4;
  const auto warmup = *rc::gen::inRange<std::int64_t>(1, 60);
  const auto total = *rc::gen::inRange<std::int64_t>(0, 120);
  auto schedule = makeLrSchedule({"WarmupCosineLR",
                                  {{"total_num_steps", total},
                                   {"warmup_num_steps", warmup},
                                   {"warmup_min_ratio", wmin},
                                   {"cos_min_ratio", cmin},
                                   {"warmup_type", std::string(log ? "log" : "linear")}}},
                                 1, base);
  RC_ASSERT(schedule->getLastLr()[0] == 0.0);
  const std::int64_t w = std::max<std::int64_t>(2, warmup);
  for (std::int64_t t = 0; t < 200; ++t) {
    const double lr = schedule->step()[0];
    double ratio = 0.0;
    if (t < w) {
      ratio = wmin + (1 - wmin) * warmupGamma(t, w, log);
    } else {
      const double p = std::min(1.0, static_cast<double>(t - w + 1) /
                                         static_cast<double>(std::max<std::int64_t>(1, total - w)));
      ratio = std::max(0.0, cmin + (1 - cmin) * (1 + std::cos(std::numbers::pi * p)) / 2);
    }
    RC_ASSERT(close(lr, base * ratio));
    if (t >= w && t >= total - 1) {
      RC_ASSERT(lr == base * cmin);
    }
  }
}

RC_GTEST_PROP(LrSchedulesProperty, OneCycleMatchesTheFormula, ()) {
  // Integer step sizes: the cycle position is then exact integer arithmetic here.
  const auto s1 = *rc::gen::inRange<std::int64_t>(1, 30);
  const auto s2 = *rc::gen::inRange<std::int64_t>(0, 30);
  const auto n1 = *rc::gen::inRange<std::int64_t>(0, 6);
  const auto n2 = *rc::gen::inRange<std::int64_t>(0, 6);
  const auto decayStep = *rc::gen::inRange<std::int64_t>(0, 5);
  const double decayLr = *rc::gen::inRange(0, 11) * 0.1;
  const double decayMom = *rc::gen::inRange(0, 11) * 0.01;
  const double minLr = *lrGen();
  const double maxLr = *lrGen();
  const double minMom = *rc::gen::inRange(0, 99) * 0.01;
  const double maxMom = *rc::gen::inRange(0, 99) * 0.01;
  auto schedule = makeLrSchedule({"OneCycle",
                                  {{"cycle_min_lr", minLr},
                                   {"cycle_max_lr", maxLr},
                                   {"cycle_first_step_size", s1},
                                   {"cycle_second_step_size", s2},
                                   {"cycle_first_stair_count", n1},
                                   {"cycle_second_stair_count", n2},
                                   {"decay_step_size", decayStep},
                                   {"decay_lr_rate", decayLr},
                                   {"decay_mom_rate", decayMom},
                                   {"cycle_min_mom", minMom},
                                   {"cycle_max_mom", maxMom}}},
                                 1, 0.5);
  RC_ASSERT(schedule->getLastLr()[0] == minLr);
  RC_ASSERT(schedule->getLastMomentum()[0] == (Betas{minMom, 0.99}));
  const std::int64_t total = s1 + s2;
  for (std::int64_t t = 0; t < 3 * total + 10; ++t) {
    schedule->step();
    double lr = 0.0;
    double mom = 0.0;
    if (t < total) {
      const std::int64_t ci = (t + 1) % total;
      double sf = 0.0;
      if (ci <= s1) {
        sf = n1 > 0 ? static_cast<double>(ci * n1 / s1) / static_cast<double>(n1)
                    : static_cast<double>(ci) / static_cast<double>(s1);
      } else {
        sf = n2 > 0 ? static_cast<double>((total - ci) * n2 / s2) / static_cast<double>(n2)
                    : static_cast<double>(total - ci) / static_cast<double>(s2);
      }
      lr = minLr + (maxLr - minLr) * sf;
      mom = maxMom - (maxMom - minMom) * sf;
    } else {
      const double d = static_cast<double>(t - total + 1);
      lr = (decayStep == 0 || decayLr == 0.0)
               ? minLr
               : minLr / (1 + decayLr * d / static_cast<double>(decayStep));
      mom = (decayStep == 0 || decayMom == 0.0)
                ? maxMom
                : maxMom * (1 + decayMom * d / static_cast<double>(decayStep));
    }
    RC_ASSERT(close(schedule->getLastLr()[0], lr));
    RC_ASSERT(close(schedule->getLastMomentum()[0].beta1, mom));
    RC_ASSERT(schedule->getLastMomentum()[0].beta2 == 0.99);
  }
}

RC_GTEST_PROP(LrSchedulesProperty, LrRangeTestMatchesTheFormula, ()) {
  const double minLr = *lrGen();
  const auto size = *rc::gen::inRange<std::int64_t>(1, 20);
  const double rate = *rc::gen::inRange(0, 51) * 0.1;
  const bool staircase = *rc::gen::arbitrary<bool>();
  auto schedule = makeLrSchedule({"LRRangeTest",
                                  {{"lr_range_test_min_lr", minLr},
                                   {"lr_range_test_step_size", size},
                                   {"lr_range_test_step_rate", rate},
                                   {"lr_range_test_staircase", staircase}}},
                                 1, 0.5);
  RC_ASSERT(schedule->getLastLr()[0] == minLr);
  for (std::int64_t t = 0; t < 100; ++t) {
    const double interval = staircase ? static_cast<double>((t + 1) / size)
                                      : static_cast<double>(t + 1) / static_cast<double>(size);
    RC_ASSERT(close(schedule->step()[0], minLr * (1 + rate * interval)));
  }
}

RC_GTEST_PROP(LrSchedulesProperty, SaveLoadAtAnyPointContinuesIdentically, ()) {
  std::vector<std::string> titles;
  for (const auto& [title, sample] : sampleConfigs()) {
    titles.push_back(title);
  }
  const std::string title = *rc::gen::elementOf(titles);
  const int groups = *rc::gen::inRange(1, 4);
  const auto split = *rc::gen::inRange<std::int64_t>(0, 40);
  const auto after = *rc::gen::inRange<std::int64_t>(1, 40);
  const SampleConfig& sample = sampleConfigs().at(title);
  auto original = makeLrSchedule(sample.config, groups, sample.optimizerLr);
  for (std::int64_t k = 0; k < split; ++k) {
    original->step();
  }
  auto resumed = makeLrSchedule(sample.config, groups, sample.optimizerLr);
  resumed->loadState(original->state());
  RC_ASSERT(resumed->getLr() == original->getLr());
  for (std::int64_t k = 0; k < after; ++k) {
    RC_ASSERT(resumed->step() == original->step());
    RC_ASSERT(resumed->getLastMomentum() == original->getLastMomentum());
  }
}

}  // namespace
}  // namespace stretch::engine
