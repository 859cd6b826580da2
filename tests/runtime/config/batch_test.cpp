// resolveBatch against DeepSpeed's own batch inference (fixtures/elasticity/deepspeed_cases.json,
// transcribed from DeepSpeedConfig._set_batch_related_parameters / _batch_assertion).

#include "runtime/config/batch.hpp"

#include <cstdint>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/common/error.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::config {
namespace {

using ::testing::HasSubstr;

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();

std::optional<std::int64_t> optionalKey(const nlohmann::json& dict, const char* key) {
  if (!dict.contains(key)) {
    return std::nullopt;
  }
  return dict.at(key).get<std::int64_t>();
}

std::string errorOf(const BatchKeys& keys, std::int64_t worldSize) {
  return test::errorOf<ConfigError>([&] { resolveBatch(keys, worldSize); });
}

TEST(ResolveBatchTest, MatchesAllDeepSpeedCases) {
  const auto cases = nlohmann::json::parse(test::readFile(
      test::fixturePath("elasticity/deepspeed_cases.json")))["deepspeed_config_batch_cases"];
  ASSERT_EQ(cases.size(), 12U);
  for (const auto& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const auto& dict = c["param_dict"];
    const BatchKeys keys{optionalKey(dict, "train_batch_size"),
                         optionalKey(dict, "train_micro_batch_size_per_gpu"),
                         optionalKey(dict, "gradient_accumulation_steps")};
    const std::int64_t worldSize = c["world_size"].get<std::int64_t>();
    const auto& result = c["result"];
    if (result.contains("error")) {
      EXPECT_THROW(resolveBatch(keys, worldSize), ConfigError);
    } else {
      const BatchTriple expected{result["train_batch_size"].get<std::int64_t>(),
                                 result["train_micro_batch_size_per_gpu"].get<std::int64_t>(),
                                 result["gradient_accumulation_steps"].get<std::int64_t>()};
      EXPECT_EQ(resolveBatch(keys, worldSize), expected);
    }
  }
}

TEST(ResolveBatchTest, InferredValueIsNamedWithItsOrigin) {
  EXPECT_THAT(errorOf(BatchKeys{2, std::nullopt, std::nullopt}, 4),
              HasSubstr("train_micro_batch_size_per_gpu = 0 (inferred: train_batch_size 2 / "
                        "world size 4): expected a positive integer"));
}

TEST(ResolveBatchTest, MismatchQuotesDeepSpeedsEquation) {
  EXPECT_THAT(errorOf(BatchKeys{30, 4, std::nullopt}, 4), HasSubstr("30 != 4 * 1 * 4"));
  EXPECT_THAT(errorOf(BatchKeys{30, std::nullopt, 2}, 4), HasSubstr("30 != 3 * 2 * 4"));
  EXPECT_THAT(errorOf(BatchKeys{32, 4, 4}, 4), HasSubstr("train_batch_size = 32: expected"));
}

TEST(ResolveBatchTest, MissingKeysAndBadWorldSize) {
  EXPECT_THAT(errorOf(BatchKeys{}, 4),
              HasSubstr("either train_batch_size or train_micro_batch_size_per_gpu must be given"));
  EXPECT_THAT(errorOf(BatchKeys{std::nullopt, std::nullopt, 2}, 4),
              HasSubstr("either train_batch_size or train_micro_batch_size_per_gpu"));
  EXPECT_THAT(errorOf(BatchKeys{8, std::nullopt, std::nullopt}, 0),
              HasSubstr("world size = 0: expected a positive integer"));
  EXPECT_THROW(resolveBatch(BatchKeys{8, std::nullopt, std::nullopt}, -3), ConfigError);
}

TEST(ResolveBatchTest, AssertionOrderFollowsDeepSpeed) {
  // train_batch_size is checked before the micro batch, which is checked before accumulation.
  EXPECT_THAT(errorOf(BatchKeys{-8, 0, 0}, 1), HasSubstr("train_batch_size = -8"));
  EXPECT_THAT(errorOf(BatchKeys{8, -1, 0}, 1), HasSubstr("train_micro_batch_size_per_gpu = -1"));
  EXPECT_THAT(errorOf(BatchKeys{8, 1, 0}, 1), HasSubstr("gradient_accumulation_steps = 0"));
  // mb + gas → tb = -6 (inferred): DeepSpeed reports the train batch first.
  EXPECT_THAT(errorOf(BatchKeys{std::nullopt, -2, 3}, 1),
              HasSubstr("train_batch_size = -6 (inferred"));
}

TEST(ResolveBatchTest, ZeroDivisorsAreReportedNotCrashed) {
  EXPECT_THAT(errorOf(BatchKeys{8, 0, std::nullopt}, 2),
              HasSubstr("train_micro_batch_size_per_gpu = 0"));
  EXPECT_THAT(errorOf(BatchKeys{8, std::nullopt, 0}, 2),
              HasSubstr("gradient_accumulation_steps = 0"));
}

TEST(ResolveBatchTest, FloorDivisionLikePython) {
  // (tb // mb) // ws with tb = 10, mb = 3, ws = 2 → gas 1 → 10 != 3 * 1 * 2.
  EXPECT_THAT(errorOf(BatchKeys{10, 3, std::nullopt}, 2), HasSubstr("10 != 3 * 1 * 2"));
  // Python: -7 // 2 == -4 (C++ would give -3).
  EXPECT_THAT(errorOf(BatchKeys{std::nullopt, std::nullopt, std::nullopt}, 1), HasSubstr("either"));
  EXPECT_THAT(errorOf(BatchKeys{-7, 2, std::nullopt}, 1), HasSubstr("train_batch_size = -7"));
}

TEST(ResolveBatchTest, ExtremeValuesDoNotOverflow) {
  EXPECT_EQ(resolveBatch(BatchKeys{kMax, 1, std::nullopt}, 1), (BatchTriple{kMax, 1, kMax}));
  EXPECT_EQ(resolveBatch(BatchKeys{std::nullopt, kMax, std::nullopt}, 1),
            (BatchTriple{kMax, kMax, 1}));
  EXPECT_THAT(errorOf(BatchKeys{std::nullopt, kMax, std::nullopt}, 2), HasSubstr("beyond 64 bits"));
  EXPECT_THAT(errorOf(BatchKeys{std::nullopt, std::int64_t{1} << 62, 4}, 4),
              HasSubstr("beyond 64 bits"));
  EXPECT_THAT(errorOf(BatchKeys{std::nullopt, kMax, kMax}, kMax), HasSubstr("beyond 64 bits"));
  EXPECT_THROW(resolveBatch(BatchKeys{kMax, kMax, kMax}, kMax), ConfigError);
  EXPECT_THROW(resolveBatch(BatchKeys{kMin, -1, std::nullopt}, 1), ConfigError);
  EXPECT_THROW(resolveBatch(BatchKeys{kMin, std::nullopt, -1}, kMax), ConfigError);
  EXPECT_THROW(resolveBatch(BatchKeys{std::nullopt, kMin, kMin}, kMax), ConfigError);
}

}  // namespace
}  // namespace stretch::config
