#pragma once
// A decoder-only, GPT-style language model in LibTorch's C++ modules, the layout of nanoGPT
// (and of bench/gpt_peer/gpt_peer.py, its PyTorch twin):
//
//   wte: token embedding [vocab, width]      wpe: position embedding [context, width]
//   h.i: pre-LayerNorm blocks                x = x + attn(ln_1(x)); x = x + mlp(ln_2(x))
//        attn.c_attn [width -> 3 width], causal softmax(q k^T / sqrt(d)), attn.c_proj, dropout
//        mlp.c_fc [width -> 4 width], GELU (erf), mlp.c_proj [4 width -> width], dropout
//   ln_f, then logits = x wte^T              (the output head is tied to the token embedding)
//
// Initialisation: every Linear weight and both embeddings N(0, 0.02); the residual projections
// (attn.c_proj, mlp.c_proj) N(0, 0.02 / sqrt(2 layers)); biases 0; LayerNorm weight 1, bias 0.
// With activation checkpointing on, a block keeps only its input during forward and recomputes
// its activations in backward (the dropout masks of the first pass are replayed).

#include <cstdint>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

namespace stretch::examples {

struct GptShape {
  std::int64_t vocab = 0;
  std::int64_t context = 64;  // the longest sequence (position embeddings)
  std::int64_t layers = 4;
  std::int64_t heads = 4;
  std::int64_t width = 128;
  double dropout = 0.1;
  bool activationCheckpointing = false;
};

// ConfigError naming the field when the shape cannot be built (width not a multiple of heads,
// a size below 1, dropout outside [0, 1)).
void checkShape(const GptShape& shape);

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  explicit CausalSelfAttentionImpl(const GptShape& shape);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear c_attn{nullptr};
  torch::nn::Linear c_proj{nullptr};
  torch::nn::Dropout attn_dropout{nullptr};
  torch::nn::Dropout resid_dropout{nullptr};

 private:
  std::int64_t heads_;
};
TORCH_MODULE(CausalSelfAttention);

class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(const GptShape& shape);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear c_fc{nullptr};
  torch::nn::Linear c_proj{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(Mlp);

class BlockImpl : public torch::nn::Module {
 public:
  explicit BlockImpl(const GptShape& shape);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::LayerNorm ln_1{nullptr};
  CausalSelfAttention attn{nullptr};
  torch::nn::LayerNorm ln_2{nullptr};
  Mlp mlp{nullptr};
};
TORCH_MODULE(Block);

class GptImpl : public torch::nn::Module {
 public:
  explicit GptImpl(const GptShape& shape);
  // tokens: int64 [batch, time] with time <= context; returns logits [batch, time, vocab].
  torch::Tensor forward(const torch::Tensor& tokens);
  const GptShape& shape() const noexcept { return shape_; }

  torch::nn::Embedding wte{nullptr};
  torch::nn::Embedding wpe{nullptr};
  torch::nn::Dropout drop{nullptr};
  torch::nn::ModuleList h{nullptr};
  torch::nn::LayerNorm ln_f{nullptr};

 private:
  GptShape shape_;
};
TORCH_MODULE(Gpt);

// `count` tokens continuing `prompt` (token ids), sampled at `temperature` from the model's
// distribution with a generator seeded by `seed`; the model is in eval mode meanwhile.
std::vector<std::int64_t> generate(Gpt& model, std::vector<std::int64_t> prompt, std::int64_t count,
                                   double temperature, std::uint64_t seed);

}  // namespace stretch::examples
