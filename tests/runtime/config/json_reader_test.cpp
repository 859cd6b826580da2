// The one JSON reader: the trailing-comma pre-pass, document-level checks, the shared error
// format ("<path> = <value as written>: expected <what>", "(missing)" for an absent key), both
// ways of reporting unknown keys, and parseJson's syntax errors.

#include "runtime/config/json_reader.hpp"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/common/error.hpp"

namespace stretch::config::json {
namespace {

TEST(JsonReaderConfigTest, TrailingCommasBecomeSpaces) {
  EXPECT_EQ(removeTrailingCommas("[1,2,]"), "[1,2 ]");
  EXPECT_EQ(removeTrailingCommas("{\"a\":1 , }"), "{\"a\":1   }");
  EXPECT_EQ(removeTrailingCommas("[1, // c\n /* d */ ]"), "[1  // c\n /* d */ ]");
  EXPECT_EQ(removeTrailingCommas("{\"a\":[1,],}"), "{\"a\":[1 ] }");
}

TEST(JsonReaderConfigTest, PrePassLeavesStringsCommentsAndNonTrailingCommasAlone) {
  for (const char* text : {"[\",]\"]", "[\"\\\",]\"]", "// ,]\n[1]", "/* ,] */[1]", "[,]", "[1,,]",
                           "{,}", "[1,2]", "\"unterminated ,]", "[1, /* unterminated ,]"}) {
    EXPECT_EQ(removeTrailingCommas(text), text) << text;
  }
}

TEST(JsonReaderConfigTest, FloatLiteralsAreKeptForMessages) {
  const JsonDocument doc = parseJsonDocument(R"({"a": {"b": [1, 2.50, 1E3]}})", "t", "");
  EXPECT_EQ(doc.floatText.at("a.b[1]"), "2.50");
  EXPECT_EQ(doc.floatText.at("a.b[2]"), "1E3");
  EXPECT_TRUE(doc.root["a"]["b"][0].is_number_integer());
}

TEST(JsonReaderConfigTest, PrefixAppliesToRecordedPaths) {
  const JsonDocument doc = parseJsonDocument(R"({"x": [[0.5]]})", "t", "elasticity");
  EXPECT_EQ(doc.floatText.at("elasticity.x[0][0]"), "0.5");
}

TEST(JsonReaderConfigTest, KeyReportCapsTheList) {
  KeyReport report;
  for (int i = 0; i < 60; ++i) {
    std::string key = "k";
    key += std::to_string(i);  // (not "k" + ...: g++ 12 warns falsely, -Wrestrict)
    report.addUnknown(key, std::nullopt);
  }
  const auto warnings = report.warnings();
  ASSERT_EQ(warnings.size(), 1U);
  EXPECT_THAT(warnings[0], ::testing::HasSubstr("and 10 more"));
}

using Parts = std::vector<std::string>;

// The three parts (path, value, expected) of the ConfigError `body` throws, and its message.
template <typename F>
Parts partsOf(F&& body, std::string* message = nullptr) {
  try {
    body();
  } catch (const ConfigError& e) {
    if (message != nullptr) {
      *message = e.what();
    }
    EXPECT_TRUE(e.detail().has_value()) << e.what();
    const ErrorDetail d = e.detail().value_or(ErrorDetail{});
    return {d.path, d.value, d.expected};
  }
  ADD_FAILURE() << "no ConfigError";
  return {};
}

const Json kJob = Json::parse(R"({"job": {"steps": -2, "name": 7, "ratio": 1.5, "huge":
    18446744073709551615, "fast": "yes", "tags": [1, "x"], "nested": {"a": 1, "b": 2}}})");

