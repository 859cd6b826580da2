#include "sim/csv.hpp"

#include <string>

#include <gtest/gtest.h>

namespace stretch::sim {
namespace {

TEST(CsvField, PlainTextIsUnchanged) {
  EXPECT_EQ(csvField(""), "");
  EXPECT_EQ(csvField("steps 0-120"), "steps 0-120");
  EXPECT_EQ(csvField("ETTR 97.2 ± 0.1 %"), "ETTR 97.2 ± 0.1 %");
  EXPECT_EQ(csvField("tab\there; semicolon"), "tab\there; semicolon");
}

TEST(CsvField, QuotesEverySpecialCharacterOfRfc4180) {
  EXPECT_EQ(csvField("a,b"), "\"a,b\"");
  EXPECT_EQ(csvField("line\nbreak"), "\"line\nbreak\"");
  EXPECT_EQ(csvField("carriage\rreturn"), "\"carriage\rreturn\"");
  EXPECT_EQ(csvField("crlf\r\n"), "\"crlf\r\n\"");
}

TEST(CsvField, DoublesQuotes) {
  EXPECT_EQ(csvField("\""), "\"\"\"\"");
  EXPECT_EQ(csvField("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csvField("\"a\",b"), "\"\"\"a\"\",b\"");
}

// A reader that splits RFC 4180 records gets the field back.
std::string unquote(const std::string& field) {
  if (field.empty() || field.front() != '"') {
    return field;
  }
  std::string out;
  for (std::size_t i = 1; i + 1 < field.size(); ++i) {
    out += field[i];
    if (field[i] == '"') {
      ++i;  // "" stands for one quote
    }
  }
  return out;
}

TEST(CsvField, RoundTrips) {
  for (const std::string text : {"", "x", "a,b", "\"", "\"\"", "a\r\nb", ",\",\n,\r"}) {
    EXPECT_EQ(unquote(csvField(text)), text) << text;
  }
}

}  // namespace
}  // namespace stretch::sim
