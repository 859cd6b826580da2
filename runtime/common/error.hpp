#pragma once
// The one exception tree of Stretch.
//
// Every recoverable error is a stretch::Error. Its message is complete and meant for a user: it
// names the key or object, the offending value and what was expected, e.g.
//   elasticity.micro_batch_sizes[2] = -1: expected a positive integer
// Errors built from an ErrorDetail keep those three parts as fields so that tools (the CLI's
// --json mode, the GUI) can show them without parsing text. kind() is the stable class name used
// in machine-readable output; the elasticity kinds match DeepSpeed's exception class names.
//
// Invariant failures (bugs, not bad input) are InternalError, thrown by the STRETCH_CHECK macros
// in runtime/common/check.hpp.

#include <optional>
#include <stdexcept>
#include <string>

namespace stretch {

// The three parts of a bad-input error. path is a dotted JSON path ("fp16.loss_scale_window"),
// a CLI flag ("--world-size") or an environment variable ("WORLD_SIZE").
struct ErrorDetail {
  std::string path;
  std::string value;
  std::string expected;
};

// Formats a detail as "<path> = <value>: expected <expected>".
std::string formatDetail(const ErrorDetail& detail);

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message);
  explicit Error(ErrorDetail detail);

  // Stable class name for machine-readable output ("ConfigError", "ElasticityError", ...).
  virtual const char* kind() const noexcept { return "Error"; }
  const std::optional<ErrorDetail>& detail() const noexcept { return detail_; }

 private:
  std::optional<ErrorDetail> detail_;
};

#define STRETCH_DECLARE_ERROR(Name, Base)                        \
  class Name : public Base {                                     \
   public:                                                       \
    using Base::Base;                                            \
    const char* kind() const noexcept override { return #Name; } \
  }

// A config file, flag or environment variable is malformed or inconsistent.
STRETCH_DECLARE_ERROR(ConfigError, Error);
// The elasticity solver cannot produce a plan (DeepSpeed: ElasticityError).
STRETCH_DECLARE_ERROR(ElasticityError, Error);
// The "elasticity" section is invalid (DeepSpeed: ElasticityConfigError).
STRETCH_DECLARE_ERROR(ElasticityConfigError, ElasticityError);
// A world size is not among the valid ones (DeepSpeed: ElasticityIncompatibleWorldSize).
STRETCH_DECLARE_ERROR(ElasticityIncompatibleWorldSize, ElasticityError);
// A file could not be read or written.
STRETCH_DECLARE_ERROR(IoError, Error);
// A STRETCH_CHECK invariant failed: a bug in Stretch, never caused by input.
STRETCH_DECLARE_ERROR(InternalError, Error);

// Bad input, the user's to fix (a flag, a config, a file that cannot be read, no elastic plan):
// ConfigError and its children, IoError, ElasticityError. The commands' exit status 2 and the
// launcher's `fail` record for an error that ends a job (cli/output.hpp, launcher/agent_loop).
bool isBadInput(const std::exception& e) noexcept;

}  // namespace stretch
