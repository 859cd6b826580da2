#include "runtime/config/ds_config.hpp"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/common/error.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::config {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// The message of the stretch::Error that parsing text throws ("" and a test failure if none).
std::string errorOf(const std::string& text) {
  try {
    parseConfig(text, "test.json");
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an error for: " << text;
  return {};
}

std::string nested(int arrays) {
  return "{\"wandb\": " + std::string(static_cast<std::size_t>(arrays), '[') +
         std::string(static_cast<std::size_t>(arrays), ']') + "}";
}

TEST(DsConfigTest, EmptyObjectGivesV0182Defaults) {
  const ParsedConfig parsed = parseConfig("{}");
  EXPECT_EQ(parsed.config, DsConfig{});
  EXPECT_TRUE(parsed.warnings.empty());
  const DsConfig& c = parsed.config;
  EXPECT_FALSE(c.batch.anySet());
  EXPECT_EQ(c.gradientClipping, 0.0);
  EXPECT_FALSE(c.stepsPerPrint.has_value());
  EXPECT_FALSE(c.bf16.checkGradOverflow);
  EXPECT_EQ(c.fp16.lossScale, 0.0);
  EXPECT_TRUE(c.fp16.dynamicLossScale());
  EXPECT_EQ(c.zero.reduceBucketSize, 500'000'000);
  EXPECT_FALSE(c.zero.overlapCommEffective());
  EXPECT_EQ(c.checkpoint.tagValidation, TagValidation::Warn);
  EXPECT_EQ(c.elasticity.version, ElasticityVersion::V0_2);
}

TEST(DsConfigTest, DocsExampleFields) {
  const DsConfig c =
      loadConfig(test::fixturePath("configs/valid/deepspeed_docs_example.json")).config;
  EXPECT_EQ(c.batch.trainBatchSize, 8);
  EXPECT_EQ(c.batch.gradientAccumulation, 1);
  EXPECT_FALSE(c.batch.microBatchPerGpu.has_value());
  ASSERT_TRUE(c.optimizer.has_value());
  EXPECT_EQ(c.optimizer->type, "Adam");
  EXPECT_EQ(c.optimizer->params.at("lr"), ParamValue(0.00015));
  EXPECT_TRUE(c.fp16.enabled);
  EXPECT_EQ(c.zero.stage, 1);  // "zero_optimization": true
}

TEST(DsConfigTest, Zero2FixtureFields) {
  const DsConfig c = loadConfig(test::fixturePath("configs/valid/zero2_fp16.json")).config;
  EXPECT_EQ(c.zero.stage, 2);
  EXPECT_EQ(c.zero.reduceBucketSize, 200'000'000);  // written 2e8
  EXPECT_EQ(c.zero.overlapComm, true);
  ASSERT_TRUE(c.zero.offloadOptimizer.has_value());
  EXPECT_EQ(c.zero.offloadOptimizer->device, OffloadDevice::Cpu);
  EXPECT_EQ(c.stepsPerPrint, 100);
  EXPECT_EQ(c.gradientClipping, 1.0);
  ASSERT_TRUE(c.scheduler.has_value());
  EXPECT_EQ(c.scheduler->params.at("warmup_num_steps"), ParamValue(std::int64_t{500}));
  EXPECT_EQ(c.optimizer->params.at("betas"), ParamValue(std::vector<double>{0.9, 0.999}));
}

TEST(DsConfigTest, ZeroOptimizationBooleanForm) {
  EXPECT_EQ(parseConfig(R"({"zero_optimization": true})").config.zero.stage, 1);
  EXPECT_EQ(parseConfig(R"({"zero_optimization": false})").config.zero.stage, 0);
  EXPECT_TRUE(
      parseConfig(R"({"zero_optimization": {"stage": 3}})").config.zero.overlapCommEffective());
  const DsConfig c =
      parseConfig(R"({"zero_optimization": {"stage": 3, "overlap_comm": null}})").config;
  EXPECT_FALSE(c.zero.overlapComm.has_value());
}

TEST(DsConfigTest, Bf16AliasAndCaseInsensitiveTagValidation) {
  const DsConfig c = parseConfig(R"({"bfloat16": {"enabled": true},
                                     "checkpoint": {"tag_validation": "fAiL"}})")
                         .config;
  EXPECT_TRUE(c.bf16.enabled);
  EXPECT_EQ(c.checkpoint.tagValidation, TagValidation::Fail);
  EXPECT_EQ(parseConfig(R"({"checkpoint": {"tag_validation": "ignore"}})")
                .config.checkpoint.tagValidation,
            TagValidation::Ignore);
}

