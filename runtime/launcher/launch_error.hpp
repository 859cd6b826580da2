#pragma once
// LaunchError: bad input to `stretch launch` - a malformed hostfile, an impossible
// --include/--exclude/--num_nodes/--num_gpus combination, an unknown launcher, a bad world info.
//
// Contract: every LaunchError names where the input came from (a flag such as "--include", or
// "FILE:LINE" for a hostfile), the offending value and what was expected; errors built from an
// ErrorDetail read "<flag> = <value>: expected <what>". It is a ConfigError, so code that reports
// bad input generically (the CLI: exit code 2) handles it without knowing the launcher. Where
// DeepSpeed raises ValueError/RuntimeError/AssertionError for bad launcher input, Stretch throws
// LaunchError.

#include "runtime/common/error.hpp"

namespace stretch::launcher {

STRETCH_DECLARE_ERROR(LaunchError, ConfigError);

}  // namespace stretch::launcher
