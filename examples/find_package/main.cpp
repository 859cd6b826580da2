// A LibTorch training program on Stretch's engine, built outside the source tree against the
// installed package (CMakeLists.txt here, docs/install.md). It reads a DeepSpeed config with an
// elasticity section, asks the elastic solver for the global batch and the world sizes it
// allows, joins the job's process group when a launcher started it (`stretch launch`), and
// trains y = 3x - 1 with the engine for a few steps. The last line, "ok ...", is what
// tests/install checks.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/linear.h>

#include "runtime/comm/builtin/builtin_backends.hpp"
#include "runtime/comm/init_distributed.hpp"
#include "runtime/config/ds_config.hpp"
#include "runtime/elasticity/solver.hpp"
#include "runtime/engine/engine.hpp"

namespace {

constexpr const char* kConfig = R"({
  "elasticity": {"enabled": true, "max_train_batch_size": 16, "micro_batch_sizes": [2, 4],
                 "min_gpus": 1, "max_gpus": 4, "version": 0.1},
  "optimizer": {"type": "SGD", "params": {"lr": 0.1}}
})";

}  // namespace

int main() {
  using namespace stretch;
  const config::DsConfig config = config::parseConfig(kConfig, "find_package example").config;
  const elasticity::ElasticPlan plan = elasticity::computeElasticConfig(config.elasticity);
  std::string sizes;
  for (std::int64_t size : plan.validWorldSizes)
    sizes += (sizes.empty() ? "" : ",") + std::to_string(size);
  std::printf("elastic global batch %lld, world sizes %s\n",
              static_cast<long long>(plan.finalBatchSize), sizes.c_str());

  // Under a launcher (WORLD_SIZE set): the job's group over Gloo; alone: a group of one.
  engine::InitOptions options;
  if (std::getenv("WORLD_SIZE") != nullptr) {
    comm::registerBuiltinBackends();
    options.processGroup = comm::initDistributed();
  }

  torch::manual_seed(0);
  const torch::Tensor x = torch::linspace(-1, 1, 64).unsqueeze(1);
  options.trainingData = engine::TensorDataset{x, 3 * x - 1};
  auto [engine, optimizer, loader, scheduler] =
      engine::initialize(torch::nn::AnyModule(torch::nn::Linear(1, 1)), config, options);

  double first = 0;
  double last = 0;
  const std::int64_t microSteps = 40 * engine->gradientAccumulationSteps();
  for (std::int64_t i = 0; i < microSteps; ++i) {
    const engine::Batch batch = loader->next();
    const torch::Tensor loss =
        torch::nn::functional::mse_loss(engine->forward(batch.inputs), batch.targets);
    engine->backward(loss);
    engine->step();
    last = loss.item<double>();
    if (i == 0)
      first = last;
  }
  std::printf("ok rank %d of %d: micro batch %lld x accumulation %lld, loss %.4f -> %.4f\n",
              engine->dpRank(), engine->dpWorldSize(),
              static_cast<long long>(engine->microBatchSize()),
              static_cast<long long>(engine->gradientAccumulationSteps()), first, last);
  return last < first ? 0 : 1;
}
