#pragma once
// Small models and helpers shared by the engine tests.

#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "runtime/comm/in_process_backend.hpp"
#include "runtime/comm/process_group.hpp"
#include "runtime/config/ds_config.hpp"

namespace stretch::engine::test {

// in -> hidden (tanh) -> out, the shape of the examples' models.
struct MlpImpl : torch::nn::Module {
  MlpImpl(std::int64_t in, std::int64_t hidden, std::int64_t out)
      : fc1(register_module("fc1", torch::nn::Linear(in, hidden))),
        fc2(register_module("fc2", torch::nn::Linear(hidden, out))) {}
  torch::Tensor forward(torch::Tensor x) { return fc2->forward(torch::tanh(fc1->forward(x))); }
  torch::nn::Linear fc1;
  torch::nn::Linear fc2;
};
TORCH_MODULE(Mlp);

// y = x * w + b with element-wise ops only: runs in fp16 on the CPU, where LibTorch 1.13 has no
// half-precision matmul.
struct ElementwiseImpl : torch::nn::Module {
  explicit ElementwiseImpl(std::int64_t n)
      : w(register_parameter("w", torch::randn({n}))),
        b(register_parameter("b", torch::zeros({n}))) {}
  torch::Tensor forward(torch::Tensor x) { return x * w + b; }
  torch::Tensor w;
  torch::Tensor b;
};
TORCH_MODULE(Elementwise);

// `count` Mlp(6, 12, 3) models, each built right after torch::manual_seed(0).
inline std::vector<Mlp> seededModels(int count) {
  std::vector<Mlp> models;
  for (int i = 0; i < count; ++i) {
    torch::manual_seed(0);
    models.emplace_back(6, 12, 3);
  }
  return models;
}

inline torch::Tensor flatWeights(torch::nn::Module& m) {
  std::vector<torch::Tensor> parts;
  for (const auto& p : m.parameters())
    parts.push_back(p.detach().to(torch::kFloat32).reshape({-1}));
  return torch::cat(parts);
}

inline std::int64_t parameterCount(torch::nn::Module& m) {
  std::int64_t n = 0;
  for (const auto& p : m.parameters())
    n += p.numel();
  return n;
}

inline config::DsConfig parse(const std::string& json) {
  return config::parseConfig(json).config;
}

// One in-process world and a ProcessGroup per rank over it.
struct Groups {
  std::shared_ptr<comm::InProcessWorld> world;
  std::vector<std::shared_ptr<comm::ProcessGroup>> groups;
};

inline Groups makeGroups(int size) {
  Groups g;
  g.world = std::make_shared<comm::InProcessWorld>(size, std::chrono::seconds(60));
  for (int r = 0; r < size; ++r) {
    auto group = std::make_shared<comm::ProcessGroup>(r, size);
    group->setBackend(comm::DeviceType::Cpu, g.world->backend(r));
    g.groups.push_back(group);
  }
  return g;
}

}  // namespace stretch::engine::test
