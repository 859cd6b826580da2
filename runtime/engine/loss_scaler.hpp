#pragma once
// fp16 loss scaling as DeepSpeed does it (deepspeed/runtime/fp16/loss_scaler.py and
// fp16/fused_optimizer.py), as plain C++ with no LibTorch types: the engine multiplies the loss
// by curScale(), checks the gradients for inf/NaN and calls update(overflow) once per optimizer
// step, skipped (overflow) steps included.
//
// Three scalers (reference: deepspeed_engine.md sections 2.2-2.4):
//  - StaticLossScaler: a fixed scale (fp16.loss_scale > 0), or 1.0 when fp16 is off (bf16, fp32).
//  - DynamicLossScaler: DeepSpeed's DynamicLossScaler, used by the ZeRO optimizers (stages 1-3).
//    Halves the scale on an overflow once the hysteresis is used up, doubles it after
//    scale_window good steps, and throws LossScaleError when an overflow happens at min_scale
//    (raise_error_at_min_scale, which DeepSpeed's config never turns off).
//  - Fp16OptimizerLossScaler: the rule of DeepSpeed's FP16_Optimizer / FP16_UnfusedOptimizer
//    (LossScaleConfig + _update_scale), used without ZeRO (stage 0). It differs: no hysteresis
//    (fp16.hysteresis and consecutive_hysteresis are ignored) and it never raises, the scale
//    just stays clamped at min_loss_scale.
// makeLossScaler() picks one from the "fp16" section and the LossScaleRule of the optimizer
// wrapper in use.
//
// State: state() / loadState() carry every field DeepSpeed checkpoints. As in DeepSpeed, loading
// also restores the checkpoint's scaler settings (the ZeRO optimizers pickle the whole scaler;
// FP16_Optimizer restores scale_window and scale_factor), so a resumed run continues exactly.
// Loading a dynamic state into a static scaler or the reverse is a ConfigError.
// Thread safety: a scaler is a plain value used by one thread at a time.

#include <cstdint>
#include <memory>

#include "runtime/common/error.hpp"
#include "runtime/config/ds_config.hpp"

namespace stretch::engine {

// An overflow happened with the scale already at min_scale. The message is DeepSpeed's:
// "Current loss scale already at minimum - cannot decrease scale anymore. Exiting run."
STRETCH_DECLARE_ERROR(LossScaleError, Error);

// Which DeepSpeed optimizer wrapper's scaling rule applies.
enum class LossScaleRule {
  kZeroOptimizer,  // DynamicLossScaler: ZeRO stages 1, 2 and 3
  kFp16Optimizer,  // FP16_Optimizer / FP16_UnfusedOptimizer: no ZeRO (stage 0)
};

// Everything a scaler checkpoints. Names follow DeepSpeed's attributes.
struct LossScalerState {
  bool dynamic = false;
  double curScale = 1.0;               // cur_scale
  std::int64_t curIter = 0;            // cur_iter: update() calls so far
  std::int64_t lastOverflowIter = -1;  // last_overflow_iter
  std::int64_t curHysteresis = 1;      // cur_hysteresis (DynamicLossScaler only)
  double scaleFactor = 2.0;            // scale_factor
  std::int64_t scaleWindow = 1000;     // scale_window
  double minScale = 1.0;               // min_scale / min_loss_scale
  std::int64_t delayedShift = 1;       // delayed_shift = fp16.hysteresis (DynamicLossScaler only)
  bool consecutiveHysteresis = false;  // (DynamicLossScaler only)
  bool operator==(const LossScalerState&) const = default;
};

class LossScaler {
 public:
  virtual ~LossScaler() = default;
  // Whether the scale changes with overflows.
  virtual bool dynamic() const noexcept = 0;
  // The scale the next backward pass multiplies the loss by (DeepSpeed's cur_scale/loss_scale).
  virtual double curScale() const noexcept = 0;
  // Called once per optimizer step with whether the gradients held inf/NaN (DeepSpeed's
  // update_scale). May throw LossScaleError (DynamicLossScaler at its floor).
  virtual void update(bool overflow) = 0;
  virtual LossScalerState state() const = 0;
  virtual void loadState(const LossScalerState& state) = 0;

 protected:
  LossScaler() = default;
  LossScaler(const LossScaler&) = default;
  LossScaler& operator=(const LossScaler&) = default;
};

// DeepSpeed's LossScaler(scale). update() changes nothing but counts calls in curIter (as
// FP16_Optimizer's static path does; DeepSpeed's LossScaler keeps no counter).
class StaticLossScaler final : public LossScaler {
 public:
  explicit StaticLossScaler(double scale = 1.0);  // finite, > 0
  bool dynamic() const noexcept override { return false; }
  double curScale() const noexcept override { return scale_; }
  void update(bool overflow) override;
  LossScalerState state() const override;
  void loadState(const LossScalerState& state) override;