TEST(DsConfigTest, OptimizerParamsKeepIntegersAndAreFreeForm) {
  const ParsedConfig parsed = parseConfig(R"({"optimizer": {"type": "SGD", "params": {
      "lr": 1, "momentum": 0.9, "nesterov": true, "foo": "bar", "betas": [1, 0.5],
      "big": -9223372036854775808}}})");
  EXPECT_TRUE(parsed.warnings.empty());  // params are passed through, never checked for names
  const Params& p = parsed.config.optimizer->params;
  EXPECT_EQ(p.at("lr"), ParamValue(std::int64_t{1}));
  EXPECT_EQ(p.at("momentum"), ParamValue(0.9));
  EXPECT_EQ(p.at("nesterov"), ParamValue(true));
  EXPECT_EQ(p.at("foo"), ParamValue(std::string("bar")));
  EXPECT_EQ(p.at("betas"), ParamValue(std::vector<double>{1.0, 0.5}));
  EXPECT_EQ(p.at("big"), ParamValue(std::numeric_limits<std::int64_t>::min()));
}

TEST(DsConfigTest, StaticLossScaleRelaxesDynamicOnlyChecks) {
  const DsConfig c =
      parseConfig(
          R"({"fp16": {"enabled": true, "loss_scale": 128, "loss_scale_window": 0, "min_loss_scale": 0}})")
          .config;
  EXPECT_EQ(c.fp16.lossScale, 128.0);
  EXPECT_FALSE(c.fp16.dynamicLossScale());
}

TEST(DsConfigTest, UnknownKeysGiveOneWarningWithHints) {
  const ParsedConfig parsed = parseConfig(R"({
      "trian_batch_size": 8,
      "fp16": {"enabled": false, "loss_scal": 0},
      "zero_optimization": {"stage": 1, "overlap_com": true},
      "elasticity": {"prefer_large_batch": true},
      "completely_different": 1})");
  ASSERT_EQ(parsed.warnings.size(), 1U);
  EXPECT_THAT(parsed.warnings[0],
              AllOf(StartsWith("unknown keys"),
                    HasSubstr("trian_batch_size (did you mean \"train_batch_size\"?)"),
                    HasSubstr("fp16.loss_scal (did you mean \"loss_scale\"?)"),
                    HasSubstr("zero_optimization.overlap_com (did you mean \"overlap_comm\"?)"),
                    HasSubstr("elasticity.prefer_large_batch (did you mean "
                              "\"prefer_larger_batch\"?)"),
                    HasSubstr("completely_different")));
  EXPECT_THAT(parsed.warnings[0], ::testing::Not(HasSubstr("completely_different (did")));
}

TEST(DsConfigTest, EveryIgnoredDeepSpeedKeyGetsItsOwnWarningSayingItHasNoEffect) {
  const ParsedConfig parsed = parseConfig(R"({
      "amp": {"enabled": false}, "wandb": {"enabled": true}, "dataloader_drop_last": true,
      "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 5e7,
                            "offload_param": {"device": "cpu"}, "zero_quantized_weights": true},
      "bf16": {"enabled": true, "bf16_master_weights_and_grads": true},
      "checkpoint": {"writer": {}}})");
  const std::vector<std::string> keys = {"amp",
                                         "wandb",
                                         "dataloader_drop_last",
                                         "zero_optimization.stage3_prefetch_bucket_size",
                                         "zero_optimization.offload_param",
                                         "zero_optimization.zero_quantized_weights",
                                         "bf16.bf16_master_weights_and_grads",
                                         "checkpoint.writer"};
  ASSERT_EQ(parsed.warnings.size(), keys.size()) << ::testing::PrintToString(parsed.warnings);
  for (const auto& key : keys) {
    const auto expected = key + ": a DeepSpeed key Stretch does not implement; it has no effect";
    EXPECT_NE(std::find(parsed.warnings.begin(), parsed.warnings.end(), expected),
              parsed.warnings.end())
        << key;
  }
}