TEST(JsonReaderFormatTest, BadValuesNamePathValueAndExpectation) {
  const ObjectReader job(kJob.at("job"), "job");
  std::string message;
  EXPECT_EQ(partsOf(
                [&] {
                  job.readInt("steps", IntRule{1, 100, "a positive number of steps"});
                },
                &message),
            (Parts{"job.steps", "-2", "a positive number of steps"}));
  EXPECT_EQ(message, "job.steps = -2: expected a positive number of steps");
  EXPECT_EQ(partsOf([&] { job.readString("name"); }), (Parts{"job.name", "7", "a string"}));
  EXPECT_EQ(partsOf([&] { job.readBool("fast"); }),
            (Parts{"job.fast", "\"yes\"", "true or false"}));
  EXPECT_EQ(partsOf([&] {
              job.readNumber("ratio", NumberRule{0.0, false, "a fraction", 1.0});
            }),
            (Parts{"job.ratio", "1.5", "a fraction"}));
  EXPECT_EQ(partsOf([&] {
              job.readInt("huge", IntRule{-64, 255, "an exit code"});
            }),
            (Parts{"job.huge", "18446744073709551615", "an exit code"}));
  EXPECT_EQ(partsOf([&] { job.fail("absent", "the key to be present"); }),
            (Parts{"job.absent", "(missing)", "the key to be present"}));
  EXPECT_EQ(partsOf([&] { job.failAs("tags", "2 tags", "one tag per node"); }),
            (Parts{"job.tags", "2 tags", "one tag per node"}));
  EXPECT_EQ(partsOf([&] { job.readObject("tags", "an object of tags"); }),
            (Parts{"job.tags", "[1,\"x\"]", "an object of tags"}));
  EXPECT_EQ(
      partsOf([&] { throwValue(indexPath("job.tags", 1), kJob["job"]["tags"][1], "a number"); }),
      (Parts{"job.tags[1]", "\"x\"", "a number"}));
  EXPECT_EQ(partsOf([&] { ObjectReader(kJob["job"]["steps"], "job.steps"); }),
            (Parts{"job.steps", "-2", "a JSON object"}));
  const Json longText = std::string(200, 'x');
  EXPECT_EQ(partsOf([&] { ObjectReader(longText, "s", "an object"); }).at(1),
            "\"" + std::string(79, 'x') + "...");  // values are shortened to 80 characters
}

TEST(JsonReaderFormatTest, AbsentValuesAreNulloptAndRangesHold) {
  const ObjectReader job(kJob.at("job"), "job");
  EXPECT_FALSE(job.readInt("absent", IntRule{0, 1, "x"}).has_value());
  EXPECT_FALSE(job.readObject("absent", "an object").has_value());
  EXPECT_EQ(job.readNumber("ratio", NumberRule{1.5, false, "x", 1.5}), 1.5);  // inclusive max
  EXPECT_EQ(job.readInt("steps", IntRule{-2, -2, "x"}), -2);
  const auto nested = job.readObject("nested", "an object");
  ASSERT_TRUE(nested.has_value());
  EXPECT_EQ(nested->childPath("a"), "job.nested.a");
}

TEST(JsonReaderFormatTest, ElasticityReadersThrowElasticityConfigErrors) {
  const JsonDocument doc = parseJsonDocument(R"({"max_gpus": 2.50})", "t", "elasticity");
  KeyReport report;
  const ObjectReader reader(doc, doc.root, "elasticity", ErrorKind::Elasticity, report);
  try {
    reader.readInt("max_gpus", IntRule{1, 10, "a positive integer"});
    FAIL() << "no error";
  } catch (const ElasticityConfigError& e) {
    // Float literals of a parsed document are quoted as written.
    EXPECT_STREQ(e.what(), "elasticity.max_gpus = 2.50: expected a positive integer");
  }
}

TEST(JsonReaderFormatTest, UnreadKeysBecomeWarningsInKeyOrder) {
  const Json object = Json::parse(R"({"zeta": 1, "alpha": 2, "used": 3, "free_text": "x"})");
  const ObjectReader reader(object, "plan");
  EXPECT_TRUE(reader.has("used"));
  reader.accept("free_text");
  std::vector<std::string> warnings;
  reader.warnUnread(warnings);
  EXPECT_EQ(warnings, (std::vector<std::string>{"plan.alpha: unknown key, ignored",
                                                "plan.zeta: unknown key, ignored"}));

  constexpr std::string_view kKnown[] = {"used", "free_text", "alpha"};
  EXPECT_EQ(partsOf([&] { reader.rejectUnknown(kKnown, "a known key"); }),
            (Parts{"plan.zeta", "1", "a known key"}));
}

TEST(JsonReaderFormatTest, ParseJsonReportsLineAndColumn) {
  EXPECT_EQ(parseJson("[1, 2]", "t"), Json::parse("[1, 2]"));
  EXPECT_EQ(parseJson("{\"a\": 1 // note\n}", "t", /*allowComments=*/true),
            Json::parse(R"({"a": 1})"));
  const auto errorOf = [](std::string_view text) {
    try {
      parseJson(text, "job.json");
    } catch (const ConfigError& e) {
      EXPECT_FALSE(e.detail().has_value());
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_THAT(
      errorOf("{\n  \"a\": ,\n}"),
      ::testing::StartsWith("job.json:2:8: invalid JSON: syntax error while parsing value"));
  EXPECT_THAT(errorOf("{\"a\": 1 // note\n}"), ::testing::StartsWith("job.json:1:9: invalid JSON"));
  EXPECT_THAT(errorOf(""), ::testing::StartsWith("job.json:1:1: invalid JSON"));
  EXPECT_EQ(errorOf("[1e400]"), "job.json: invalid JSON: number overflow parsing '1e400'");
}

}  // namespace
}  // namespace stretch::config::json
