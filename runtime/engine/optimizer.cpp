#include "runtime/engine/optimizer.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <variant>

#include <fmt/format.h>
#include <torch/torch.h>

#include "runtime/common/error.hpp"

namespace stretch::engine {

std::int64_t FlatOptimizer::stateBytes() const {
  std::int64_t bytes = 0;
  for (const auto& [name, t] : stateTensors()) {
    if (t.defined())
      bytes += t.numel() * static_cast<std::int64_t>(t.element_size());
  }
  return bytes;
}

// ---------------------------------------------------------------------------------------------
// Adam / AdamW (torch.optim.Adam / AdamW's arithmetic, on one flat tensor)

AdamOptimizer::AdamOptimizer(AdamOptions options) : options_(options) {}

void AdamOptimizer::step(torch::Tensor& param, const torch::Tensor& grad) {
  torch::NoGradGuard noGrad;
  if (!expAvg_.defined()) {
    expAvg_ = torch::zeros_like(param);
    expAvgSq_ = torch::zeros_like(param);
  }
  ++step_;
  torch::Tensor g = grad;
  if (options_.weightDecay != 0.0) {
    if (options_.decoupledWeightDecay)
      param.mul_(1.0 - options_.lr * options_.weightDecay);
    else
      g = g.add(param, options_.weightDecay);
  }
  expAvg_.mul_(options_.beta1).add_(g, 1.0 - options_.beta1);
  expAvgSq_.mul_(options_.beta2).addcmul_(g, g, 1.0 - options_.beta2);
  const auto stepD = static_cast<double>(step_);
  const double bc1 = options_.biasCorrection ? 1.0 - std::pow(options_.beta1, stepD) : 1.0;
  const double bc2 = options_.biasCorrection ? 1.0 - std::pow(options_.beta2, stepD) : 1.0;
  // torch.optim.Adam's (sqrt(v) / sqrt(bc2)) + eps, with one temporary instead of two.
  torch::Tensor denom = expAvgSq_.sqrt();
  denom.div_(std::sqrt(bc2)).add_(options_.eps);
  param.addcdiv_(expAvg_, denom, -options_.lr / bc1);
}

std::map<std::string, torch::Tensor> AdamOptimizer::stateTensors() const {
  return {{"exp_avg", expAvg_}, {"exp_avg_sq", expAvgSq_}};
}

std::map<std::string, double> AdamOptimizer::scalarState() const {
  return {{"step", static_cast<double>(step_)}};
}

void AdamOptimizer::loadState(const std::map<std::string, torch::Tensor>& tensors,
                              const std::map<std::string, double>& scalars) {
  const auto a = tensors.find("exp_avg");
  const auto b = tensors.find("exp_avg_sq");
  const auto s = scalars.find("step");
  if (a == tensors.end() && b == tensors.end()) {  // saved before the first step
    expAvg_ = torch::Tensor();
    expAvgSq_ = torch::Tensor();
    step_ = s == scalars.end() ? 0 : static_cast<std::int64_t>(s->second);
    return;
  }
  if (a == tensors.end() || b == tensors.end() || s == scalars.end())
    throw ConfigError("Adam state: expected exp_avg, exp_avg_sq and step");
  expAvg_ = a->second.to(torch::kFloat32).contiguous().clone();
  expAvgSq_ = b->second.to(torch::kFloat32).contiguous().clone();
  step_ = static_cast<std::int64_t>(s->second);
}

std::map<std::string, double> AdamOptimizer::hyperParameters() const {
  return {{"lr", options_.lr},
          {"beta1", options_.beta1},
          {"beta2", options_.beta2},
          {"eps", options_.eps},
          {"weight_decay", options_.weightDecay},
          {"adam_w_mode", options_.decoupledWeightDecay ? 1.0 : 0.0}};
}

// ---------------------------------------------------------------------------------------------
// SGD (torch.optim.SGD's arithmetic)

SgdOptimizer::SgdOptimizer(SgdOptions options) : options_(options) {}

void SgdOptimizer::step(torch::Tensor& param, const torch::Tensor& grad) {
  torch::NoGradGuard noGrad;
  torch::Tensor d = grad;
  if (options_.weightDecay != 0.0)
    d = d.add(param, options_.weightDecay);
  if (options_.momentum != 0.0) {
    if (!momentumBuffer_.defined())
      momentumBuffer_ = d.clone();
    else
      momentumBuffer_.mul_(options_.momentum).add_(d, 1.0 - options_.dampening);
    d = options_.nesterov ? d.add(momentumBuffer_, options_.momentum) : momentumBuffer_;
  }
  param.add_(d, -options_.lr);
}

std::map<std::string, torch::Tensor> SgdOptimizer::stateTensors() const {
  if (options_.momentum == 0.0)
    return {};
  return {{"momentum_buffer", momentumBuffer_}};
}

std::map<std::string, double> SgdOptimizer::scalarState() const {
  return {};
}

void SgdOptimizer::loadState(const std::map<std::string, torch::Tensor>& tensors,
                             const std::map<std::string, double>& /*scalars*/) {
  const auto it = tensors.find("momentum_buffer");
  if (it != tensors.end() && it->second.defined() && it->second.numel() > 0)
    momentumBuffer_ = it->second.to(torch::kFloat32).contiguous().clone();
  else
    momentumBuffer_ = torch::Tensor();
}

std::map<std::string, double> SgdOptimizer::hyperParameters() const {
  return {{"lr", options_.lr},
          {"momentum", options_.momentum},
          {"dampening", options_.dampening},
          {"weight_decay", options_.weightDecay},
          {"nesterov", options_.nesterov ? 1.0 : 0.0}};
}

// ---------------------------------------------------------------------------------------------
// Config

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string describe(const config::ParamValue& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>)
          return x ? "true" : "false";
        else if constexpr (std::is_same_v<T, std::string>)
          return "\"" + x + "\"";
        else if constexpr (std::is_same_v<T, std::vector<double>>)
          return fmt::format("[{}]", fmt::join(x, ", "));
        else
          return fmt::format("{}", x);
      },
      v);
}