TEST(DsConfigTest, UnknownAndIgnoredTogetherGiveTwoWarnings) {
  const ParsedConfig parsed = parseConfig(R"({"tensorboard": {}, "wal_clock_breakdown": true})");
  ASSERT_EQ(parsed.warnings.size(), 2U);
  EXPECT_THAT(parsed.warnings[0], HasSubstr("did you mean \"wall_clock_breakdown\"?"));
  EXPECT_THAT(parsed.warnings[1], HasSubstr("tensorboard"));
}

TEST(DsConfigTest, ManyUnknownKeysStayCheapAndListed) {
  std::string text = "{";
  for (int i = 0; i < 100000; ++i) {
    text += (i == 0 ? "\"" : ",\"") + std::string("train_batch_siz") + std::to_string(i) + "\": 1";
  }
  text += "}";
  const ParsedConfig parsed = parseConfig(text);
  ASSERT_EQ(parsed.warnings.size(), 1U);
  EXPECT_THAT(parsed.warnings[0], HasSubstr("and 99950 more"));
}

TEST(DsConfigTest, ErrorsCarryStructuredDetail) {
  try {
    parseConfig(R"({"train_batch_size": 32.5})");
    FAIL();
  } catch (const ConfigError& e) {
    ASSERT_TRUE(e.detail().has_value());
    EXPECT_EQ(e.detail()->path, "train_batch_size");
    EXPECT_EQ(e.detail()->value, "32.5");
    EXPECT_EQ(e.detail()->expected, "a positive integer");
    EXPECT_STREQ(e.kind(), "ConfigError");
  }
}

TEST(DsConfigTest, ElasticityProblemsAreElasticityConfigErrors) {
  EXPECT_THROW(parseConfig(R"({"elasticity": {"enabled": true}})"), ElasticityConfigError);
  EXPECT_THROW(parseConfig(R"({"elasticity": 3})"), ElasticityConfigError);
  EXPECT_THROW(parseConfig(R"({"train_batch_size": 8, "elasticity": {"enabled": true,
                "max_train_batch_size": 100, "micro_batch_sizes": [2]}})"),
               ElasticityConfigError);
  // Syntax errors inside the section stay ConfigErrors.
  try {
    parseConfig(R"({"elasticity": {"enabled": tru}})");
    FAIL();
  } catch (const ElasticityConfigError&) {
    FAIL() << "syntax errors are ConfigErrors";
  } catch (const ConfigError&) {
  }
}

TEST(DsConfigTest, ElasticBatchKeysAllowedWhenIgnored) {
  const DsConfig c = parseConfig(R"({"train_micro_batch_size_per_gpu": 4, "elasticity": {
      "enabled": true, "max_train_batch_size": 100, "micro_batch_sizes": [2],
      "ignore_non_elastic_batch_info": true}})")
                         .config;
  EXPECT_EQ(c.batch.microBatchPerGpu, 4);  // kept: the engine decides what to do with it
  EXPECT_THAT(errorOf(R"({"train_micro_batch_size_per_gpu": 4, "elasticity": {
      "enabled": true, "max_train_batch_size": 100, "micro_batch_sizes": [2]}})"),
              AllOf(HasSubstr("train_micro_batch_size_per_gpu = 4"),
                    HasSubstr("found train_micro_batch_size_per_gpu"),
                    HasSubstr("ignore_non_elastic_batch_info")));
  // Disabled elasticity never conflicts.
  EXPECT_NO_THROW(parseConfig(R"({"train_batch_size": 8, "elasticity": {"enabled": false}})"));
}

