// The private JSON adaptor: the trailing-comma pre-pass and document-level checks.

#include "runtime/config/json_reader.hpp"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/common/error.hpp"

namespace stretch::config::detail {
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

}  // namespace
}  // namespace stretch::config::detail
