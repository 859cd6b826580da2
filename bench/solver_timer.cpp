// stretch-solver-timer: times computeElasticConfig on one DeepSpeed config, in-process, the way
// bench/compare_deepspeed.py times DeepSpeed's compute_elastic_config (the config is parsed once,
// outside the timed region, as DeepSpeed's function also receives an already-parsed dict).
// Prints one JSON line: {"ns_per_call", "calls", "final_batch_size", "valid_gpus", "micro_batch"}
// or {"error", "message"} (exit 2).

#include <chrono>
#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "runtime/common/error.hpp"
#include "runtime/config/ds_config.hpp"
#include "runtime/elasticity/runtime_batch.hpp"
#include "runtime/elasticity/solver.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Time Stretch's elastic solver on one DeepSpeed config (prints one JSON line)",
               "stretch-solver-timer"};
  std::string path;
  std::int64_t worldSize = 0;
  double minSeconds = 0.2;
  bool returnMicro = false;
  app.add_option("-c,--config", path, "DeepSpeed config (JSON)")->required();
  app.add_option("-w,--world-size", worldSize, "world size argument (0 = none)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--min-seconds", minSeconds, "keep calling until this much time has passed")
      ->check(CLI::PositiveNumber);
  app.add_flag("--return-microbatch", returnMicro, "DeepSpeed's return_microbatch");
  CLI11_PARSE(app, argc, argv);

  nlohmann::ordered_json out;
  try {
    const auto parsed = stretch::config::loadConfig(path);
    stretch::elasticity::SolveRequest request;
    request.worldSize = worldSize;
    request.returnMicroBatch = returnMicro;
    request.envWorldSize = stretch::elasticity::ElasticEnvironment::fromProcess().worldSize;
    const auto& c = parsed.config.elasticity;

    using Clock = std::chrono::steady_clock;
    stretch::elasticity::ElasticPlan plan = stretch::elasticity::computeElasticConfig(c, request);
    std::int64_t calls = 0;
    std::int64_t batch = 1;
    const auto start = Clock::now();
    auto elapsed = Clock::duration::zero();
    // Batches of calls amortise the clock reads; the batch grows until it spans >= 1 ms.
    while (elapsed < std::chrono::duration<double>(minSeconds)) {
      const auto t0 = Clock::now();
      for (std::int64_t i = 0; i < batch; ++i) {
        plan = stretch::elasticity::computeElasticConfig(c, request);
      }
      const auto t1 = Clock::now();
      calls += batch;
      elapsed = t1 - start;
      if (t1 - t0 < std::chrono::milliseconds(1)) {
        batch *= 2;
      }
    }
    out["ns_per_call"] =
        std::chrono::duration<double, std::nano>(elapsed).count() / static_cast<double>(calls);
    out["calls"] = calls;
    out["final_batch_size"] = plan.finalBatchSize;
    out["valid_gpus"] = plan.validWorldSizes;
    out["micro_batch"] = plan.microBatch ? nlohmann::ordered_json(*plan.microBatch)
                                         : nlohmann::ordered_json(nullptr);
    std::cout << out.dump() << "\n";
    return 0;
  } catch (const stretch::Error& e) {
    out["error"] = e.kind();
    out["message"] = e.what();
    std::cout << out.dump() << "\n";
    return 2;
  }
}