TEST(DsConfigTest, SyntaxErrorsNameSourceLineAndColumn) {
  // The failing character is the newline after "tru": still line 3, not "4:0".
  EXPECT_THAT(errorOf("{\n  // comment\n  \"a\": tru\n}"),
              StartsWith("test.json:3:11: invalid JSON: syntax error while parsing value"));
  EXPECT_THAT(errorOf("{\n  /* multi\n line */ \"a\": [1,,]\n}"),
              AllOf(StartsWith("test.json:3:"), HasSubstr("invalid JSON")));
  EXPECT_THAT(errorOf(""), HasSubstr("invalid JSON"));
  EXPECT_THAT(errorOf("{} {}"), HasSubstr("invalid JSON"));
}

TEST(DsConfigTest, DuplicateKeysNameThePathAndPosition) {
  EXPECT_THAT(errorOf("{\n  \"fp16\": {\"enabled\": true,\n    \"enabled\": false}}"),
              AllOf(StartsWith("test.json:3:5: duplicate key \"enabled\" at fp16.enabled")));
  EXPECT_THAT(errorOf(R"({"a": [{"x": 1}, {"x": 1, "x": 2}]})"), HasSubstr("at a[1].x"));
  EXPECT_THAT(errorOf(R"({"k\"ey": 1, "k\"ey": 2})"), HasSubstr("test.json:1:14: duplicate key"));
}

TEST(DsConfigTest, NestingLimitIs64Levels) {
  const ParsedConfig ok = parseConfig(nested(63));  // the top object + 63 arrays
  EXPECT_EQ(ok.warnings.size(), 1U);
  EXPECT_THAT(errorOf(nested(64)), HasSubstr("nesting deeper than 64 levels"));
  EXPECT_THAT(errorOf(nested(100000)), HasSubstr("nesting deeper than 64 levels"));
  EXPECT_THAT(errorOf(std::string(100000, '[')), HasSubstr("nesting deeper than 64 levels"));
}

TEST(DsConfigTest, Utf8ByteOrderMarkIsSkipped) {
  EXPECT_EQ(parseConfig("\xef\xbb\xbf{\"train_batch_size\": 4}").config.batch.trainBatchSize, 4);
}

TEST(DsConfigTest, TopLevelMustBeAnObject) {
  EXPECT_THAT(errorOf("[]"), HasSubstr("top level must be a JSON object, not an array"));
  EXPECT_THAT(errorOf("3"), HasSubstr("top level must be a JSON object"));
  EXPECT_THAT(errorOf("null"), HasSubstr("top level must be a JSON object"));
}

TEST(DsConfigTest, NumbersOutsideTheirRangesAreRejected) {
  EXPECT_EQ(parseConfig(R"({"steps_per_print": 9223372036854775807})").config.stepsPerPrint,
            std::numeric_limits<std::int64_t>::max());
  EXPECT_THAT(errorOf(R"({"steps_per_print": 9223372036854775808})"),
              HasSubstr("steps_per_print = 9223372036854775808: expected an integer that fits"));
  EXPECT_THAT(errorOf(R"({"optimizer": {"type": "A", "params": {"x": -99999999999999999999}}})"),
              HasSubstr("optimizer.params.x = -99999999999999999999"));
  EXPECT_THAT(errorOf(R"({"gradient_clipping": 1e400})"),
              HasSubstr("test.json:1:27: invalid JSON: number overflow parsing '1e400'"));
  EXPECT_THAT(errorOf(R"({"train_batch_size": 1e3})"), HasSubstr("train_batch_size = 1e3"));
  EXPECT_THAT(errorOf(R"({"zero_optimization": {"allgather_bucket_size": 1e300}})"),
              HasSubstr("zero_optimization.allgather_bucket_size = 1e300"));
}

TEST(DsConfigTest, NullMeansAbsentForOptionalKeys) {
  const DsConfig c = parseConfig(R"({"train_batch_size": null, "steps_per_print": null,
      "optimizer": null, "scheduler": null, "zero_optimization": {"offload_optimizer": null}})")
                         .config;
  EXPECT_EQ(c, DsConfig{});
  EXPECT_THAT(errorOf(R"({"wall_clock_breakdown": null})"),
              HasSubstr("wall_clock_breakdown = null: expected true or false"));
}

