// stretch-bench-engine: training throughput and peak memory of one rank of a job, for the
// side-by-side comparison with PyTorch DDP (bench/compare_engine.py).
//
//   stretch-bench-engine --mode engine [--hidden 2048 --layers 4 --batch 64 --steps 30 --warmup 5]
//   stretch-bench-engine --mode plain  ...      (a plain LibTorch loop: no engine, one process)
//
// With WORLD_SIZE etc. set (one process per rank), --mode engine joins over Gloo and trains data
// parallel, micro batch = batch / world. Prints one JSON object on rank 0:
//   {"mode", "ranks", "steps", "seconds", "steps_per_s", "peak_rss_mib", "final_loss"}
// The engine overlaps its gradient all-reduce with backward in 25 MiB buckets (overlap_comm,
// reduce_bucket_size 6,553,600 fp32 elements), as DDP does by default (bucket_cap_mb 25).
// The model: `layers` Linear(hidden, hidden) + ReLU blocks and a Linear(hidden, 10) head, Adam
// (lr 1e-4), MSE against fixed random targets, fp32, one thread per rank (torch::set_num_threads
// (1), as torchrun's OMP_NUM_THREADS=1).

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "runtime/comm/builtin/builtin_backends.hpp"
#include "runtime/comm/init_distributed.hpp"
#include "runtime/config/ds_config.hpp"
#include "runtime/engine/engine.hpp"

