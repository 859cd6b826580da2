#pragma once
// Invariant checks that stay on in release builds. A failed check is a bug in Stretch, not bad
// input: it throws stretch::InternalError naming the file, line, the condition and, for the
// comparison forms, both values:
//   runtime/elasticity/solver.cpp:88: check 'a == b' failed: 3 vs 4 (valid sizes)

#include <string>

#include <fmt/format.h>

#include "runtime/common/error.hpp"

namespace stretch::detail {

[[noreturn]] void throwCheckFailure(const char* file, int line, const char* condition,
                                    const std::string& values, const std::string& context);

}  // namespace stretch::detail

#define STRETCH_CHECK(cond, ...)                                                     \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      ::stretch::detail::throwCheckFailure(__FILE__, __LINE__, #cond, std::string(), \
                                           ::fmt::format("" __VA_ARGS__));           \
    }                                                                                \
  } while (false)

#define STRETCH_CHECK_OP(a, op, b, ...)                                  \
  do {                                                                   \
    const auto& stretch_check_a_ = (a);                                  \
    const auto& stretch_check_b_ = (b);                                  \
    if (!(stretch_check_a_ op stretch_check_b_)) {                       \
      ::stretch::detail::throwCheckFailure(                              \
          __FILE__, __LINE__, #a " " #op " " #b,                         \
          ::fmt::format("{} vs {}", stretch_check_a_, stretch_check_b_), \
          ::fmt::format("" __VA_ARGS__));                                \
    }                                                                    \
  } while (false)

#define STRETCH_CHECK_EQ(a, b, ...) STRETCH_CHECK_OP(a, ==, b, __VA_ARGS__)
#define STRETCH_CHECK_NE(a, b, ...) STRETCH_CHECK_OP(a, !=, b, __VA_ARGS__)
#define STRETCH_CHECK_LT(a, b, ...) STRETCH_CHECK_OP(a, <, b, __VA_ARGS__)
#define STRETCH_CHECK_LE(a, b, ...) STRETCH_CHECK_OP(a, <=, b, __VA_ARGS__)
#define STRETCH_CHECK_GT(a, b, ...) STRETCH_CHECK_OP(a, >, b, __VA_ARGS__)
#define STRETCH_CHECK_GE(a, b, ...) STRETCH_CHECK_OP(a, >=, b, __VA_ARGS__)
