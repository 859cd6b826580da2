// Every file under fixtures/configs/valid must parse (and survive toJson); every file under
// fixtures/configs/invalid must fail with a message containing its sibling .error file.

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/common/error.hpp"
#include "runtime/config/ds_config.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::config {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> jsonStems(const std::string& folder) {
  std::vector<std::string> stems;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(test::fixturePath("configs/" + folder), ec)) {
    if (entry.path().extension() == ".json") {
      stems.push_back(entry.path().stem().string());
    }
  }
  std::sort(stems.begin(), stems.end());
  return stems;
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) {
    text.pop_back();
  }
  return text;
}

class ValidConfigFixture : public ::testing::TestWithParam<std::string> {};
class InvalidConfigFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(ValidConfigFixture, ParsesAndRoundTrips) {
  const fs::path path = test::fixturePath("configs/valid/" + GetParam() + ".json");
  const ParsedConfig parsed = loadConfig(path);
  const ParsedConfig again = parseConfig(toJson(parsed.config), "toJson");
  EXPECT_EQ(again.config, parsed.config) << toJson(parsed.config);
  EXPECT_TRUE(again.warnings.empty());
}

TEST_P(InvalidConfigFixture, FailsWithTheExpectedMessage) {
  const fs::path path = test::fixturePath("configs/invalid/" + GetParam() + ".json");
  const fs::path errorPath = fs::path(path).replace_extension(".error");
  ASSERT_TRUE(fs::exists(errorPath)) << "missing " << errorPath;
  const std::string expected = trimmed(test::readFile(errorPath));
  ASSERT_FALSE(expected.empty());
  try {
    loadConfig(path);
    FAIL() << path << " parsed, expected an error containing: " << expected;
  } catch (const ElasticityConfigError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr(expected));
  } catch (const ConfigError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr(expected));
  }
}

std::string nameOf(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

INSTANTIATE_TEST_SUITE_P(ConfigFixtures, ValidConfigFixture,
                         ::testing::ValuesIn(jsonStems("valid")), nameOf);
INSTANTIATE_TEST_SUITE_P(ConfigFixtures, InvalidConfigFixture,
                         ::testing::ValuesIn(jsonStems("invalid")), nameOf);

TEST(ConfigFixtureTest, DirectoriesHoldEnoughCases) {
  EXPECT_GE(jsonStems("valid").size(), 5U);
  EXPECT_GE(jsonStems("invalid").size(), 20U);
}

}  // namespace
}  // namespace stretch::config
