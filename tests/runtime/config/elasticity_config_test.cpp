#include "runtime/config/elasticity_config.hpp"

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/common/error.hpp"
#include "runtime/config/ds_config.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::config {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr const char* kRequired = R"("enabled": true, "max_train_batch_size": 2000,
                                     "micro_batch_sizes": [2, 4, 6])";

ElasticityConfig section(const std::string& body) {
  return parseElasticitySection("{" + body + "}", "DEEPSPEED_ELASTICITY_CONFIG");
}

// The ElasticityConfigError message for a section body ("" and a failure if none).
std::string sectionErrorOf(const std::string& body) {
  try {
    section(body);
  } catch (const ElasticityConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an ElasticityConfigError for: " << body;
  return {};
}

TEST(ElasticityConfigTest, VersionNames) {
  EXPECT_EQ(toString(ElasticityVersion::V0_1), "0.1");
  EXPECT_EQ(toString(ElasticityVersion::V0_2), "0.2");
  EXPECT_EQ(toString(ElasticityVersion::Exact), "exact");
}

TEST(ElasticityConfigTest, DisabledSectionKeepsDeepSpeedDefaults) {
  EXPECT_EQ(section(""), ElasticityConfig{});
  const ElasticityConfig c = section(R"("enabled": false)");
  EXPECT_EQ(c.maxTrainBatchSize, 2000);
  EXPECT_EQ(c.microBatchSizes, (std::vector<std::int64_t>{2, 4, 6}));
  EXPECT_EQ(c.maxGpus, 10000);
  EXPECT_TRUE(c.preferLargerBatch);
}

TEST(ElasticityConfigTest, DeepSpeedFormatExampleParses) {
  const ElasticityConfig c = section(R"("enabled": true, "max_train_batch_size": 2000,
      "micro_batch_sizes": [2,4,6], "min_gpus": 1, "max_gpus": 10000, "min_time": 20,
      "prefer_larger_batch": true, "ignore_non_elastic_batch_info": false, "version": 0.1)");
  EXPECT_TRUE(c.enabled);
  EXPECT_EQ(c.version, ElasticityVersion::V0_1);
  EXPECT_EQ(c.minTime, 20.0);
}

TEST(ElasticityConfigTest, AcceptedVersionForms) {
  const std::string base = std::string(kRequired) + ", \"version\": ";
  EXPECT_EQ(section(base + "0.1").version, ElasticityVersion::V0_1);
  EXPECT_EQ(section(base + "\"0.1\"").version, ElasticityVersion::V0_1);
  EXPECT_EQ(section(base + "0.10").version, ElasticityVersion::V0_1);
  EXPECT_EQ(section(base + "0.2").version, ElasticityVersion::V0_2);
  EXPECT_EQ(section(base + "\"0.2\"").version, ElasticityVersion::V0_2);
  EXPECT_EQ(section(base + "\"exact\"").version, ElasticityVersion::Exact);
  EXPECT_EQ(section(kRequired).version, ElasticityVersion::V0_2);
}

TEST(ElasticityConfigTest, NewerVersionsQuoteDeepSpeedsMessage) {
  const std::string base = std::string(kRequired) + ", \"version\": ";
  EXPECT_THAT(sectionErrorOf(base + "0.3"),
              AllOf(HasSubstr("elasticity.version = 0.3: expected"),
                    HasSubstr("attempting to run elasticity version 0.3 but runtime only "
                              "supports up to 0.2")));
  EXPECT_THAT(sectionErrorOf(base + "1"), HasSubstr("elasticity version 1 but"));
  EXPECT_THAT(sectionErrorOf(base + "\"0.3\""), HasSubstr("elasticity version 0.3 but"));
}

TEST(ElasticityConfigTest, OtherVersionsListTheAcceptedValues) {
  const std::string base = std::string(kRequired) + ", \"version\": ";
  for (const char* bad : {"0.15", "0.0", "-1", "\"abc\"", "true", "null", "[0.1]", "\"nan\"",
                          "\"inf\"", "\"0.1 \"", "\"Exact\""}) {
    EXPECT_THAT(sectionErrorOf(base + bad),
                AllOf(HasSubstr("elasticity.version = "),
                      HasSubstr("expected 0.1, 0.2, \"0.1\", \"0.2\" or \"exact\""),
                      ::testing::Not(HasSubstr("attempting"))))
        << bad;
  }
}

TEST(ElasticityConfigTest, MicroBatchSizesAreStrict) {
  const std::string head =
      R"("enabled": true, "max_train_batch_size": 2000, "micro_batch_sizes": )";
  EXPECT_THAT(sectionErrorOf(head + "[]"), HasSubstr("elasticity.micro_batch_sizes = []"));
  EXPECT_THAT(sectionErrorOf(head + "[2, 4, -1]"),
              HasSubstr("elasticity.micro_batch_sizes[2] = -1: expected a positive integer"));
  EXPECT_THAT(sectionErrorOf(head + "[true]"), HasSubstr("elasticity.micro_batch_sizes[0] = true"));
  EXPECT_THAT(sectionErrorOf(head + "[2, 4.0]"),
              HasSubstr("elasticity.micro_batch_sizes[1] = 4.0"));
  EXPECT_THAT(sectionErrorOf(head + "[\"2\"]"),
              HasSubstr("elasticity.micro_batch_sizes[0] = \"2\""));
  EXPECT_THAT(sectionErrorOf(head + "[2199023255552]"), HasSubstr("at most 1099511627776"));

  std::string list = "[1";
  for (std::size_t i = 1; i < kMaxMicroBatchCount; ++i) {
    list += ",1";
  }
  EXPECT_EQ(section(head + list + "]").microBatchSizes.size(), kMaxMicroBatchCount);
  EXPECT_THAT(sectionErrorOf(head + list + ",1]"), HasSubstr("at most 1024 micro batch sizes"));
}

TEST(ElasticityConfigTest, ValidationFollowsDeepSpeedsOrder) {
  // Both required keys missing: max_train_batch_size is reported first.
  EXPECT_THAT(sectionErrorOf(R"("enabled": true)"),
              HasSubstr("Elasticity config missing max_train_batch_size"));
  // Micro batches before GPU counts, GPU counts before model parallelism, ... min_time last: of
  // a section's faults, the one DeepSpeed checks first is reported.
  const std::pair<const char*, const char*> cases[] = {
      {R"("micro_batch_sizes": [0], "min_gpus": 0)", "micro_batch_sizes[0]"},
      {R"("micro_batch_sizes": [1], "min_gpus": 0, "model_parallel_size": 0)",
       "elasticity.min_gpus = 0"},
      {R"("micro_batch_sizes": [1], "min_gpus": 9, "max_gpus": 8)",
       "min_gpus <= max_gpus (given min_gpus: 9, max_gpus: 8)"},
      {R"("micro_batch_sizes": [1], "max_gpus": 0)", "elasticity.max_gpus = 0"},
      {R"("micro_batch_sizes": [1], "model_parallel_size": 0, "num_gpus_per_node": 0)",
       "elasticity.model_parallel_size = 0"},
      {R"("micro_batch_sizes": [1], "num_gpus_per_node": 0, "min_time": -1)",
       "elasticity.num_gpus_per_node = 0"},
      {R"("micro_batch_sizes": [1], "min_time": -0.5, "version": 7)", "elasticity.min_time = -0.5"},
  };
  for (const auto& [faults, reported] : cases) {
    EXPECT_THAT(
        sectionErrorOf(std::string(R"("enabled": true, "max_train_batch_size": 10, )") + faults),
        HasSubstr(reported));
  }
  EXPECT_THAT(
      sectionErrorOf(R"("enabled": true, "max_train_batch_size": 0, "micro_batch_sizes": [1])"),
      HasSubstr("elasticity.max_train_batch_size = 0: expected an integer in [1, "));
  EXPECT_THAT(sectionErrorOf(R"("enabled": 1)"),
              HasSubstr("elasticity.enabled = 1: expected true or false"));
  EXPECT_THAT(sectionErrorOf(std::string(kRequired) + R"(, "prefer_larger_batch": "yes")"),
              HasSubstr("elasticity.prefer_larger_batch = \"yes\""));
}

TEST(ElasticityConfigTest, ExactOnlyKeys) {
  const ElasticityConfig c = section(std::string(kRequired) +
                                     R"(, "version": "exact", "target_batch_size": 1500,
                                         "batch_tolerance": 0.25)");
  EXPECT_EQ(c.targetBatchSize, 1500);
  EXPECT_EQ(c.batchTolerance, 0.25);
  EXPECT_THAT(
      sectionErrorOf(std::string(kRequired) + R"(, "batch_tolerance": 0.1, "version": 0.1)"),
      HasSubstr("elasticity.batch_tolerance = 0.1: expected no batch_tolerance with "
                "version 0.1: it is a Stretch key that only version \"exact\" reads"));
  EXPECT_THAT(
      sectionErrorOf(std::string(kRequired) + R"(, "version": "exact", "batch_tolerance": -0.1)"),
      HasSubstr("elasticity.batch_tolerance = -0.1: expected a number in [0, 1)"));
  EXPECT_THAT(
      sectionErrorOf(std::string(kRequired) + R"(, "version": "exact", "target_batch_size": 0)"),
      HasSubstr("elasticity.target_batch_size = 0"));
}

TEST(ElasticityConfigTest, WarningsOverloadReportsTheDocumentedTypo) {
  std::vector<std::string> warnings;
  parseElasticitySection(R"({"prefer_large_batch": false})", "env", warnings);
  ASSERT_EQ(warnings.size(), 1U);
  EXPECT_THAT(warnings[0],
              HasSubstr("elasticity.prefer_large_batch (did you mean \"prefer_larger_batch\"?)"));
}

TEST(ElasticityConfigTest, AWholeConfigInTheSchedulersVariableIsReadForItsSection) {
  const ElasticityConfig section = parseElasticitySection(
      R"({"train_batch_size": 2, "elasticity": {"enabled": true, "max_train_batch_size": 27,
          "micro_batch_sizes": [1, 2]}})",
      "DEEPSPEED_ELASTICITY_CONFIG");
  EXPECT_EQ(section.maxTrainBatchSize, 27);
  EXPECT_EQ(section.microBatchSizes, (std::vector<std::int64_t>{1, 2}));
}

