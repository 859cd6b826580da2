#include "runtime/launcher/generation_config.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdlib.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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

GenerationConfigs::GenerationConfigs(std::string configJson, std::string dir)
    : configJson_(std::move(configJson)), dir_(std::move(dir)) {
  if (dir_.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        fmt::format("{}/stretch-ds-config-XXXXXX", tmp != nullptr && *tmp != '\0' ? tmp : "/tmp");
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw IoError(fmt::format("cannot create a directory for STRETCH_DS_CONFIG ({}): {}", pattern,
                                std::strerror(errno)));
    }
    dir_ = pattern;
    ownsDir_ = true;
  } else {
    makeDirectories(dir_);
  }
}

GenerationConfigs::~GenerationConfigs() {
  if (!ownsDir_)
    return;
  try {
    removeTree(dir_);
  } catch (...) {  // best effort: a leftover temporary directory is not worth a crash
  }
}

std::string GenerationConfigs::pathFor(std::uint64_t generation, const config::BatchTriple& batch) {
  std::lock_guard lock(mutex_);
  if (written_ != generation) {
    path_ = joinPath(dir_, fmt::format("ds_config.generation_{}.json", generation));
    writeFileAtomically(path_, generationConfigText(configJson_, batch));
    written_ = generation;
  }
  return path_;
}

}  // namespace stretch::launcher