#ifdef STRETCH_BENCH_HAVE_CUDA  // LibTorch built with CUDA (bench/CMakeLists.txt)
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace {

struct MlpImpl : torch::nn::Module {
  MlpImpl(int layers, std::int64_t hidden) {
    for (int i = 0; i < layers; ++i)
      blocks.push_back(register_module("l" + std::to_string(i), torch::nn::Linear(hidden, hidden)));
    head = register_module("head", torch::nn::Linear(hidden, 10));
  }
  torch::Tensor forward(torch::Tensor x) {
    for (auto& b : blocks)
      x = torch::relu(b->forward(x));
    return head->forward(x);
  }
  std::vector<torch::nn::Linear> blocks;
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(Mlp);

// Peak bytes the caching allocator handed out on the current CUDA device, in MiB (0 on the CPU).
double peakDeviceMib(const torch::Device& device) {
#ifdef STRETCH_BENCH_HAVE_CUDA
  if (device.is_cuda()) {
    const auto stats =
        c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
    return static_cast<double>(stats.allocated_bytes[0].peak) / (1024.0 * 1024.0);
  }
#endif
  (void)device;
  return 0.0;
}

double peakRssMib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "engine";
  int layers = 4;
  std::int64_t hidden = 2048;
  std::int64_t batch = 64;
  int steps = 30;
  int warmup = 5;
  int zeroStage = 0;
  std::string deviceName = "cpu";
  std::string dtypeName = "fp32";
  CLI::App app{"One rank of the engine benchmark (see bench/compare_engine.py)",
               "stretch-bench-engine"};
  app.add_option("--mode", mode, "engine or plain")
      ->check(CLI::IsMember({"engine", "plain"}))
      ->capture_default_str();
  app.add_option("--layers", layers)->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--hidden", hidden)->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--batch", batch, "global batch")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--steps", steps, "timed steps")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--warmup", warmup, "untimed steps first")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--zero-stage", zeroStage)->check(CLI::Range(0, 2))->capture_default_str();
  app.add_option("--device", deviceName, "cpu, cuda or cuda:N")->capture_default_str();
  app.add_option("--dtype", dtypeName, "fp32, fp16 (dynamic loss scaling) or bf16")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    torch::set_num_threads(1);
    spdlog::set_level(spdlog::level::warn);
    std::shared_ptr<stretch::comm::ProcessGroup> group;
    if (mode == "engine" && std::getenv("WORLD_SIZE") != nullptr) {
      stretch::comm::registerBuiltinBackends();
      group = stretch::comm::initDistributed({});
    }
    const int ranks = group ? group->size() : 1;
    const int rank = group ? group->rank() : 0;
    if (batch % ranks != 0) {
      std::cerr << fmt::format(
          "stretch-bench-engine: error: --batch {} is not divisible by {} ranks\n", batch, ranks);
      return 2;
    }
    const std::int64_t micro = batch / ranks;
    const torch::Device device(deviceName);
    const torch::ScalarType dtype = dtypeName == "fp16"   ? torch::kFloat16
                                    : dtypeName == "bf16" ? torch::kBFloat16
                                                          : torch::kFloat32;
    torch::manual_seed(0);
    Mlp model(layers, hidden);
    torch::manual_seed(1 + static_cast<std::uint64_t>(rank));
    const auto x = torch::randn({micro, hidden}).to(device, dtype);
    const auto y = torch::randn({micro, 10}).to(device, torch::kFloat32);

    std::function<double()> trainStep;
    std::shared_ptr<stretch::engine::Engine> engine;
    std::unique_ptr<torch::optim::Adam> adam;
    if (mode == "engine") {
      const auto config = stretch::config::parseConfig(fmt::format(
          R"({{"train_batch_size": {}, "train_micro_batch_size_per_gpu": {},
              "zero_optimization": {{"stage": {}, "overlap_comm": true,
                                     "reduce_bucket_size": 6553600}},
              "fp16": {{"enabled": {}}}, "bf16": {{"enabled": {}}},
              "optimizer": {{"type": "Adam", "params": {{"lr": 1e-4, "adam_w_mode": false}}}}}})",
          batch, micro, zeroStage, dtypeName == "fp16" ? "true" : "false",
          dtypeName == "bf16" ? "true" : "false"));
      stretch::engine::InitOptions options;
      options.processGroup = group;
      options.device = device;
      engine =
          stretch::engine::initialize(torch::nn::AnyModule(model), config.config, options).engine;
      trainStep = [&] {
        auto loss = (engine->forward(x).to(torch::kFloat32) - y).pow(2).mean();
        engine->backward(loss);
        engine->step();
        return loss.item<double>();
      };
    } else {
      if (dtype != torch::kFloat32) {
        std::cerr << "stretch-bench-engine: error: --mode plain trains in fp32 only\n";
        return 2;
      }
      model->to(device);
      adam = std::make_unique<torch::optim::Adam>(model->parameters(),
                                                  torch::optim::AdamOptions(1e-4));
      trainStep = [&] {
        adam->zero_grad();
        auto loss = torch::mse_loss(model->forward(x), y);
        loss.backward();
        adam->step();
        return loss.item<double>();
      };
    }
    for (int i = 0; i < warmup; ++i)
      trainStep();
    if (group)
      group->barrier()->wait();
    const auto start = std::chrono::steady_clock::now();
    double loss = 0;
    for (int i = 0; i < steps; ++i)
      loss = trainStep();  // loss.item() synchronises with the device every step
    if (group)
      group->barrier()->wait();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // The job's peak: the largest rank's.
    std::vector<double> rss = {peakRssMib()};
    if (group)
      group->allReduce(stretch::comm::BufferView::of(std::span(rss)), stretch::comm::ReduceOp::Max)
          ->wait();
    if (rank == 0) {
      nlohmann::json out = {{"mode", mode},
                            {"ranks", ranks},
                            {"steps", steps},
                            {"seconds", seconds},
                            {"steps_per_s", steps / seconds},
                            {"peak_rss_mib", rss[0]},
                            {"final_loss", loss},
                            {"device", device.str()},
                            {"dtype", dtypeName},
                            {"peak_device_mib", peakDeviceMib(device)}};
      std::cout << out.dump() << std::endl;
    }
    stretch::comm::destroyProcessGroup();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "stretch-bench-engine: error: " << e.what() << "\n";
    return 1;
  }
}
