#pragma once
// DeepSpeed's learning-rate schedules (deepspeed/runtime/lr_schedules.py): WarmupLR,
// WarmupDecayLR, WarmupCosineLR, OneCycle and LRRangeTest, as plain C++ with no LibTorch types.
//
// Contract (DeepSpeed's, docs: /work/shared/reference/deepspeed_engine.md section 3):
//  - t = lastBatchIteration() starts at the constructor's last_batch_iteration (default -1).
//    When it is -1 the constructor "writes" the initial values into the optimizer: getLastLr()
//    (and getLastMomentum() for OneCycle with momentum cycling) then hold what the engine must put
//    into each parameter group before the first update. Otherwise nothing is written and
//    getLastLr() is empty until the first step() (DeepSpeed asserts there).
//  - step() sets t = t + 1 (stepTo(x) sets t = x), computes getLr() for the new t and returns it;
//    that is what the engine writes into the groups. The engine steps the schedule after each
//    applied optimizer update and not after an fp16-overflow (skipped) step.
//  - getLr() is the lrs for the current t, one per parameter group; it does not change state.
//  - state() / loadState() are DeepSpeed's state_dict() / load_state_dict():
//    {"last_batch_iteration": t}. Loading changes t only; it writes nothing (the optimizer's own
//    checkpoint holds its lrs, as in DeepSpeed).
//  - Formulas follow DeepSpeed HEAD (LrFormulas::kHead). LrFormulas::kV0_18_2 switches the two
//    formulas that changed since v0.18.2: WarmupCosineLR's cosine progress is not clamped after
//    total_num_steps (the lr rises again), and OneCycle ignores the stair counts.
//  - warnings() lists what DeepSpeed logs as warnings at construction (unknown warmup_type,
//    total_num_steps < warmup_num_steps, momentum cycling disabled); the caller logs them.
//
// makeLrSchedule() builds a schedule from the "scheduler" config section and validates its
// params; every error is a ConfigError naming scheduler.type or scheduler.params.<key>.
// Thread safety: a schedule is a plain value used by one thread at a time.

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/config/ds_config.hpp"

namespace stretch::engine {

// Which DeepSpeed version's formulas a schedule uses where they differ (see above).
enum class LrFormulas { kHead, kV0_18_2 };

// The increasing function during warmup: log(t+1)/log(W) or t/W.
enum class WarmupType { kLog, kLinear };

// The momentum a schedule writes into an Adam-style optimizer: betas = (beta1, beta2).
// OneCycle always writes beta2 = 0.99, as DeepSpeed does.
struct Betas {
  double beta1 = 0.0;
  double beta2 = 0.0;
  bool operator==(const Betas&) const = default;
};

// DeepSpeed's lr scheduler state_dict: {"last_batch_iteration": t}.
struct LrScheduleState {
  std::int64_t lastBatchIteration = -1;
  bool operator==(const LrScheduleState&) const = default;
};
inline constexpr std::string_view kLastBatchIterationKey = "last_batch_iteration";

// DeepSpeed's schedule class names, the accepted values of scheduler.type.
inline constexpr std::array<std::string_view, 5> kLrScheduleNames = {
    "LRRangeTest", "OneCycle", "WarmupLR", "WarmupDecayLR", "WarmupCosineLR"};

class LrSchedule {
 public:
  virtual ~LrSchedule() = default;

  // DeepSpeed's class name ("WarmupLR", ...).
  virtual std::string_view name() const noexcept = 0;
  int numParamGroups() const noexcept { return numParamGroups_; }
  std::int64_t lastBatchIteration() const noexcept { return lastBatchIteration_; }

  // DeepSpeed's step(): t += 1, then the new lrs (one per group) are computed and returned.
  std::vector<double> step();
  // DeepSpeed's step(batch_iteration): t = batchIteration, then as step().
  std::vector<double> stepTo(std::int64_t batchIteration);

  // The lrs for the current t (DeepSpeed's get_lr()).
  virtual std::vector<double> getLr() const = 0;
  // The lrs last written into the optimizer (by the constructor at t = -1 or by a step).
  const std::vector<double>& getLastLr() const noexcept { return lastLr_; }

  // Whether the schedule writes momentum (OneCycle with cycle_momentum on an optimizer with
  // betas). When true the engine sets each group's betas after every step from getLastMomentum().
  bool cyclesMomentum() const noexcept { return cyclesMomentum_; }
  // The momentum for the current t (DeepSpeed's get_mom()); empty unless cyclesMomentum().
  virtual std::vector<Betas> getMomentum() const { return {}; }
  // The betas last written (constructor at t = -1, or a step); empty unless cyclesMomentum().
  const std::vector<Betas>& getLastMomentum() const noexcept { return lastMomentum_; }

