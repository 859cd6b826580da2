#include "runtime/engine/loss_scaler.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "runtime/common/check.hpp"

namespace stretch::engine {

namespace {

constexpr double kScaleFactor = 2.0;  // hard-coded in both DeepSpeed rules
constexpr const char* kAtMinimumMessage =
    "Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.";

bool positiveFinite(double v) {
  return std::isfinite(v) && v > 0.0;
}

void checkStateKind(const LossScalerState& state, bool dynamic) {
  if (state.dynamic != dynamic) {
    throw ConfigError(ErrorDetail{
        "loss_scaler.dynamic", state.dynamic ? "true" : "false",
        fmt::format("{} (the checkpoint's loss scaling must match fp16.loss_scale: 0 = dynamic)",
                    dynamic ? "true" : "false")});
  }
}

void checkDynamicState(const LossScalerState& state) {
  const auto bad = [](const char* key, const std::string& value, const char* expected) {
    throw ConfigError(ErrorDetail{fmt::format("loss_scaler.{}", key), value, expected});
  };
  if (!positiveFinite(state.curScale)) {
    bad("cur_scale", fmt::format("{}", state.curScale), "a finite number > 0");
  }
  if (state.curIter < 0) {
    bad("cur_iter", std::to_string(state.curIter), "an integer >= 0");
  }
  if (state.lastOverflowIter < -1) {
    bad("last_overflow_iter", std::to_string(state.lastOverflowIter), "an integer >= -1");
  }
  if (state.scaleWindow < 1) {
    bad("scale_window", std::to_string(state.scaleWindow), "a positive integer");
  }
  if (!positiveFinite(state.scaleFactor)) {
    bad("scale_factor", fmt::format("{}", state.scaleFactor), "a finite number > 0");
  }
}

// The stable-interval doubling shared by both dynamic rules; true when the scale doubled.
bool maybeGrow(LossScalerState& s) {
  const std::int64_t stableInterval = (s.curIter - s.lastOverflowIter) - 1;
  if (stableInterval > 0 && stableInterval % s.scaleWindow == 0) {
    s.curScale *= s.scaleFactor;
    return true;
  }
  return false;
}

}  // namespace

// ---- StaticLossScaler ---------------------------------------------------------------------------

StaticLossScaler::StaticLossScaler(double scale) : scale_(scale) {
  STRETCH_CHECK(positiveFinite(scale), "static loss scale {} is not a finite number > 0", scale);
}

void StaticLossScaler::update(bool /*overflow*/) {
  ++curIter_;
}

LossScalerState StaticLossScaler::state() const {
  LossScalerState s;
  s.dynamic = false;
  s.curScale = scale_;
  s.curIter = curIter_;
  return s;
}

void StaticLossScaler::loadState(const LossScalerState& state) {
  checkStateKind(state, false);
  if (!positiveFinite(state.curScale)) {
    throw ConfigError(ErrorDetail{"loss_scaler.cur_scale", fmt::format("{}", state.curScale),
                                  "a finite number > 0"});
  }
  scale_ = state.curScale;
  curIter_ = state.curIter;
}

// ---- DynamicLossScalerBase ----------------------------------------------------------------------

DynamicLossScalerBase::DynamicLossScalerBase(double initScale, std::int64_t scaleWindow,
                                             double minScale, const char* minScaleKey,
                                             std::int64_t delayedShift,
                                             bool consecutiveHysteresis) {
  STRETCH_CHECK(positiveFinite(initScale), "init_scale {}", initScale);
  STRETCH_CHECK(positiveFinite(minScale), "{} {}", minScaleKey, minScale);
  STRETCH_CHECK_GE(scaleWindow, std::int64_t{1});
  STRETCH_CHECK_GE(delayedShift, std::int64_t{1});
  state_.dynamic = true;
  state_.curScale = initScale;
  state_.curIter = 0;
  state_.lastOverflowIter = -1;
  state_.scaleFactor = kScaleFactor;
  state_.scaleWindow = scaleWindow;
  state_.minScale = minScale;
  state_.delayedShift = delayedShift;
  state_.curHysteresis = delayedShift;
  state_.consecutiveHysteresis = consecutiveHysteresis;
}

// ---- DynamicLossScaler --------------------------------------------------------------------------

DynamicLossScaler::DynamicLossScaler(const DynamicLossScalerOptions& options)
    : DynamicLossScalerBase(options.initScale, options.scaleWindow, options.minScale, "min_scale",
                            options.delayedShift, options.consecutiveHysteresis),
      raiseErrorAtMinScale_(options.raiseErrorAtMinScale) {}

void DynamicLossScaler::update(bool overflow) {
  LossScalerState& s = state_;
  if (overflow) {
    if (s.delayedShift == 1 || s.curHysteresis == 1) {
      if (s.curScale == s.minScale && raiseErrorAtMinScale_) {
        throw LossScaleError(kAtMinimumMessage);
      }
      s.curScale = std::max(s.curScale / s.scaleFactor, s.minScale);
    } else {
      s.curHysteresis -= 1;
    }
    s.lastOverflowIter = s.curIter;
  } else {
    if (s.consecutiveHysteresis) {
      s.curHysteresis = s.delayedShift;
    }
    if (maybeGrow(s) && !s.consecutiveHysteresis) {
      s.curHysteresis = s.delayedShift;  // refilled only on a scale-up
    }
  }
  s.curIter += 1;
}

void DynamicLossScaler::loadState(const LossScalerState& state) {
  checkStateKind(state, true);
  checkDynamicState(state);
  if (!positiveFinite(state.minScale) || state.delayedShift < 1 || state.curHysteresis < 1) {
    throw ConfigError(
        ErrorDetail{"loss_scaler",
                    fmt::format("min_scale={} delayed_shift={} cur_hysteresis={}", state.minScale,
                                state.delayedShift, state.curHysteresis),
                    "min_scale > 0, delayed_shift >= 1 and cur_hysteresis >= 1"});
  }
  state_ = state;  // the ZeRO optimizers restore the whole pickled scaler
}

// ---- Fp16OptimizerLossScaler --------------------------------------------------------------------

// No hysteresis in this rule: delayed_shift 1.
Fp16OptimizerLossScaler::Fp16OptimizerLossScaler(const Fp16OptimizerLossScalerOptions& options)
    : DynamicLossScalerBase(options.initScale, options.scaleWindow, options.minScale,
                            "min_loss_scale", 1, false) {}

void Fp16OptimizerLossScaler::update(bool overflow) {
  LossScalerState& s = state_;
  if (overflow) {
    s.curScale = std::max(s.curScale / s.scaleFactor, s.minScale);
    s.lastOverflowIter = s.curIter;
  } else {
    maybeGrow(s);
  }
  s.curIter += 1;
}

void Fp16OptimizerLossScaler::loadState(const LossScalerState& state) {
  checkStateKind(state, true);
  checkDynamicState(state);
  state_.curScale = state.curScale;
  state_.curIter = state.curIter;
  state_.lastOverflowIter = state.lastOverflowIter;
  state_.scaleFactor = state.scaleFactor;
  state_.scaleWindow = state.scaleWindow;
}

// ---- Factory ------------------------------------------------------------------------------------

std::unique_ptr<LossScaler> makeLossScaler(const config::Fp16Config& fp16, LossScaleRule rule) {
  if (!fp16.enabled) {
    return std::make_unique<StaticLossScaler>(1.0);  // bf16 and fp32: no scaling
  }
  const auto bad = [](const char* key, const std::string& value, const char* expected) {
    throw ConfigError(ErrorDetail{fmt::format("fp16.{}", key), value, expected});
  };
  if (!std::isfinite(fp16.lossScale) || fp16.lossScale < 0.0) {
    bad("loss_scale", fmt::format("{}", fp16.lossScale),
        "a finite number >= 0 (0 = dynamic loss scaling)");
  }
  if (!fp16.dynamicLossScale()) {
    return std::make_unique<StaticLossScaler>(fp16.lossScale);
  }
  if (fp16.initialScalePower < 0 || fp16.initialScalePower > 1023) {
    bad("initial_scale_power", std::to_string(fp16.initialScalePower),
        "an integer in [0, 1023] (the initial scale is 2^power)");
  }
  if (fp16.lossScaleWindow < 1) {
    bad("loss_scale_window", std::to_string(fp16.lossScaleWindow),
        "a positive integer (dynamic loss scaling)");
  }
  if (fp16.hysteresis < 1) {
    bad("hysteresis", std::to_string(fp16.hysteresis), "a positive integer");
  }
  if (!positiveFinite(fp16.minLossScale)) {
    bad("min_loss_scale", fmt::format("{}", fp16.minLossScale),
        "a number > 0 (dynamic loss scaling)");
  }
  const double initScale = std::ldexp(1.0, static_cast<int>(fp16.initialScalePower));
  if (rule == LossScaleRule::kFp16Optimizer) {
    return std::make_unique<Fp16OptimizerLossScaler>(
        Fp16OptimizerLossScalerOptions{initScale, fp16.lossScaleWindow, fp16.minLossScale});
  }
  DynamicLossScalerOptions options;
  options.initScale = initScale;
  options.scaleWindow = fp16.lossScaleWindow;
  options.minScale = fp16.minLossScale;
  options.delayedShift = fp16.hysteresis;
  options.consecutiveHysteresis = fp16.consecutiveHysteresis;
  options.raiseErrorAtMinScale = true;  // dynamic_loss_scale_args() never passes it
  return std::make_unique<DynamicLossScaler>(options);
}

}  // namespace stretch::engine
