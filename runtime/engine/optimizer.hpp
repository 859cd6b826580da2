#pragma once
// Optimizers over one flat fp32 tensor: the engine keeps every trainable parameter in a single
// fp32 master buffer and gives each rank's optimizer its partition of it (all of it without
// ZeRO). Adam, AdamW and SGD are element-wise, so stepping a flat partition computes exactly
// what stepping each parameter would, and partitioning the state for ZeRO 1/2 or re-slicing it
// for a new world size is a matter of offsets.
//
// Config (DeepSpeed's "optimizer" section, types matched case-insensitively):
//   Adam  / AdamW : lr 1e-3, betas [0.9, 0.999], eps 1e-8, weight_decay 0, bias_correction true;
//                   "Adam" decays weights decoupled (AdamW) unless "adam_w_mode": false, as
//                   DeepSpeed's FusedAdam; "torch_adam" accepted and ignored; "amsgrad": true is
//                   an error (FusedAdam raises too).
//   SGD           : lr (required), momentum 0, dampening 0, weight_decay 0, nesterov false.
// A client optimizer is any FlatOptimizer subclass passed to initialize().

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "runtime/config/ds_config.hpp"

namespace stretch::engine {

class FlatOptimizer {
 public:
  virtual ~FlatOptimizer() = default;

  virtual std::string name() const = 0;
  // One update of `param` (fp32, 1-D) from `grad` (same shape, already unscaled and clipped).
  // The state is created on the first step, shaped like param.
  virtual void step(torch::Tensor& param, const torch::Tensor& grad) = 0;

  virtual double lr() const = 0;
  virtual void setLr(double lr) = 0;
  // beta1 for Adam, momentum for SGD: what DeepSpeed's OneCycle cycles (nullopt: not supported).
  virtual std::optional<double> momentum() const { return std::nullopt; }
  virtual void setMomentum(double /*value*/) {}

  // Element-wise state tensors (shaped like the param) by name, e.g. exp_avg, exp_avg_sq; and
  // scalar state (e.g. the step count). Used by checkpoints, which slice the tensors by offset.
  virtual std::vector<std::string> stateTensorNames() const = 0;
  virtual std::map<std::string, torch::Tensor> stateTensors() const = 0;
  virtual std::map<std::string, double> scalarState() const = 0;
  // Installs state for a param of `numel` elements (tensors must have that many elements).
  virtual void loadState(const std::map<std::string, torch::Tensor>& tensors,
                         const std::map<std::string, double>& scalars) = 0;
  // Bytes of state held now (the per-rank optimizer memory ZeRO divides).
  std::int64_t stateBytes() const;
  // The hyper-parameters, for logs and checkpoints.
  virtual std::map<std::string, double> hyperParameters() const = 0;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0.0;
  bool decoupledWeightDecay = true;  // AdamW
  bool biasCorrection = true;
};

class AdamOptimizer final : public FlatOptimizer {
 public:
  explicit AdamOptimizer(AdamOptions options);
  std::string name() const override { return options_.decoupledWeightDecay ? "AdamW" : "Adam"; }
  void step(torch::Tensor& param, const torch::Tensor& grad) override;
  double lr() const override { return options_.lr; }
  void setLr(double lr) override { options_.lr = lr; }
  std::optional<double> momentum() const override { return options_.beta1; }
  void setMomentum(double value) override { options_.beta1 = value; }
  std::vector<std::string> stateTensorNames() const override { return {"exp_avg", "exp_avg_sq"}; }
  std::map<std::string, torch::Tensor> stateTensors() const override;
  std::map<std::string, double> scalarState() const override;
  void loadState(const std::map<std::string, torch::Tensor>& tensors,
                 const std::map<std::string, double>& scalars) override;
  std::map<std::string, double> hyperParameters() const override;
  const AdamOptions& options() const noexcept { return options_; }

 private:
  AdamOptions options_;
  std::int64_t step_ = 0;
  torch::Tensor expAvg_;
  torch::Tensor expAvgSq_;
};

struct SgdOptions {
  double lr = 0.0;
  double momentum = 0.0;
  double dampening = 0.0;
  double weightDecay = 0.0;
  bool nesterov = false;
};

class SgdOptimizer final : public FlatOptimizer {
 public:
  explicit SgdOptimizer(SgdOptions options);
  std::string name() const override { return "SGD"; }
  void step(torch::Tensor& param, const torch::Tensor& grad) override;
  double lr() const override { return options_.lr; }
  void setLr(double lr) override { options_.lr = lr; }
  std::optional<double> momentum() const override { return options_.momentum; }
  void setMomentum(double value) override { options_.momentum = value; }
  std::vector<std::string> stateTensorNames() const override { return {"momentum_buffer"}; }
  std::map<std::string, torch::Tensor> stateTensors() const override;
  std::map<std::string, double> scalarState() const override;
  void loadState(const std::map<std::string, torch::Tensor>& tensors,
                 const std::map<std::string, double>& scalars) override;
  std::map<std::string, double> hyperParameters() const override;

 private:
  SgdOptions options_;
  torch::Tensor momentumBuffer_;
};

// Builds the optimizer the config names. Throws ConfigError naming optimizer.type or
// optimizer.params.<key>, the value and what was expected.
std::unique_ptr<FlatOptimizer> makeOptimizer(const config::OptimizerConfig& config);

}  // namespace stretch::engine