TEST(DsConfigTest, InvalidInputNeverLeaksForeignExceptions) {
  const std::string inputs[] = {
      std::string("\xff\xfe{}", 4),
      std::string("{\"a\": \"\xc3\x28\"}"),
      std::string("{\"a\": \"\\ud800\"}"),
      std::string("{\"a\"\0: 1}", 9),
      "{\"a\": 1} // trailing",
      "/* only a comment */",
      "{\"a\": /* unterminated",
      "{\"a\": \"unterminated",
      "{\"a\": [1, 2,, 3]}",
      "{,}",
      "{\"a\":1,}",
      "-",
      "{\"train_batch_size\": -}",
      "{\"a\": 1e999999}",
      "{\"a\": 0.0000000000000000000000000000001e-400}",
  };
  for (const std::string& input : inputs) {
    try {
      parseConfig(input);
    } catch (const Error&) {
    } catch (...) {
      ADD_FAILURE() << "foreign exception for input: " << input;
    }
  }
  EXPECT_EQ(parseConfig("{\"a\":1,}").warnings.size(), 1U);
}

TEST(DsConfigTest, ToJsonWritesEveryFieldAndRoundTrips) {
  DsConfig c;
  c.batch.microBatchPerGpu = 3;
  c.gradientClipping = 0.1 + 0.2;  // not representable in few digits
  c.fp16.minLossScale = 1e-300;
  c.optimizer = OptimizerConfig{"AdamW",
                                {{"lr", 3e-5},
                                 {"betas", std::vector<double>{0.9, 0.95}},
                                 {"steps", std::int64_t{7}},
                                 {"x", 2.0}},
                                true};
  c.zero.offloadOptimizer = OffloadConfig{OffloadDevice::Nvme, "/nvme", false, 8};
  c.elasticity.version = ElasticityVersion::Exact;
  c.elasticity.targetBatchSize = 1000;
  c.elasticity.batchTolerance = 0.1;
  const std::string json = toJson(c);
  for (const char* key : {"\"gradient_clipping\"", "\"wall_clock_breakdown\"", "\"comms_logger\"",
                          "\"check_grad_overflow\"", "\"tag_validation\"", "\"min_time\"",
                          "\"legacy_fusion\"", "\"buffer_count\"", "\"batch_tolerance\""}) {
    EXPECT_THAT(json, HasSubstr(key));
  }
  EXPECT_THAT(json, ::testing::Not(HasSubstr("steps_per_print")));  // absent stays absent
  EXPECT_THAT(json, ::testing::Not(HasSubstr("overlap_comm")));
  const ParsedConfig back = parseConfig(json);
  EXPECT_EQ(back.config, c);
  EXPECT_TRUE(back.warnings.empty());
  EXPECT_EQ(toJson(back.config), json);  // stable output
}

TEST(DsConfigTest, LoadConfigReportsUnreadablePaths) {
  try {
    loadConfig("/nonexistent/ds_config.json");
    FAIL();
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), AllOf(StartsWith("cannot read /nonexistent/ds_config.json: "),
                                HasSubstr("No such file")));
  }
  const auto dir = std::filesystem::temp_directory_path();
  try {
    loadConfig(dir);
    FAIL();
  } catch (const IoError& e) {
    EXPECT_THAT(e.what(), HasSubstr("Is a directory"));
  }
}

TEST(DsConfigTest, LoadConfigUsesThePathAsSource) {
  const auto path = std::filesystem::temp_directory_path() / "stretch_config_test_load.json";
  {
    std::ofstream out(path);
    out << "{\n \"train_batch_size\": 4,\n \"fp16\": {\"enabled\": yes}\n}\n";
  }
  try {
    loadConfig(path);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), StartsWith(path.string() + ":3:"));
  }
  {
    std::ofstream out(path);
    out << "{\"train_batch_size\": 4}";
  }
  EXPECT_EQ(loadConfig(path).config.batch.trainBatchSize, 4);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace stretch::config
