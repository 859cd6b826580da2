#include "runtime/common/strings.hpp"

#include <array>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

namespace stretch {
namespace {

TEST(EditDistance, KnownValues) {
  EXPECT_EQ(editDistance("", ""), 0u);
  EXPECT_EQ(editDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(editDistance("abc", ""), 3u);
  EXPECT_EQ(editDistance("Stage", "stage"), 0u);  // case-insensitive
}

TEST(ClosestMatch, SuggestsPlausibleTyposOnly) {
  constexpr std::array<std::string_view, 3> keys = {"train_batch_size", "steps_per_print",
                                                    "gradient_clipping"};
  EXPECT_EQ(closestMatch("train_bach_size", keys), "train_batch_size");
  EXPECT_EQ(closestMatch("gradient_cliping", keys), "gradient_clipping");
  EXPECT_FALSE(closestMatch("optimizer", keys).has_value());
}

TEST(JsonQuote, QuotesAndBackslashesAreEscaped) {
  EXPECT_EQ(jsonQuote(""), "\"\"");
  EXPECT_EQ(jsonQuote("plain text"), "\"plain text\"");
  EXPECT_EQ(jsonQuote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(jsonQuote("/"), "\"/\"");  // the solidus needs no escape
}

TEST(JsonQuote, ControlCharactersAreEscaped) {
  EXPECT_EQ(jsonQuote("\n\t\r\b\f"), "\"\\n\\t\\r\\b\\f\"");
  EXPECT_EQ(jsonQuote(std::string("\x01\x1f\x7f", 3)), "\"\\u0001\\u001f\\u007f\"");
  EXPECT_EQ(jsonQuote(std::string("nul\0x", 5)), "\"nul\\u0000x\"");
  EXPECT_EQ(jsonQuote(" ~"), "\" ~\"");  // the printable ends stay
}

TEST(JsonQuote, ValidUtf8PassesThrough) {
  // e acute, the euro sign, an emoji and the last code point, U+10FFFF.
  const std::string text = "h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf";
  EXPECT_EQ(jsonQuote(text), "\"" + text + "\"");
}

TEST(JsonQuote, InvalidUtf8BecomesReplacementCharacters) {
  EXPECT_EQ(jsonQuote("\xff\xc3"), "\"\\ufffd\\ufffd\"");             // stray and truncated
  EXPECT_EQ(jsonQuote("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");  // a surrogate
  EXPECT_EQ(jsonQuote("\xc0\xaf"), "\"\\ufffd\\ufffd\"");             // overlong
  EXPECT_EQ(jsonQuote("\xf4\x90\x80\x80"), "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");  // above U+10FFFF
  EXPECT_EQ(jsonQuote("a\xe2\x82"), "\"a\\ufffd\\ufffd\"");  // cut short at the end
}

}  // namespace
}  // namespace stretch
