#pragma once
// The message of the IoError a call throws, for tests of file operations.

#include <string>

#include <gtest/gtest.h>

#include "runtime/common/error.hpp"

namespace stretch::test {

// The message of the IoError `body` throws ("" and a test failure when it throws nothing).
template <typename F>
std::string ioError(F&& body) {
  try {
    body();
  } catch (const IoError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no IoError";
  return "";
}

}  // namespace stretch::test
