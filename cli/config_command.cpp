// `stretch config`: validate a DeepSpeed config, show its warnings, the batch a given world size
// trains with, or the normalised config with every default filled in.

#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "runtime/config/ds_config.hpp"
#include "runtime/elasticity/runtime_batch.hpp"

namespace stretch::cli {

namespace {

struct ConfigOptions {
  std::string configPath;
  std::int64_t worldSize = 0;
  std::int64_t modelParallelSize = 1;
  bool normalized = false;
};

int runConfig(const ConfigOptions& opts) {
  return runCommand("config", ErrorStyle{}, [&] {
    const config::ParsedConfig parsed = config::loadConfig(opts.configPath);
    for (const std::string& w : parsed.warnings) {
      printWarning("config", w);
    }
    if (opts.normalized) {
      std::cout << config::toJson(parsed.config) << "\n";
      return kExitOk;
    }
    std::cout << fmt::format("{}: valid DeepSpeed config\n", opts.configPath);
    if (opts.worldSize > 0) {
      const auto batch = elasticity::resolveTrainingBatch(
          parsed.config, opts.worldSize, elasticity::ElasticEnvironment::fromProcess(),
          opts.modelParallelSize);
      for (const std::string& w : batch.warnings) {
        printWarning("config", w);
      }
      std::cout << fmt::format(
          "at {} GPUs (data-parallel size {}): train_batch_size {}, "
          "train_micro_batch_size_per_gpu {}, gradient_accumulation_steps {}\n",
          opts.worldSize, batch.dataParallelSize, batch.triple.trainBatchSize,
          batch.triple.microBatchPerGpu, batch.triple.gradientAccumulation);
    }
    return kExitOk;
  });
}

}  // namespace

Command addConfigCommand(CLI::App& app) {
  auto opts = std::make_shared<ConfigOptions>();
  CLI::App* sub = app.add_subcommand(
      "config",
      "Validate a DeepSpeed config: report errors (with the JSON path, the value and what was "
      "expected) and warnings for unknown keys; optionally resolve the batch for a world size.");
  sub->add_option("config", opts->configPath, "DeepSpeed config file (JSON)")->required();
  sub->add_option("-w,--world-size", opts->worldSize,
                  "Resolve train_batch_size / micro batch / accumulation for this many GPUs")
      ->check(CLI::PositiveNumber);
  sub->add_option("--model-parallel-size", opts->modelParallelSize,
                  "Model-parallel GPUs per data-parallel rank (non-elastic configs)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_flag("--normalized", opts->normalized,
                "Print the config with every default filled in, as JSON");
  return {sub, [opts] { return runConfig(*opts); }};
}

}  // namespace stretch::cli
