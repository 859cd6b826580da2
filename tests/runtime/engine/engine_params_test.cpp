// Parameters a real model has besides plain trainable ones, at 2 ranks for ZeRO 0, 1 and 2:
// a weight tied under two names (one slot, counted once), a frozen parameter (no gradient, no
// optimizer state, broadcast from rank 0) and a head that gets no gradient (left unchanged
// without weight decay). The reference is a plain LibTorch loop with torch::optim::AdamW on the
// whole batch, which skips parameters whose gradient is undefined as PyTorch does.

#include <string>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include "runtime/engine/engine.hpp"
#include "tests/runtime/engine/engine_test_util.hpp"

namespace stretch::engine {
namespace {

namespace F = torch::nn::functional;

struct SharedImpl : torch::nn::Module {
  explicit SharedImpl(const torch::Tensor& weight) { register_parameter("weight", weight); }
};
TORCH_MODULE(Shared);

// x -> inp -> tanh -> mid (+ frozen) -> tanh -> (mid's weight again, under tied.weight) -> tanh
// -> out; `unused` is never called.
struct RealisticImpl : torch::nn::Module {
  RealisticImpl()
      : inp(register_module("inp", torch::nn::Linear(6, 8))),
        mid(register_module("mid", torch::nn::Linear(8, 8))),
        tied(register_module("tied", Shared(mid->weight))),
        out(register_module("out", torch::nn::Linear(8, 3))),
        unused(register_module("unused", torch::nn::Linear(8, 3))),
        frozen(register_parameter("frozen", torch::randn({8}), /*requires_grad=*/false)) {}
  torch::Tensor forward(torch::Tensor x) {
    auto h = torch::tanh(inp->forward(x));
    h = torch::tanh(mid->forward(h) + frozen);
    h = torch::tanh(F::linear(h, mid->weight));
    return out->forward(h);
  }
  torch::nn::Linear inp, mid;
  Shared tied;
  torch::nn::Linear out, unused;
  torch::Tensor frozen;
};
TORCH_MODULE(Realistic);

constexpr int kRanks = 2;
constexpr int kMicro = 4;
constexpr int kGas = 2;
constexpr int kSteps = 4;
constexpr int kBatch = kRanks * kMicro * kGas;

Realistic seeded() {
  torch::manual_seed(7);
  return Realistic();
}

std::map<std::string, torch::Tensor> snapshot(torch::nn::Module& m) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& item : m.named_parameters())
    out[item.key()] = item.value().detach().clone();
  return out;
}

// The plain loop: one process, the whole batch per step, AdamW without weight decay.
std::map<std::string, torch::Tensor> plainLoop(const torch::Tensor& x, const torch::Tensor& y) {
  auto model = seeded();
  std::vector<torch::Tensor> trainable;
  for (const auto& p : model->parameters()) {
    if (p.requires_grad() &&
        std::none_of(trainable.begin(), trainable.end(), [&](const torch::Tensor& t) {
          return t.unsafeGetTensorImpl() == p.unsafeGetTensorImpl();
        })) {
      trainable.push_back(p);
    }
  }
  torch::optim::AdamW adam(trainable, torch::optim::AdamWOptions(0.01).weight_decay(0.0));
  for (int s = 0; s < kSteps; ++s) {
    adam.zero_grad();
    torch::mse_loss(model->forward(x.narrow(0, s * kBatch, kBatch)),
                    y.narrow(0, s * kBatch, kBatch))
        .backward();
    adam.step();
  }
  return snapshot(*model);
}

class EngineParameters : public ::testing::TestWithParam<int> {};