  LrScheduleState state() const { return LrScheduleState{lastBatchIteration_}; }
  // Sets t (must be >= -1, else ConfigError naming last_batch_iteration); writes nothing.
  void loadState(const LrScheduleState& state);

  // Construction-time warnings, as DeepSpeed logs them.
  const std::vector<std::string>& warnings() const noexcept { return warnings_; }

 protected:
  LrSchedule(int numParamGroups, std::int64_t lastBatchIteration);
  LrSchedule(const LrSchedule&) = default;
  LrSchedule& operator=(const LrSchedule&) = default;

  // For constructors: record what DeepSpeed's constructor writes into the optimizer.
  void setInitialValues(std::vector<double> lrs, std::vector<Betas> momentum = {});
  void setCyclesMomentum(bool on) noexcept { cyclesMomentum_ = on; }
  void addWarning(std::string warning) { warnings_.push_back(std::move(warning)); }

 private:
  friend class LrScheduleFactoryAccess;  // the factory adds its own warnings

  int numParamGroups_ = 1;
  std::int64_t lastBatchIteration_ = -1;
  bool cyclesMomentum_ = false;
  std::vector<double> lastLr_;
  std::vector<Betas> lastMomentum_;
  std::vector<std::string> warnings_;
};

// ---- WarmupLR / WarmupDecayLR -------------------------------------------------------------------

struct WarmupLrOptions {
  std::vector<double> minLrs;          // warmup_min_lr, one per group (its size = group count)
  std::vector<double> maxLrs;          // warmup_max_lr, one per group
  std::int64_t warmupNumSteps = 1000;  // >= 1; W = max(2, warmupNumSteps)
  WarmupType warmupType = WarmupType::kLog;
  std::int64_t lastBatchIteration = -1;
};

// t < 0: min; t < W: min + (max - min) * gamma(t); t >= W: max.
class WarmupLr : public LrSchedule {
 public:
  explicit WarmupLr(WarmupLrOptions options);
  std::string_view name() const noexcept override { return "WarmupLR"; }
  std::vector<double> getLr() const override;
  // W = max(2, warmup_num_steps).
  std::int64_t warmupNumSteps() const noexcept { return warmupNumSteps_; }

 protected:
  // gamma(t) for t >= 0: the warmup ramp, then 1.0 (WarmupDecayLR overrides the part after W).
  virtual double gamma() const;
  double warmupGamma() const;  // the ramp, for t < W

 private:
  std::vector<double> minLrs_;
  std::vector<double> deltaLrs_;
  std::int64_t warmupNumSteps_;
  WarmupType warmupType_;
  double inverseLogWarmUp_;
};

// WarmupLR, then linear decay to min: gamma = max(0, (T - t) / max(1, T - W)) for t >= W.
class WarmupDecayLr : public WarmupLr {
 public:
  WarmupDecayLr(WarmupLrOptions options, std::int64_t totalNumSteps);
  std::string_view name() const noexcept override { return "WarmupDecayLR"; }
  std::int64_t totalNumSteps() const noexcept { return totalNumSteps_; }

 protected:
  double gamma() const override;

 private:
  std::int64_t totalNumSteps_;
};

// ---- WarmupCosineLR ----------------------------------------------------------------------------

struct WarmupCosineLrOptions {
  std::vector<double> baseLrs;  // the optimizer's lr per group at construction (org_lrs)
  std::int64_t totalNumSteps = 0;
  double warmupMinRatio = 0.0;
  std::int64_t warmupNumSteps = 1000;  // >= 1; W = max(2, warmupNumSteps)
  double cosMinRatio = 0.0001;
  WarmupType warmupType = WarmupType::kLog;
  std::int64_t lastBatchIteration = -1;
  LrFormulas formulas = LrFormulas::kHead;
};

// lr = base * ratio(t): 0 for t < 0 (the first update uses lr 0); warmup from warmupMinRatio
// to 1; then cosine from 1 to cosMinRatio over T - W steps (HEAD: held at cosMinRatio after T).
class WarmupCosineLr : public LrSchedule {
 public:
  explicit WarmupCosineLr(WarmupCosineLrOptions options);
  std::string_view name() const noexcept override { return "WarmupCosineLR"; }
  std::vector<double> getLr() const override;
  double getLrRatio() const;  // DeepSpeed's get_lr_ratio() (0 for t < 0)

