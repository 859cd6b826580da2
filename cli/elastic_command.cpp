// `stretch elastic`: DeepSpeed's ds_elastic, exact and fast. Prints the elastic batch plan of a
// DeepSpeed config: the final batch and every valid world size with its micro batch and gradient
// accumulation steps.

#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "runtime/config/ds_config.hpp"
#include "runtime/elasticity/runtime_batch.hpp"
#include "runtime/elasticity/solver.hpp"

namespace stretch::cli {

namespace {

struct ElasticOptions {
  std::string configPath;
  std::int64_t worldSize = 0;
  std::string targetVersion = std::string(elasticity::kCompatibleDeepspeedVersion);
  bool json = false;
};

void printHuman(const config::ElasticityConfig& c, const elasticity::ElasticPlan& plan,
                const ElasticOptions& opts) {
  const bool dataParallel = plan.version != config::ElasticityVersion::V0_1;
  const auto rows = elasticity::worldSizeTable(c, plan);
  std::cout << fmt::format("Elastic batch plan for {} (elasticity version {})\n", opts.configPath,
                           config::toString(plan.version));
  std::cout << fmt::format("  final train batch size : {}\n", plan.finalBatchSize);
  std::cout << fmt::format("  valid world sizes      : {} {}\n", plan.validWorldSizes.size(),
                           dataParallel ? "data-parallel sizes" : "GPU counts");
  if (plan.microBatch) {
    std::cout << fmt::format("  at world size {:<9}: micro batch {}, gradient accumulation {}\n",
                             plan.resolvedWorldSize, *plan.microBatch,
                             plan.finalBatchSize / (*plan.microBatch * plan.resolvedWorldSize));
  }
  std::cout << "\n";
  if (dataParallel) {
    std::cout << fmt::format("{:>14} {:>8} {:>12} {:>12}\n", "data-parallel", "GPUs", "micro batch",
                             "grad accum");
  } else {
    std::cout << fmt::format("{:>8} {:>12} {:>12}\n", "GPUs", "micro batch", "grad accum");
  }
  for (const auto& row : rows) {
    if (dataParallel) {
      std::cout << fmt::format("{:>14} {:>8} {:>12} {:>12}\n", row.worldSize, row.gpus,
                               row.microBatch, row.gradientAccumulation);
    } else {
      std::cout << fmt::format("{:>8} {:>12} {:>12}\n", row.worldSize, row.microBatch,
                               row.gradientAccumulation);
    }
  }
}

int runElastic(const ElasticOptions& opts) {
  return runCommand("elastic", ErrorStyle{.json = opts.json}, [&] {
    const config::ParsedConfig parsed = config::loadConfig(opts.configPath);
    for (const std::string& w : parsed.warnings) {
      printWarning("elastic", w);
    }
    const elasticity::ElasticEnvironment env = elasticity::ElasticEnvironment::fromProcess();
    elasticity::SolveRequest request;
    request.worldSize = opts.worldSize;
    request.envWorldSize = env.worldSize;
    request.targetDeepspeedVersion = opts.targetVersion;
    const config::ElasticityConfig& c = parsed.config.elasticity;
    const elasticity::ElasticPlan plan = elasticity::computeElasticConfig(c, request);
    if (opts.json) {
      nlohmann::ordered_json out;
      out["final_batch_size"] = plan.finalBatchSize;
      out["valid_gpus"] = plan.validWorldSizes;
      out["micro_batch"] = plan.microBatch ? nlohmann::ordered_json(*plan.microBatch)
                                           : nlohmann::ordered_json(nullptr);
      std::cout << out.dump() << "\n";
    } else {
      printHuman(c, plan, opts);
    }
    return kExitOk;
  });
}

}  // namespace

Command addElasticCommand(CLI::App& app) {
  auto opts = std::make_shared<ElasticOptions>();
  CLI::App* sub = app.add_subcommand(
      "elastic",
      "Compute the elastic batch plan of a DeepSpeed config: the global train batch that stays "
      "valid across the most world sizes, and each valid size with its micro batch and gradient "
      "accumulation steps (DeepSpeed's ds_elastic; versions 0.1, 0.2 and Stretch's \"exact\").");
  sub->add_option("-c,--config", opts->configPath,
                  "DeepSpeed config (JSON; comments and trailing commas allowed) with an "
                  "\"elasticity\" section")
      ->required();
  sub->add_option("-w,--world-size", opts->worldSize,
                  "Total GPUs of the job: check it is valid and show its micro batch. Version 0.2 "
                  "reads WORLD_SIZE when this is not given.")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--target-version", opts->targetVersion,
                  "DeepSpeed version the scheduler targets (elasticity needs >= 0.3.8)")
      ->capture_default_str();
  sub->add_flag("--json", opts->json,
                "Print one JSON object: {\"final_batch_size\", \"valid_gpus\", \"micro_batch\"} "
                "or {\"error\", \"message\"}");
  return {sub, [opts] { return runElastic(*opts); }};
}

}  // namespace stretch::cli