 private:
  double scale_;
  std::int64_t curIter_ = 0;
};

// What the two dynamic rules share: their whole state, read through the accessors. update() and
// loadState() are each rule's own.
class DynamicLossScalerBase : public LossScaler {
 public:
  bool dynamic() const noexcept final { return true; }
  double curScale() const noexcept final { return state_.curScale; }
  LossScalerState state() const final { return state_; }

  std::int64_t curIter() const noexcept { return state_.curIter; }
  std::int64_t lastOverflowIter() const noexcept { return state_.lastOverflowIter; }

 protected:
  // Starts at initScale, iteration 0, no overflow yet, with the hysteresis full. Checks (fails
  // with CheckError) initScale and minScale finite and > 0 (`minScaleKey` names the latter as
  // the rule's DeepSpeed attribute does), scaleWindow and delayedShift >= 1.
  DynamicLossScalerBase(double initScale, std::int64_t scaleWindow, double minScale,
                        const char* minScaleKey, std::int64_t delayedShift,
                        bool consecutiveHysteresis);

  LossScalerState state_;
};

struct DynamicLossScalerOptions {
  double initScale = 65536.0;       // 2^initial_scale_power; finite, > 0
  std::int64_t scaleWindow = 1000;  // > 0
  double minScale = 1.0;            // finite, > 0
  std::int64_t delayedShift = 2;    // fp16.hysteresis; > 0
  bool consecutiveHysteresis = false;
  bool raiseErrorAtMinScale = true;  // DeepSpeed's config never passes false
};

// DeepSpeed's DynamicLossScaler.update_scale:
//   overflow: if delayed_shift == 1 or cur_hysteresis == 1:
//                 throw if cur_scale == min_scale and raiseErrorAtMinScale;
//                 cur_scale = max(cur_scale / 2, min_scale)
//             else cur_hysteresis -= 1
//             last_overflow_iter = cur_iter
//   good:     if consecutive_hysteresis: cur_hysteresis = delayed_shift
//             stable = cur_iter - last_overflow_iter - 1
//             if stable > 0 and stable % scale_window == 0:
//                 if not consecutive_hysteresis: cur_hysteresis = delayed_shift
//                 cur_scale *= 2
//   cur_iter += 1   (not reached when it throws)
class DynamicLossScaler final : public DynamicLossScalerBase {
 public:
  explicit DynamicLossScaler(const DynamicLossScalerOptions& options = {});
  void update(bool overflow) override;
  void loadState(const LossScalerState& state) override;

  std::int64_t curHysteresis() const noexcept { return state_.curHysteresis; }
  bool raiseErrorAtMinScale() const noexcept { return raiseErrorAtMinScale_; }

 private:
  bool raiseErrorAtMinScale_;
};

struct Fp16OptimizerLossScalerOptions {
  double initScale = 65536.0;       // finite, > 0
  std::int64_t scaleWindow = 1000;  // > 0
  double minScale = 1.0;            // finite, > 0
};

// FP16_Optimizer._update_scale (ZeRO stage 0), dynamic case:
//   overflow: cur_scale = max(cur_scale / 2, min_loss_scale); last_overflow_iter = cur_iter
//   good:     stable = cur_iter - last_overflow_iter - 1
//             if stable > 0 and stable % scale_window == 0: cur_scale *= 2
//   cur_iter += 1
// loadState restores cur_scale, cur_iter, last_overflow_iter, scale_factor and scale_window, as
// FP16_Optimizer.load_state_dict does; min_loss_scale stays the configured one.
class Fp16OptimizerLossScaler final : public DynamicLossScalerBase {
 public:
  explicit Fp16OptimizerLossScaler(const Fp16OptimizerLossScalerOptions& options = {});
  void update(bool overflow) override;
  void loadState(const LossScalerState& state) override;
};

// The scaler DeepSpeed builds for this fp16 section (CreateLossScaler / LossScaleConfig):
// fp16 off -> StaticLossScaler(1.0); loss_scale > 0 -> StaticLossScaler(loss_scale);
// otherwise dynamic with init 2^initial_scale_power, window loss_scale_window, min
// min_loss_scale and (kZeroOptimizer) delayed_shift hysteresis. Throws ConfigError naming
// fp16.<key> for values the config parser would have rejected.
std::unique_ptr<LossScaler> makeLossScaler(const config::Fp16Config& fp16,
                                           LossScaleRule rule = LossScaleRule::kZeroOptimizer);

}  // namespace stretch::engine