TEST_P(EngineParameters, TiedFrozenAndUnusedParametersTrainLikeAPlainLoop) {
  const int stage = GetParam();
  torch::manual_seed(11);
  const auto x = torch::randn({kSteps * kBatch, 6});
  const auto y = torch::randn({kSteps * kBatch, 3});
  const auto expected = plainLoop(x, y);

  const auto config = test::parse(fmt::format(
      R"({{"train_batch_size": {}, "train_micro_batch_size_per_gpu": {},
          "optimizer": {{"type": "AdamW", "params": {{"lr": 0.01, "weight_decay": 0.0}}}},
          "zero_optimization": {{"stage": {}}}}})",
      kBatch, kMicro, stage));
  auto groups = test::makeGroups(kRanks);
  std::vector<Realistic> models;
  for (int r = 0; r < kRanks; ++r)
    models.push_back(seeded());
  const auto initial = snapshot(*models[0]);
  {
    // Rank 1 starts with other frozen values: initialize() must replace them with rank 0's.
    torch::NoGradGuard noGrad;
    models[1]->frozen.fill_(5.0);
  }
  std::vector<std::map<std::string, torch::Tensor>> after(kRanks);
  std::vector<std::int64_t> stateBytes(kRanks);
  comm::runRankThreads(kRanks, [&](int r) {
    auto& model = models[static_cast<std::size_t>(r)];
    InitOptions options;
    options.processGroup = groups.groups[static_cast<std::size_t>(r)];
    options.device = torch::Device(torch::kCPU);
    auto engine = initialize(torch::nn::AnyModule(model), config, options).engine;
    for (int s = 0; s < kSteps; ++s) {
      for (int m = 0; m < kGas; ++m) {
        const std::int64_t begin = s * kBatch + (m * kRanks + r) * kMicro;
        engine->backward(torch::mse_loss(engine->forward(x.narrow(0, begin, kMicro)),
                                         y.narrow(0, begin, kMicro)));
        engine->step();
      }
    }
    after[static_cast<std::size_t>(r)] = snapshot(*model);
    stateBytes[static_cast<std::size_t>(r)] = engine->optimizerStateBytes();
  });

  for (int r = 0; r < kRanks; ++r) {
    SCOPED_TRACE(fmt::format("stage {}, rank {}", stage, r));
    const auto& got = after[static_cast<std::size_t>(r)];
    for (const auto& [name, tensor] : expected) {
      EXPECT_TRUE(torch::allclose(got.at(name), tensor, 1e-5, 1e-6))
          << name << ": max difference " << (got.at(name) - tensor).abs().max().item<double>();
    }
    // The tied weight is one tensor under both names; the head without gradients is untouched;
    // the frozen parameter is rank 0's initial one everywhere.
    EXPECT_TRUE(torch::equal(got.at("tied.weight"), got.at("mid.weight")));
    EXPECT_TRUE(torch::equal(got.at("unused.weight"), initial.at("unused.weight")));
    EXPECT_TRUE(torch::equal(got.at("unused.bias"), initial.at("unused.bias")));
    EXPECT_TRUE(torch::equal(got.at("frozen"), initial.at("frozen")));
  }
  // Optimizer memory counts each trainable element once (the tied weight once, the frozen
  // parameter not at all): Adam's two moments and the fp32 master, 12 bytes per element, split
  // over the ranks by ZeRO 1/2 (plus ZeRO 2's fp32 gradient partition), up to padding.
  const std::int64_t trainable = 6 * 8 + 8 + 8 * 8 + 8 + 8 * 3 + 3 + 8 * 3 + 3;
  const std::int64_t perElement = stage == 2 ? 16 : 12;
  const std::int64_t expectedBytes = stage == 0 ? 12 * ((trainable + kRanks - 1) / kRanks * kRanks)
                                                : perElement * ((trainable + kRanks - 1) / kRanks);
  EXPECT_EQ(stateBytes[0], expectedBytes);
}

INSTANTIATE_TEST_SUITE_P(ZeroStages, EngineParameters, ::testing::Values(0, 1, 2),
                         [](const auto& param) { return "Stage" + std::to_string(param.param); });

}  // namespace
}  // namespace stretch::engine