 private:
  WarmupCosineLrOptions options_;  // warmupNumSteps already max(2, ...)
  double inverseLogWarmUp_;
};

// ---- OneCycle -----------------------------------------------------------------------------------

struct OneCycleOptions {
  int numParamGroups = 1;
  double cycleMinLr = 0.0;  // required in the config; one value for every group (as DeepSpeed)
  double cycleMaxLr = 0.0;
  double decayLrRate = 0.0;
  double cycleFirstStepSize = 2000;                   // > 0
  std::optional<double> cycleSecondStepSize;          // >= 0; default: cycleFirstStepSize
  std::int64_t cycleFirstStairCount = 0;              // 0 = continuous
  std::optional<std::int64_t> cycleSecondStairCount;  // default: cycleFirstStairCount
  double decayStepSize = 0;                           // 0 = no decay after the cycle
  bool cycleMomentum = true;
  double cycleMinMom = 0.8;
  double cycleMaxMom = 0.9;
  double decayMomRate = 0.0;
  std::int64_t lastBatchIteration = -1;
  // DeepSpeed disables momentum cycling (with a warning) when 'betas' is not among the
  // optimizer's defaults (e.g. torch SGD).
  bool optimizerHasBetas = true;
  LrFormulas formulas = LrFormulas::kHead;
};

// One triangular cycle of lr (min -> max -> min) and, inversely, beta1 (max -> min -> max), over
// first + second step sizes, then decay: lr = min / (1 + decay_lr_rate * d / decay_step_size),
// beta1 = max_mom * (1 + decay_mom_rate * d / decay_step_size), d = t - total + 1.
// The constructor (t = -1) writes lr = min and betas = (min_mom, 0.99).
class OneCycle : public LrSchedule {
 public:
  explicit OneCycle(OneCycleOptions options);
  std::string_view name() const noexcept override { return "OneCycle"; }
  std::vector<double> getLr() const override;
  std::vector<Betas> getMomentum() const override;
  double scaleFactor() const;  // the cycle position in [0, 1] (DeepSpeed's _get_scale_factor)

 private:
  OneCycleOptions options_;
  double totalSize_;
  double stepRatio_;
  double secondStepSize_;
  std::int64_t secondStairCount_;
  bool skipLrDecay_;
  bool skipMomDecay_;
};

// ---- LRRangeTest --------------------------------------------------------------------------------

struct LrRangeTestOptions {
  std::vector<double> minLrs;  // lr_range_test_min_lr, one per group
  double stepSize = 2000;      // > 0
  double stepRate = 1.0;
  bool staircase = false;
  std::int64_t lastBatchIteration = -1;
};

// lr = min * (1 + rate * interval), interval = (t + 1) / size, floored when staircase.
class LrRangeTest : public LrSchedule {
 public:
  explicit LrRangeTest(LrRangeTestOptions options);
  std::string_view name() const noexcept override { return "LRRangeTest"; }
  std::vector<double> getLr() const override;

 private:
  LrRangeTestOptions options_;
};

// ---- Factory ------------------------------------------------------------------------------------

struct LrScheduleOptions {
  LrFormulas formulas = LrFormulas::kHead;
  // False for optimizers without betas (SGD, ...): OneCycle then does not cycle momentum.
  bool optimizerHasBetas = true;
};

// Builds the schedule named by config.type with config.params as DeepSpeed's keyword arguments,
// for numParamGroups groups that all start with lr optimizerLr. optimizerLr is read where
// DeepSpeed reads the optimizer's lr: WarmupLR without warmup_max_lr, WarmupCosineLR's base.
// Throws ConfigError: unknown type (listing the five names), unknown param key (listing the
// accepted ones), missing required param, wrong type or out-of-range value, per-group list of
// the wrong length.
std::unique_ptr<LrSchedule> makeLrSchedule(const config::SchedulerConfig& config,
                                           int numParamGroups, double optimizerLr,
                                           const LrScheduleOptions& options = {});
// The same with each group's own lr. WarmupLR without warmup_max_lr uses the first group's lr
// for every group, as DeepSpeed does; WarmupCosineLR uses each group's lr.
std::unique_ptr<LrSchedule> makeLrSchedule(const config::SchedulerConfig& config,
                                           std::span<const double> groupLrs,
                                           const LrScheduleOptions& options = {});

}  // namespace stretch::engine
