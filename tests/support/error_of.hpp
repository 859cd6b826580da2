#pragma once
// The message of the exception a call throws, for tests of what an error says.

#include <string>
#include <utility>

#include <gtest/gtest.h>

namespace stretch::test {

// The message (what()) of the E that `body` throws; "" and a test failure when it throws
// nothing. An exception of another type propagates (the test fails with it).
template <typename E, typename F>
std::string errorOf(F&& body) {
  try {
    std::forward<F>(body)();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception, none was thrown";
  return "";
}

}  // namespace stretch::test
