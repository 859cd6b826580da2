#include "runtime/common/strings.hpp"

#include <array>
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

}  // namespace
}  // namespace stretch