// Reads optimizer.params with checks; remembers which keys were used.
class ParamReader {
 public:
  explicit ParamReader(const config::Params& params) : params_(params) {}

  double number(const std::string& key, double fallback, double min, bool minExclusive,
                const std::string& expected) {
    used_.insert(key);
    const auto it = params_.find(key);
    if (it == params_.end())
      return fallback;
    double v = 0;
    if (const auto* i = std::get_if<std::int64_t>(&it->second))
      v = static_cast<double>(*i);
    else if (const auto* d = std::get_if<double>(&it->second))
      v = *d;
    else
      fail(key, describe(it->second), expected);
    if (!std::isfinite(v) || v < min || (minExclusive && v == min))
      fail(key, describe(it->second), expected);
    return v;
  }

  bool flag(const std::string& key, bool fallback) {
    used_.insert(key);
    const auto it = params_.find(key);
    if (it == params_.end())
      return fallback;
    if (const auto* b = std::get_if<bool>(&it->second))
      return *b;
    fail(key, describe(it->second), "true or false");
  }

  std::pair<double, double> betas(std::pair<double, double> fallback) {
    used_.insert("betas");
    const auto it = params_.find("betas");
    if (it == params_.end())
      return fallback;
    const auto* list = std::get_if<std::vector<double>>(&it->second);
    if (list == nullptr || list->size() != 2 || (*list)[0] < 0 || (*list)[0] >= 1 ||
        (*list)[1] < 0 || (*list)[1] >= 1) {
      fail("betas", describe(it->second), "a list of two numbers in [0, 1)");
    }
    return {(*list)[0], (*list)[1]};
  }

  bool has(const std::string& key) const { return params_.count(key) > 0; }

  void rejectUnknown(const std::string& type) const {
    for (const auto& [key, value] : params_) {
      if (used_.count(key) == 0) {
        std::vector<std::string> known(used_.begin(), used_.end());
        throw ConfigError(ErrorDetail{
            "optimizer.params." + key, describe(value),
            fmt::format("one of the {} parameters ({})", type, fmt::join(known, ", "))});
      }
    }
  }

  [[noreturn]] static void fail(const std::string& key, const std::string& value,
                                const std::string& expected) {
    throw ConfigError(ErrorDetail{"optimizer.params." + key, value, expected});
  }

 private:
  const config::Params& params_;
  std::set<std::string> used_;
};

}  // namespace

std::unique_ptr<FlatOptimizer> makeOptimizer(const config::OptimizerConfig& config) {
  const std::string type = lower(config.type);
  ParamReader p(config.params);
  if (p.has("max_grad_norm")) {
    ParamReader::fail("max_grad_norm", "set",
                      "no max_grad_norm in optimizer params: use the top-level "
                      "\"gradient_clipping\" (as DeepSpeed requires)");
  }
  if (type == "adam" || type == "adamw") {
    AdamOptions o;
    o.lr = p.number("lr", 1e-3, 0.0, false, "a non-negative number");
    const auto [b1, b2] = p.betas({0.9, 0.999});
    o.beta1 = b1;
    o.beta2 = b2;
    o.eps = p.number("eps", 1e-8, 0.0, true, "a positive number");
    o.weightDecay = p.number("weight_decay", 0.0, 0.0, false, "a non-negative number");
    o.biasCorrection = p.flag("bias_correction", true);
    const bool adamWMode = p.flag("adam_w_mode", true);
    o.decoupledWeightDecay = type == "adamw" || adamWMode;
    p.flag("torch_adam", false);  // FusedAdam vs torch.optim.Adam: the same arithmetic here
    if (p.flag("amsgrad", false))
      ParamReader::fail("amsgrad", "true", "false (DeepSpeed's FusedAdam does not support it)");
    p.rejectUnknown(config.type);
    return std::make_unique<AdamOptimizer>(o);
  }
  if (type == "sgd") {
    SgdOptions o;
    if (!p.has("lr"))
      ParamReader::fail("lr", "missing", "a learning rate (torch.optim.SGD requires lr)");
    o.lr = p.number("lr", 0.0, 0.0, false, "a non-negative number");
    o.momentum = p.number("momentum", 0.0, 0.0, false, "a non-negative number");
    o.dampening = p.number("dampening", 0.0, 0.0, false, "a non-negative number");
    o.weightDecay = p.number("weight_decay", 0.0, 0.0, false, "a non-negative number");
    o.nesterov = p.flag("nesterov", false);
    if (o.nesterov && (o.momentum <= 0.0 || o.dampening != 0.0)) {
      ParamReader::fail("nesterov", "true",
                        "momentum > 0 and dampening 0 (torch.optim.SGD's rule for nesterov)");
    }
    p.rejectUnknown(config.type);
    return std::make_unique<SgdOptimizer>(o);
  }
  throw ConfigError(ErrorDetail{"optimizer.type", "\"" + config.type + "\"",
                                "one of Adam, AdamW, SGD (case-insensitive)"});
}

}  // namespace stretch::engine
