// integerVariable: the fallback for an unset or empty variable, the value, and a ConfigError
// naming the variable and its text for anything that is not an integer at or above the minimum.

#include "runtime/common/environment.hpp"

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "runtime/common/error.hpp"

namespace stretch {
namespace {

constexpr const char* kName = "STRETCH_TEST_INTEGER_VARIABLE";

std::string refusal(const char* text) {
  ::setenv(kName, text, 1);
  try {
    integerVariable(kName, 7, 1);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(IntegerVariable, UnsetOrEmptyIsTheFallbackAndAnIntegerIsItsValue) {
  ::unsetenv(kName);
  EXPECT_EQ(integerVariable(kName, 7, 1), 7);
  ::setenv(kName, "", 1);
  EXPECT_EQ(integerVariable(kName, 7, 1), 7);
  ::setenv(kName, "42", 1);
  EXPECT_EQ(integerVariable(kName, 7, 1), 42);
  ::setenv(kName, "0", 1);
  EXPECT_EQ(integerVariable(kName, 7, 0), 0);
  ::unsetenv(kName);
}

TEST(IntegerVariable, AnythingElseIsAConfigErrorNamingTheVariable) {
  EXPECT_EQ(refusal("two"), "STRETCH_TEST_INTEGER_VARIABLE = two: expected an integer >= 1");
  EXPECT_EQ(refusal("2x"), "STRETCH_TEST_INTEGER_VARIABLE = 2x: expected an integer >= 1");
  EXPECT_EQ(refusal("0"), "STRETCH_TEST_INTEGER_VARIABLE = 0: expected an integer >= 1");
  EXPECT_EQ(refusal("99999999999999999999"),
            "STRETCH_TEST_INTEGER_VARIABLE = 99999999999999999999: expected an integer >= 1");
  ::unsetenv(kName);
}

}  // namespace
}  // namespace stretch
