#pragma once
// Reading the process environment with Stretch's error format.

#include <cstdint>

namespace stretch {

// The integer in variable `name`, or `fallback` when it is unset or empty. Throws ConfigError
// "<name> = <text>: expected an integer >= <minimum>" for anything else (a suffix, a sign where
// none fits, a value below `minimum`).
std::int64_t integerVariable(const char* name, std::int64_t fallback, std::int64_t minimum);

}  // namespace stretch
