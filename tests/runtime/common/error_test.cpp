#include "runtime/common/error.hpp"

#include <gtest/gtest.h>

#include "runtime/common/check.hpp"

namespace stretch {
namespace {

TEST(Error, DetailFormsTheMessageAndIsKept) {
  const ElasticityConfigError e(
      ErrorDetail{"elasticity.micro_batch_sizes[2]", "-1", "a positive integer"});
  EXPECT_STREQ(e.what(), "elasticity.micro_batch_sizes[2] = -1: expected a positive integer");
  ASSERT_TRUE(e.detail().has_value());
  EXPECT_EQ(e.detail()->path, "elasticity.micro_batch_sizes[2]");
  EXPECT_STREQ(e.kind(), "ElasticityConfigError");
}

TEST(Error, KindsFollowTheTree) {
  try {
    throw ElasticityIncompatibleWorldSize("World size (7) is not valid");
  } catch (const ElasticityError& e) {
    EXPECT_STREQ(e.kind(), "ElasticityIncompatibleWorldSize");
  }
  EXPECT_STREQ(ConfigError("x").kind(), "ConfigError");
  EXPECT_STREQ(Error("x").kind(), "Error");
}

TEST(Check, ComparisonReportsBothValuesAndContext) {
  try {
    const int a = 3;
    const int b = 4;
    STRETCH_CHECK_EQ(a, b, "rank {}", 7);
    FAIL() << "check did not throw";
  } catch (const InternalError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("tests/runtime/common/error_test.cpp:"), std::string::npos) << message;
    EXPECT_NE(message.find("check 'a == b' failed: 3 vs 4 (rank 7)"), std::string::npos) << message;
  }
}

TEST(Check, PassingChecksDoNotThrow) {
  EXPECT_NO_THROW(STRETCH_CHECK(1 + 1 == 2));
  EXPECT_NO_THROW(STRETCH_CHECK_LT(1, 2));
}

}  // namespace
}  // namespace stretch
