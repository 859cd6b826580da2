#include "examples/gpt/gpt_model.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <torch/torch.h>

#include "runtime/common/error.hpp"

namespace stretch::examples {

namespace F = torch::nn::functional;

void checkShape(const GptShape& shape) {
  const auto positive = [](const char* key, std::int64_t value) {
    if (value < 1)
      throw ConfigError(ErrorDetail{key, std::to_string(value), "a positive integer"});
  };
  positive("vocab", shape.vocab);
  positive("context", shape.context);
  positive("layers", shape.layers);
  positive("heads", shape.heads);
  positive("width", shape.width);
  if (shape.width % shape.heads != 0) {
    throw ConfigError(ErrorDetail{"width", std::to_string(shape.width),
                                  fmt::format("a multiple of heads ({})", shape.heads)});
  }
  if (!(shape.dropout >= 0.0 && shape.dropout < 1.0))
    throw ConfigError(ErrorDetail{"dropout", fmt::format("{}", shape.dropout), "in [0, 1)"});
}

namespace {

torch::nn::Linear linear(std::int64_t in, std::int64_t out, double stddev) {
  torch::nn::Linear layer(torch::nn::LinearOptions(in, out));
  torch::NoGradGuard noGrad;
  layer->weight.normal_(0.0, stddev);
  layer->bias.zero_();
  return layer;
}

torch::nn::LayerNorm layerNorm(std::int64_t width) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({width}));
}

double residualStd(const GptShape& shape) {
  return 0.02 / std::sqrt(2.0 * static_cast<double>(shape.layers));
}

// Reentrant activation checkpointing of one block: forward runs without building a graph and
// keeps only the block's input (and the generator state, so dropout draws the same masks);
// backward reruns the block with gradients on and back-propagates through that second graph,
// which accumulates the parameters' gradients as an ordinary backward would.
class CheckpointedBlock : public torch::autograd::Function<CheckpointedBlock> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               std::int64_t blockAddress) {
    auto* block = reinterpret_cast<BlockImpl*>(blockAddress);
    auto generator = at::globalContext().defaultGenerator(x.device());
    ctx->saved_data["rng"] = generator.get_state();
    ctx->saved_data["block"] = blockAddress;
    ctx->save_for_backward({x});
    torch::NoGradGuard noGrad;
    return block->forward(x);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list gradOutputs) {
    auto* block = reinterpret_cast<BlockImpl*>(ctx->saved_data["block"].toInt());
    const auto saved = ctx->get_saved_variables();
    torch::Tensor input = saved[0].detach().requires_grad_(true);
    auto generator = at::globalContext().defaultGenerator(input.device());
    const torch::Tensor current = generator.get_state();
    generator.set_state(ctx->saved_data["rng"].toTensor());
    torch::Tensor output;
    {
      torch::AutoGradMode enable(true);
      output = block->forward(input);
    }
    generator.set_state(current);
    torch::autograd::backward({output}, {gradOutputs[0]});
    return {input.grad(), torch::Tensor()};
  }
};

}  // namespace

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const GptShape& shape) : heads_(shape.heads) {
  c_attn = register_module("c_attn", linear(shape.width, 3 * shape.width, 0.02));
  c_proj = register_module("c_proj", linear(shape.width, shape.width, residualStd(shape)));
  attn_dropout = register_module("attn_dropout", torch::nn::Dropout(shape.dropout));
  resid_dropout = register_module("resid_dropout", torch::nn::Dropout(shape.dropout));
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x) {
  const auto b = x.size(0);
  const auto t = x.size(1);
  const auto c = x.size(2);
  const auto d = c / heads_;
  const auto qkv = c_attn->forward(x).split(c, 2);
  const auto q = qkv[0].view({b, t, heads_, d}).transpose(1, 2);
  const auto k = qkv[1].view({b, t, heads_, d}).transpose(1, 2);
  const auto v = qkv[2].view({b, t, heads_, d}).transpose(1, 2);
  auto att = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(d)));
  const auto future =
      torch::ones({t, t}, torch::TensorOptions().dtype(torch::kBool).device(x.device())).triu(1);
  att = att.masked_fill(future, -std::numeric_limits<double>::infinity());
  att = attn_dropout->forward(torch::softmax(att, -1));
  const auto y = torch::matmul(att, v).transpose(1, 2).contiguous().view({b, t, c});
  return resid_dropout->forward(c_proj->forward(y));
}

