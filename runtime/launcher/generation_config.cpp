#include "runtime/launcher/generation_config.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdlib.h>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "runtime/common/error.hpp"
#include "runtime/common/posix_files.hpp"

namespace stretch::launcher {

std::string generationConfigText(const std::string& configJson, const config::BatchTriple& batch) {
  nlohmann::ordered_json config;
  try {
    config = nlohmann::ordered_json::parse(configJson, nullptr, true, /*ignore_comments=*/true);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(fmt::format("the job's DeepSpeed config is not JSON: {}", e.what()));
  }
  if (!config.is_object())
    throw ConfigError("the job's DeepSpeed config is not a JSON object");
  config.erase("elasticity");
  config["train_batch_size"] = batch.trainBatchSize;
  config["train_micro_batch_size_per_gpu"] = batch.microBatchPerGpu;
  config["gradient_accumulation_steps"] = batch.gradientAccumulation;
  return config.dump(2) + "\n";
}

namespace {

// A private directory (mode 0700) under $TMPDIR; IoError when it cannot be made.
std::string makePrivateTemporaryDirectory() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      fmt::format("{}/stretch-ds-config-XXXXXX", tmp != nullptr && *tmp != '\0' ? tmp : "/tmp");
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw IoError(fmt::format("cannot create a directory for STRETCH_DS_CONFIG ({}): {}", pattern,
                              std::strerror(errno)));
  }
  return pattern;
}

void removeQuietly(const std::string& dir) {
  try {
    removeTree(dir);
  } catch (...) {  // best effort: a leftover temporary directory is not worth a crash
  }
}

}  // namespace

GenerationConfigs::GenerationConfigs(std::string configJson, std::string dir)
    : configJson_(std::move(configJson)), dir_(std::move(dir)) {
  try {
    if (dir_.empty()) {
      dir_ = makePrivateTemporaryDirectory();
      ownsDir_ = true;
    } else {
      makeDirectories(dir_);
    }
  } catch (const IoError&) {
    // A full disk is no reason not to start: pathFor reports it and falls back.
  }
}

GenerationConfigs::~GenerationConfigs() {
  if (ownsDir_)
    removeQuietly(dir_);
  if (!fallbackDir_.empty())
    removeQuietly(fallbackDir_);
}

std::string GenerationConfigs::pathFor(std::uint64_t generation, const config::BatchTriple& batch) {
  std::lock_guard lock(mutex_);
  if (written_ == generation)
    return path_;
  const std::string text = generationConfigText(configJson_, batch);
  const std::string name = fmt::format("ds_config.generation_{}.json", generation);
  written_ = generation;
  path_.clear();
  std::string problem;
  if (!dir_.empty()) {
    const std::string path = joinPath(dir_, name);
    try {
      writeFileAtomically(path, text);
      path_ = path;
      return path_;
    } catch (const IoError& e) {
      problem = fmt::format("generation {}'s config copy {}: {}", generation, path, e.what());
    }
  } else {
    problem = fmt::format("generation {}'s config copy: no directory to write it in", generation);
  }
  // Logging never ends a job: the copy goes to a private directory under $TMPDIR instead, and
  // when that fails too the workers go without STRETCH_DS_CONFIG this generation (they still get
  // the batch in STRETCH_TRAIN_BATCH_SIZE, STRETCH_MICRO_BATCH_SIZE and
  // STRETCH_GRADIENT_ACCUMULATION_STEPS).
  if (!ownsDir_) {
    try {
      if (fallbackDir_.empty())
        fallbackDir_ = makePrivateTemporaryDirectory();
      const std::string path = joinPath(fallbackDir_, name);
      writeFileAtomically(path, text);
      path_ = path;
    } catch (const IoError& e) {
      problem += fmt::format("; and in $TMPDIR: {}", e.what());
    }
  }
  problem += path_.empty()
                 ? "; the workers get no STRETCH_DS_CONFIG in this generation, only the batch in "
                   "STRETCH_TRAIN_BATCH_SIZE, STRETCH_MICRO_BATCH_SIZE and "
                   "STRETCH_GRADIENT_ACCUMULATION_STEPS; the job goes on"
                 : fmt::format("; the workers get {} instead; the job goes on", path_);
  spdlog::error("agent: {}", problem);
  problems_.push_back(problem);
  lost_.push_back(problem);
  return path_;
}

std::vector<std::string> GenerationConfigs::takeProblems() {
  std::lock_guard lock(mutex_);
  return std::exchange(problems_, {});
}

std::vector<std::string> GenerationConfigs::lostOutput() const {
  std::lock_guard lock(mutex_);
  return lost_;
}

}  // namespace stretch::launcher