TEST(ElasticityConfigTest, MalformedJsonIsAConfigError) {
  try {
    parseElasticitySection("{\"enabled\": true,, }", "DEEPSPEED_ELASTICITY_CONFIG");
    FAIL();
  } catch (const ElasticityConfigError&) {
    FAIL() << "malformed JSON must be a plain ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("DEEPSPEED_ELASTICITY_CONFIG:1:"));
  }
  EXPECT_THROW(parseElasticitySection("[]", "env"), ConfigError);
  EXPECT_THAT(
      [] {
        try {
          parseElasticitySection(R"({"enabled": true, "enabled": false})", "env");
        } catch (const ConfigError& e) {
          return std::string(e.what());
        }
        return std::string();
      }(),
      HasSubstr("duplicate key \"enabled\" at elasticity.enabled"));
}

// DeepSpeed's compute_elastic_config cases: those that fail in ElasticityConfig (or on the
// version) must fail here too; the rest are the solver's business and must parse.
TEST(ElasticityConfigTest, AgreesWithDeepSpeedOnConfigValidationCases) {
  const auto cases = nlohmann::json::parse(test::readFile(
      test::fixturePath("elasticity/deepspeed_cases.json")))["compute_elastic_config_cases"];
  ASSERT_FALSE(cases.empty());
  const std::vector<std::string> configPrefixes = {
      "Elasticity config missing",  "Elasticity expected",
      "Elasticity min/max gpus",    "Elasticity min_gpus cannot",
      "Model-Parallel size cannot", "Number of GPUs per node cannot",
      "Elasticity min time",        "Attempting to run elasticity version"};
  int rejected = 0;
  for (const auto& c : cases) {
    const std::string text = c["config"].dump();
    SCOPED_TRACE(text);
    const auto& expected = c["expected"];
    const std::string message = expected.value("message", "");
    bool configError = false;
    if (expected.value("expected_error", "") == "ElasticityConfigError") {
      for (const std::string& prefix : configPrefixes) {
        configError = configError || message.rfind(prefix, 0) == 0;
      }
    }
    // These configs carry no batch keys (DeepSpeed's elastic unit tests), so only the
    // elasticity section decides.
    if (configError) {
      EXPECT_THROW(parseConfig(text), ElasticityConfigError);
      ++rejected;
    } else {
      EXPECT_NO_THROW(parseConfig(text));
    }
  }
  EXPECT_GE(rejected, 8);
}

}  // namespace
}  // namespace stretch::config