MlpImpl::MlpImpl(const GptShape& shape) {
  c_fc = register_module("c_fc", linear(shape.width, 4 * shape.width, 0.02));
  c_proj = register_module("c_proj", linear(4 * shape.width, shape.width, residualStd(shape)));
  dropout = register_module("dropout", torch::nn::Dropout(shape.dropout));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  return dropout->forward(c_proj->forward(torch::gelu(c_fc->forward(x))));
}

BlockImpl::BlockImpl(const GptShape& shape) {
  ln_1 = register_module("ln_1", layerNorm(shape.width));
  attn = register_module("attn", CausalSelfAttention(shape));
  ln_2 = register_module("ln_2", layerNorm(shape.width));
  mlp = register_module("mlp", Mlp(shape));
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x) {
  const auto y = x + attn->forward(ln_1->forward(x));
  return y + mlp->forward(ln_2->forward(y));
}

GptImpl::GptImpl(const GptShape& shape) : shape_(shape) {
  checkShape(shape);
  wte = register_module("wte", torch::nn::Embedding(shape.vocab, shape.width));
  wpe = register_module("wpe", torch::nn::Embedding(shape.context, shape.width));
  {
    torch::NoGradGuard noGrad;
    wte->weight.normal_(0.0, 0.02);
    wpe->weight.normal_(0.0, 0.02);
  }
  drop = register_module("drop", torch::nn::Dropout(shape.dropout));
  h = register_module("h", torch::nn::ModuleList());
  for (std::int64_t i = 0; i < shape.layers; ++i)
    h->push_back(Block(shape));
  ln_f = register_module("ln_f", layerNorm(shape.width));
}

torch::Tensor GptImpl::forward(const torch::Tensor& tokens) {
  const auto t = tokens.size(1);
  if (t > shape_.context) {
    throw ConfigError(ErrorDetail{"sequence length", std::to_string(t),
                                  fmt::format("at most the context ({})", shape_.context)});
  }
  const auto positions =
      torch::arange(t, torch::TensorOptions().dtype(torch::kInt64).device(tokens.device()));
  auto x = drop->forward(wte->forward(tokens) + wpe->forward(positions));
  const bool checkpoint =
      shape_.activationCheckpointing && is_training() && torch::GradMode::is_enabled();
  for (const auto& module : *h) {
    auto* block = module->as<BlockImpl>();
    if (checkpoint && x.requires_grad())
      x = CheckpointedBlock::apply(x, reinterpret_cast<std::int64_t>(block));
    else
      x = block->forward(x);
  }
  return F::linear(ln_f->forward(x), wte->weight);
}

std::vector<std::int64_t> generate(Gpt& model, std::vector<std::int64_t> prompt, std::int64_t count,
                                   double temperature, std::uint64_t seed) {
  torch::NoGradGuard noGrad;
  const bool wasTraining = model->is_training();
  model->eval();
  auto generator = at::detail::createCPUGenerator(seed);
  const auto device = model->wte->weight.device();
  for (std::int64_t i = 0; i < count; ++i) {
    const auto begin = prompt.size() > static_cast<std::size_t>(model->shape().context)
                           ? prompt.end() - static_cast<std::ptrdiff_t>(model->shape().context)
                           : prompt.begin();
    const std::vector<std::int64_t> window(begin, prompt.end());
    const auto tokens =
        torch::tensor(window, torch::kInt64).view({1, static_cast<std::int64_t>(window.size())});
    const auto logits = model->forward(tokens.to(device)).select(1, -1).to(torch::kFloat32).cpu();
    const auto probs = torch::softmax(logits / temperature, -1);
    prompt.push_back(torch::multinomial(probs, 1, false, generator).item<std::int64_t>());
  }
  if (wasTraining)
    model->train();
  return prompt;
}

}  // namespace stretch::examples
