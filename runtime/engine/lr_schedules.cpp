#include "runtime/engine/lr_schedules.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <type_traits>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "runtime/common/check.hpp"
#include "runtime/common/error.hpp"
#include "runtime/common/strings.hpp"

// Every formula below keeps DeepSpeed's order of floating-point operations so that the results
// are bit-identical to the Python module's (checked against its recorded sequences in
// tests/runtime/engine/lr_schedules_test.cpp).

namespace stretch::engine {

// ---- LrSchedule ---------------------------------------------------------------------------------

LrSchedule::LrSchedule(int numParamGroups, std::int64_t lastBatchIteration)
    : numParamGroups_(numParamGroups), lastBatchIteration_(lastBatchIteration) {
  STRETCH_CHECK_GE(numParamGroups, 1, "an lr schedule needs at least one parameter group");
  STRETCH_CHECK_GE(lastBatchIteration, std::int64_t{-1});
}

std::vector<double> LrSchedule::step() {
  return stepTo(lastBatchIteration_ + 1);
}

std::vector<double> LrSchedule::stepTo(std::int64_t batchIteration) {
  lastBatchIteration_ = batchIteration;
  lastLr_ = getLr();
  if (cyclesMomentum_) {
    lastMomentum_ = getMomentum();
  }
  return lastLr_;
}

void LrSchedule::loadState(const LrScheduleState& state) {
  if (state.lastBatchIteration < -1) {
    throw ConfigError(ErrorDetail{"lr_scheduler.last_batch_iteration",
                                  std::to_string(state.lastBatchIteration), "an integer >= -1"});
  }
  lastBatchIteration_ = state.lastBatchIteration;
}

void LrSchedule::setInitialValues(std::vector<double> lrs, std::vector<Betas> momentum) {
  STRETCH_CHECK_EQ(lrs.size(), static_cast<std::size_t>(numParamGroups_));
  lastLr_ = std::move(lrs);
  lastMomentum_ = std::move(momentum);
}

namespace {

double logWarmupInverse(std::int64_t warmupNumSteps) {
  return 1.0 / std::log(static_cast<double>(warmupNumSteps));
}

// Python's float modulo (the result takes the divisor's sign).
double pyMod(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0.0 && ((r < 0.0) != (b < 0.0))) {
    r += b;
  }
  return r;
}

}  // namespace

// ---- WarmupLR / WarmupDecayLR -------------------------------------------------------------------

WarmupLr::WarmupLr(WarmupLrOptions options)
    : LrSchedule(static_cast<int>(options.minLrs.size()), options.lastBatchIteration),
      minLrs_(std::move(options.minLrs)),
      warmupNumSteps_(std::max<std::int64_t>(2, options.warmupNumSteps)),
      warmupType_(options.warmupType),
      inverseLogWarmUp_(logWarmupInverse(warmupNumSteps_)) {
  STRETCH_CHECK_EQ(options.maxLrs.size(), minLrs_.size(), "warmup_max_lr vs warmup_min_lr");
  STRETCH_CHECK_GE(options.warmupNumSteps, std::int64_t{1});
  deltaLrs_.reserve(minLrs_.size());
  for (std::size_t i = 0; i < minLrs_.size(); ++i) {
    deltaLrs_.push_back(options.maxLrs[i] - minLrs_[i]);
  }
  if (lastBatchIteration() == -1) {
    setInitialValues(minLrs_);  // get_lr() at t < 0
  }
}

std::vector<double> WarmupLr::getLr() const {
  if (lastBatchIteration() < 0) {
    return minLrs_;
  }
  const double g = gamma();
  std::vector<double> lrs;
  lrs.reserve(minLrs_.size());
  for (std::size_t i = 0; i < minLrs_.size(); ++i) {
    lrs.push_back(minLrs_[i] + (deltaLrs_[i] * g));
  }
  return lrs;
}

double WarmupLr::warmupGamma() const {
  const std::int64_t t = lastBatchIteration();
  if (warmupType_ == WarmupType::kLog) {
    return inverseLogWarmUp_ * std::log(static_cast<double>(t + 1));
  }
  return static_cast<double>(t) / static_cast<double>(warmupNumSteps_);
}

double WarmupLr::gamma() const {
  return lastBatchIteration() < warmupNumSteps_ ? warmupGamma() : 1.0;
}

WarmupDecayLr::WarmupDecayLr(WarmupLrOptions options, std::int64_t totalNumSteps)
    : WarmupLr(options), totalNumSteps_(totalNumSteps) {
  // DeepSpeed compares with max(2, W) and prints W as given.
  if (totalNumSteps_ < warmupNumSteps()) {
    addWarning(fmt::format("total_num_steps {} is less than warmup_num_steps {}", totalNumSteps_,
                           options.warmupNumSteps));
  }
}

double WarmupDecayLr::gamma() const {
  const std::int64_t t = lastBatchIteration();
  if (t < warmupNumSteps()) {
    return warmupGamma();
  }
  return std::max(0.0, static_cast<double>(totalNumSteps_ - t) /
                           std::max(1.0, static_cast<double>(totalNumSteps_ - warmupNumSteps())));
}

// ---- WarmupCosineLR ----------------------------------------------------------------------------

WarmupCosineLr::WarmupCosineLr(WarmupCosineLrOptions options)
    : LrSchedule(static_cast<int>(options.baseLrs.size()), options.lastBatchIteration),
      options_(std::move(options)) {
  STRETCH_CHECK_GE(options_.warmupNumSteps, std::int64_t{1});
  const std::int64_t requested = options_.warmupNumSteps;
  options_.warmupNumSteps = std::max<std::int64_t>(2, options_.warmupNumSteps);
  inverseLogWarmUp_ = logWarmupInverse(options_.warmupNumSteps);
  if (options_.formulas == LrFormulas::kV0_18_2) {
    // v0.18.2 divides by T - W after the warmup (ZeroDivisionError in Python).
    STRETCH_CHECK_NE(options_.totalNumSteps, options_.warmupNumSteps,
                     "v0.18.2 WarmupCosineLR divides by total_num_steps - warmup_num_steps");
  }
  if (options_.totalNumSteps < options_.warmupNumSteps) {
    addWarning(fmt::format("total_num_steps {} is less than warmup_num_steps {}",
                           options_.totalNumSteps, requested));
  }
  if (lastBatchIteration() == -1) {
    setInitialValues(getLr());
  }
}

double WarmupCosineLr::getLrRatio() const {
  const std::int64_t t = lastBatchIteration();
  if (t < 0) {
    return 0.0;
  }
  const std::int64_t w = options_.warmupNumSteps;
  if (t < w) {
    double ratio = options_.warmupType == WarmupType::kLog
                       ? inverseLogWarmUp_ * std::log(static_cast<double>(t + 1))
                       : static_cast<double>(t) / static_cast<double>(w);
    const double ratioDelta = 1. - options_.warmupMinRatio;
    ratio = options_.warmupMinRatio + ratio * ratioDelta;
    return ratio;
  }
  const std::int64_t realLastStep = t - w + 1;
  const double ratioDelta = 1. - options_.cosMinRatio;
  double ratio = 0.0;
  if (options_.formulas == LrFormulas::kHead) {
    const std::int64_t realTotalSteps = std::max<std::int64_t>(1, options_.totalNumSteps - w);
    const double progress =
        std::min(1.0, static_cast<double>(realLastStep) / static_cast<double>(realTotalSteps));
    ratio = (1 + std::cos(std::numbers::pi * progress)) / 2;
  } else {
    const std::int64_t realTotalSteps = options_.totalNumSteps - w;
    ratio = (1 + std::cos(std::numbers::pi * static_cast<double>(realLastStep) /
                          static_cast<double>(realTotalSteps))) /
            2;
  }
  return std::max(0.0, options_.cosMinRatio + ratioDelta * ratio);
}

std::vector<double> WarmupCosineLr::getLr() const {
  if (lastBatchIteration() < 0) {
    return std::vector<double>(options_.baseLrs.size(), 0.0);
  }
  const double ratio = getLrRatio();
  std::vector<double> lrs;
  lrs.reserve(options_.baseLrs.size());
  for (const double base : options_.baseLrs) {
    lrs.push_back(base * ratio);
  }
  return lrs;
}

// ---- OneCycle -----------------------------------------------------------------------------------

namespace {
constexpr double kOneCycleBeta2 = 0.99;
}

OneCycle::OneCycle(OneCycleOptions options)
    : LrSchedule(options.numParamGroups, options.lastBatchIteration), options_(std::move(options)) {
  STRETCH_CHECK_GT(options_.cycleFirstStepSize, 0.0);
  secondStepSize_ = options_.cycleSecondStepSize.value_or(options_.cycleFirstStepSize);
  STRETCH_CHECK_GE(secondStepSize_, 0.0);
  STRETCH_CHECK_GE(options_.cycleFirstStairCount, std::int64_t{0});
  totalSize_ = options_.cycleFirstStepSize + secondStepSize_;
  stepRatio_ = options_.cycleFirstStepSize / totalSize_;
  secondStairCount_ = options_.cycleSecondStairCount.value_or(options_.cycleFirstStairCount);
  STRETCH_CHECK_GE(secondStairCount_, std::int64_t{0});
  // math.isclose(x, 0) with the default tolerances is x == 0.
  skipLrDecay_ = options_.decayStepSize == 0.0 || options_.decayLrRate == 0.0;
  skipMomDecay_ = options_.decayStepSize == 0.0 || options_.decayMomRate == 0.0;

  bool cycles = options_.cycleMomentum;
  if (cycles && !options_.optimizerHasBetas) {
    addWarning(
        "cycle_momentum is disabled because the optimizer does not support momentum, no betas "
        "attribute in defaults");
    cycles = false;
  }
  setCyclesMomentum(cycles);
  if (lastBatchIteration() == -1) {
    std::vector<Betas> momentum;
    if (cycles) {
      momentum.assign(static_cast<std::size_t>(numParamGroups()),
                      Betas{options_.cycleMinMom, kOneCycleBeta2});
    }
    setInitialValues(
        std::vector<double>(static_cast<std::size_t>(numParamGroups()), options_.cycleMinLr),
        std::move(momentum));
  }
}

double OneCycle::scaleFactor() const {
  const double batchIteration = static_cast<double>(lastBatchIteration() + 1);
  const double cycle = std::floor(1 + batchIteration / totalSize_);
  const double x = 1. + batchIteration / totalSize_ - cycle;
  double scaleFactor = 0.0;
  std::int64_t stairCount = 0;
  if (x <= stepRatio_) {
    scaleFactor = x / stepRatio_;
    stairCount = options_.cycleFirstStairCount;
  } else {
    scaleFactor = (x - 1) / (stepRatio_ - 1);
    stairCount = secondStairCount_;
  }
  if (stairCount > 0 && options_.formulas == LrFormulas::kHead) {
    // Quantised from the integer offset inside the cycle, as DeepSpeed >= 0.19.4 does.
    const double n = static_cast<double>(stairCount);
    const double cycleIteration = pyMod(batchIteration, totalSize_);
    double stairPosition = 0.0;
    if (cycleIteration <= options_.cycleFirstStepSize) {
      stairPosition = cycleIteration * n / options_.cycleFirstStepSize;
    } else {
      stairPosition = (totalSize_ - cycleIteration) * n / secondStepSize_;
    }
    scaleFactor = std::floor(stairPosition) / n;
  }
  return scaleFactor;
}

std::vector<double> OneCycle::getLr() const {
  const auto groups = static_cast<std::size_t>(numParamGroups());
  const double t = static_cast<double>(lastBatchIteration());
  if (t < totalSize_) {
    const double baseHeight = (options_.cycleMaxLr - options_.cycleMinLr) * scaleFactor();
    return std::vector<double>(groups, options_.cycleMinLr + baseHeight);
  }
  if (skipLrDecay_) {
    return std::vector<double>(groups, options_.cycleMinLr);
  }
  const double decayBatchIteration = t - totalSize_ + 1;
  const double decayInterval = decayBatchIteration / options_.decayStepSize;
  const double lrDecayFactor = (1 + options_.decayLrRate * decayInterval);
  return std::vector<double>(groups, options_.cycleMinLr / lrDecayFactor);
}

std::vector<Betas> OneCycle::getMomentum() const {
  if (!cyclesMomentum()) {
    return {};
  }
  const auto groups = static_cast<std::size_t>(numParamGroups());
  const double t = static_cast<double>(lastBatchIteration());
  if (t < totalSize_) {
    const double baseHeight = (options_.cycleMaxMom - options_.cycleMinMom) * scaleFactor();
    return std::vector<Betas>(groups, Betas{options_.cycleMaxMom - baseHeight, kOneCycleBeta2});
  }
  if (skipMomDecay_) {
    return std::vector<Betas>(groups, Betas{options_.cycleMaxMom, kOneCycleBeta2});
  }
  const double decayBatchIteration = t - totalSize_ + 1;
  const double decayInterval = decayBatchIteration / options_.decayStepSize;
  const double momDecayFactor = (1 + options_.decayMomRate * decayInterval);
  return std::vector<Betas>(groups, Betas{options_.cycleMaxMom * momDecayFactor, kOneCycleBeta2});
}

// ---- LRRangeTest --------------------------------------------------------------------------------

LrRangeTest::LrRangeTest(LrRangeTestOptions options)
    : LrSchedule(static_cast<int>(options.minLrs.size()), options.lastBatchIteration),
      options_(std::move(options)) {
  STRETCH_CHECK_GT(options_.stepSize, 0.0);
  if (lastBatchIteration() == -1) {
    setInitialValues(options_.minLrs);
  }
}

std::vector<double> LrRangeTest::getLr() const {
  const double progress = static_cast<double>(lastBatchIteration() + 1) / options_.stepSize;
  const double interval = options_.staircase ? std::floor(progress) : progress;
  const double increase = (1 + options_.stepRate * interval);
  std::vector<double> lrs;
  lrs.reserve(options_.minLrs.size());
  for (const double minLr : options_.minLrs) {
    lrs.push_back(minLr * increase);
  }
  return lrs;
}

// ---- Factory ------------------------------------------------------------------------------------

class LrScheduleFactoryAccess {
 public:
  static void addWarning(LrSchedule& schedule, std::string warning) {
    schedule.addWarning(std::move(warning));
  }
};

namespace {

using config::Params;
using config::ParamValue;

std::string formatDouble(double value) {
  return fmt::format("{}", value);
}

std::string formatValue(const ParamValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          return std::to_string(v);
        } else if constexpr (std::is_same_v<T, double>) {
          return formatDouble(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          return fmt::format("\"{}\"", v);
        } else {
          std::string out = "[";
          for (std::size_t i = 0; i < v.size(); ++i) {
            out += (i == 0 ? "" : ", ") + formatDouble(v[i]);
          }
          return out + "]";
        }
      },
      value);
}

std::string joinNames(std::span<const std::string_view> names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    out += (i == 0 ? "" : ", ");
    out += names[i];
  }
  return out;
}

// A numeric range check with the words used in errors.
struct Range {
  double min = -std::numeric_limits<double>::infinity();
  bool minExclusive = false;
  double max = std::numeric_limits<double>::infinity();
  bool maxExclusive = false;
  bool contains(double v) const {
    if (!std::isfinite(v)) {
      return false;
    }
    const bool aboveMin = minExclusive ? v > min : v >= min;
    const bool belowMax = maxExclusive ? v < max : v <= max;
    return aboveMin && belowMax;
  }
};

const Range kNonNegative{0.0, false};
const Range kPositive{0.0, true};
const Range kUnitInterval{0.0, false, 1.0, true};  // [0, 1)

// Reads one schedule's params: the keyword arguments of its Python constructor.
class ParamReader {
 public:
  ParamReader(const Params& params, std::string_view type,
              std::span<const std::string_view> accepted)
      : params_(params) {
    for (const auto& [key, value] : params) {
      if (std::find(accepted.begin(), accepted.end(), key) != accepted.end()) {
        continue;
      }
      std::string expected = fmt::format(
          "a parameter of {} (DeepSpeed passes params as keyword arguments; accepted: {})", type,
          joinNames(accepted));
      if (const auto guess = closestMatch(key, accepted)) {
        expected += fmt::format("; did you mean \"{}\"?", *guess);
      }
      throw ConfigError(ErrorDetail{path(key), formatValue(value), std::move(expected)});
    }
  }

  static std::string path(std::string_view key) { return fmt::format("scheduler.params.{}", key); }

  const ParamValue* find(std::string_view key) const {
    const auto it = params_.find(key);
    return it == params_.end() ? nullptr : &it->second;
  }

  [[noreturn]] static void fail(std::string_view key, const ParamValue& value,
                                std::string expected) {
    throw ConfigError(ErrorDetail{path(key), formatValue(value), std::move(expected)});
  }

  [[noreturn]] static void failMissing(std::string_view key, std::string expected) {
    throw ConfigError(ErrorDetail{path(key), "(missing)", std::move(expected)});
  }

  // A number (integer or float literal; not a bool) within range.
  std::optional<double> number(std::string_view key, const Range& range,
                               const std::string& expected) const {
    const ParamValue* value = find(key);
    if (value == nullptr) {
      return std::nullopt;
    }
    double v = 0.0;
    if (const auto* i = std::get_if<std::int64_t>(value)) {
      v = static_cast<double>(*i);
    } else if (const auto* d = std::get_if<double>(value)) {
      v = *d;
    } else {
      fail(key, *value, expected);
    }
    if (!range.contains(v)) {
      fail(key, *value, expected);
    }
    return v;
  }

  double requiredNumber(std::string_view key, const Range& range,
                        const std::string& expected) const {
    const auto v = number(key, range, expected);
    if (!v) {
      failMissing(key, expected + " (required)");
    }
    return *v;
  }

  // An integer in [min, kInt64Max]. allowIntegralFloat accepts e.g. 1e5 (a float in JSON) where
  // DeepSpeed only does arithmetic with the value.
  std::optional<std::int64_t> integer(std::string_view key, std::int64_t min,
                                      const std::string& expected,
                                      bool allowIntegralFloat = false) const {
    const ParamValue* value = find(key);
    if (value == nullptr) {
      return std::nullopt;
    }
    std::int64_t v = 0;
    if (const auto* i = std::get_if<std::int64_t>(value)) {
      v = *i;
    } else if (const auto* d = std::get_if<double>(value);
               d != nullptr && allowIntegralFloat && std::isfinite(*d) && std::trunc(*d) == *d &&
               std::fabs(*d) <= 9007199254740992.0) {
      v = static_cast<std::int64_t>(*d);
    } else {
      fail(key, *value, expected);
    }
    if (v < min) {
      fail(key, *value, expected);
    }
    return v;
  }

  std::optional<bool> boolean(std::string_view key) const {
    const ParamValue* value = find(key);
    if (value == nullptr) {
      return std::nullopt;
    }
    if (const auto* b = std::get_if<bool>(value)) {
      return *b;
    }
    fail(key, *value, "true or false");
  }

  // A number (broadcast to every group) or a list with one number per group.
  std::optional<std::vector<double>> perGroup(std::string_view key, std::size_t groups,
                                              const Range& range, const std::string& what) const {
    const ParamValue* value = find(key);
    if (value == nullptr) {
      return std::nullopt;
    }
    const std::string expected =
        fmt::format("{} or a list of {} such numbers, one per parameter group", what, groups);
    if (const auto* list = std::get_if<std::vector<double>>(value)) {
      if (list->size() != groups) {
        fail(key, *value, expected);
      }
      for (const double v : *list) {
        if (!range.contains(v)) {
          fail(key, *value, expected);
        }
      }
      return *list;
    }
    const auto v = number(key, range, expected);
    return std::vector<double>(groups, *v);
  }

  // warmup_type: "log" or "linear"; another string is DeepSpeed's warning and 'log'.
  WarmupType warmupType(std::vector<std::string>& warnings) const {
    const ParamValue* value = find("warmup_type");
    if (value == nullptr) {
      return WarmupType::kLog;
    }
    const auto* s = std::get_if<std::string>(value);
    if (s == nullptr) {
      fail("warmup_type", *value, "a string, \"log\" or \"linear\"");
    }
    if (*s == "log") {
      return WarmupType::kLog;
    }
    if (*s == "linear") {
      return WarmupType::kLinear;
    }
    warnings.push_back(fmt::format(
        "Using unknown warmup_type: {}. The increasing function is set to default (log)", *s));
    return WarmupType::kLog;
  }

  std::int64_t lastBatchIteration() const {
    return integer("last_batch_iteration", -1, "an integer >= -1").value_or(-1);
  }

 private:
  const Params& params_;
};

const std::string kLrWords = "a finite number >= 0 (a learning rate)";

std::int64_t readWarmupNumSteps(const ParamReader& reader) {
  // DeepSpeed HEAD: ValueError unless an int > 0.
  return reader.integer("warmup_num_steps", 1, "a positive integer").value_or(1000);
}

std::int64_t readTotalNumSteps(const ParamReader& reader) {
  const auto total =
      reader.integer("total_num_steps", 0, "an integer >= 0", /*allowIntegralFloat=*/true);
  if (!total) {
    ParamReader::failMissing("total_num_steps", "an integer >= 0 (required)");
  }
  return *total;
}

std::unique_ptr<LrSchedule> makeWarmup(const config::SchedulerConfig& config,
                                       std::span<const double> groupLrs, bool decay) {
  static constexpr std::array<std::string_view, 5> kWarmupKeys = {
      "warmup_min_lr", "warmup_max_lr", "warmup_num_steps", "warmup_type", "last_batch_iteration"};
  static constexpr std::array<std::string_view, 6> kDecayKeys = {
      "total_num_steps",  "warmup_min_lr", "warmup_max_lr",
      "warmup_num_steps", "warmup_type",   "last_batch_iteration"};
  const ParamReader reader(config.params, config.type,
                           decay ? std::span<const std::string_view>(kDecayKeys)
                                 : std::span<const std::string_view>(kWarmupKeys));
  const std::size_t groups = groupLrs.size();
  std::vector<std::string> warnings;
  std::int64_t total = 0;
  if (decay) {
    total = readTotalNumSteps(reader);
  }
  WarmupLrOptions options;
  options.minLrs = reader.perGroup("warmup_min_lr", groups, kNonNegative, kLrWords)
                       .value_or(std::vector<double>(groups, 0.0));
  // WarmupLR: None -> the first group's lr (DeepSpeed HEAD); WarmupDecayLR: 0.001.
  const double defaultMax = decay ? 0.001 : groupLrs.front();
  options.maxLrs = reader.perGroup("warmup_max_lr", groups, kNonNegative, kLrWords)
                       .value_or(std::vector<double>(groups, defaultMax));
  options.warmupNumSteps = readWarmupNumSteps(reader);
  options.warmupType = reader.warmupType(warnings);
  options.lastBatchIteration = reader.lastBatchIteration();
  std::unique_ptr<LrSchedule> schedule;
  if (decay) {
    schedule = std::make_unique<WarmupDecayLr>(std::move(options), total);
  } else {
    schedule = std::make_unique<WarmupLr>(std::move(options));
  }
  for (auto& warning : warnings) {
    LrScheduleFactoryAccess::addWarning(*schedule, std::move(warning));
  }
  return schedule;
}

std::unique_ptr<LrSchedule> makeWarmupCosine(const config::SchedulerConfig& config,
                                             std::span<const double> groupLrs,
                                             LrFormulas formulas) {
  static constexpr std::array<std::string_view, 6> kKeys = {
      "total_num_steps", "warmup_min_ratio", "warmup_num_steps",
      "cos_min_ratio",   "warmup_type",      "last_batch_iteration"};
  const ParamReader reader(config.params, config.type, kKeys);
  std::vector<std::string> warnings;
  WarmupCosineLrOptions options;
  options.baseLrs.assign(groupLrs.begin(), groupLrs.end());
  options.totalNumSteps = readTotalNumSteps(reader);
  options.warmupMinRatio =
      reader.number("warmup_min_ratio", kNonNegative, "a finite number >= 0 (one for all groups)")
          .value_or(0.0);
  options.warmupNumSteps = readWarmupNumSteps(reader);
  options.cosMinRatio =
      reader.number("cos_min_ratio", kNonNegative, "a finite number >= 0 (one for all groups)")
          .value_or(0.0001);
  options.warmupType = reader.warmupType(warnings);
  options.lastBatchIteration = reader.lastBatchIteration();
  options.formulas = formulas;
  const std::int64_t w = std::max<std::int64_t>(2, options.warmupNumSteps);
  if (formulas == LrFormulas::kV0_18_2 && options.totalNumSteps == w) {
    ParamReader::fail("total_num_steps", ParamValue{options.totalNumSteps},
                      fmt::format("a value other than max(2, warmup_num_steps) = {}: DeepSpeed "
                                  "v0.18.2's WarmupCosineLR divides by their difference",
                                  w));
  }
  auto schedule = std::make_unique<WarmupCosineLr>(std::move(options));
  for (auto& warning : warnings) {
    LrScheduleFactoryAccess::addWarning(*schedule, std::move(warning));
  }
  return schedule;
}

std::unique_ptr<LrSchedule> makeOneCycle(const config::SchedulerConfig& config,
                                         std::span<const double> groupLrs,
                                         const LrScheduleOptions& factoryOptions) {
  static constexpr std::array<std::string_view, 13> kKeys = {"cycle_min_lr",
                                                             "cycle_max_lr",
                                                             "decay_lr_rate",
                                                             "cycle_first_step_size",
                                                             "cycle_second_step_size",
                                                             "cycle_first_stair_count",
                                                             "cycle_second_stair_count",
                                                             "decay_step_size",
                                                             "cycle_momentum",
                                                             "cycle_min_mom",
                                                             "cycle_max_mom",
                                                             "decay_mom_rate",
                                                             "last_batch_iteration"};
  const ParamReader reader(config.params, config.type, kKeys);
  const std::string oneLr =
      "a finite number >= 0 (a learning rate; OneCycle takes one value for "
      "all parameter groups)";
  OneCycleOptions options;
  options.numParamGroups = static_cast<int>(groupLrs.size());
  options.cycleMinLr = reader.requiredNumber("cycle_min_lr", kNonNegative, oneLr);
  options.cycleMaxLr = reader.requiredNumber("cycle_max_lr", kNonNegative, oneLr);
  options.decayLrRate =
      reader.number("decay_lr_rate", kNonNegative, "a finite number >= 0").value_or(0.0);
  options.cycleFirstStepSize =
      reader.number("cycle_first_step_size", kPositive, "a number > 0 (training steps)")
          .value_or(2000.0);
  options.cycleSecondStepSize =
      reader.number("cycle_second_step_size", kNonNegative, "a number >= 0 (training steps)");
  options.cycleFirstStairCount =
      reader.integer("cycle_first_stair_count", 0, "an integer >= 0 (0 = no stairs)").value_or(0);
  options.cycleSecondStairCount =
      reader.integer("cycle_second_stair_count", 0, "an integer >= 0 (0 = no stairs)");
  options.decayStepSize =
      reader.number("decay_step_size", kNonNegative, "a number >= 0 (0 = no decay)").value_or(0.0);
  options.cycleMomentum = reader.boolean("cycle_momentum").value_or(true);
  const std::string momWords = "a number in [0, 1) (beta1)";
  options.cycleMinMom = reader.number("cycle_min_mom", kUnitInterval, momWords).value_or(0.8);
  options.cycleMaxMom = reader.number("cycle_max_mom", kUnitInterval, momWords).value_or(0.9);
  options.decayMomRate =
      reader.number("decay_mom_rate", kNonNegative, "a finite number >= 0").value_or(0.0);
  options.lastBatchIteration = reader.lastBatchIteration();
  options.optimizerHasBetas = factoryOptions.optimizerHasBetas;
  options.formulas = factoryOptions.formulas;
  return std::make_unique<OneCycle>(std::move(options));
}

std::unique_ptr<LrSchedule> makeLrRangeTest(const config::SchedulerConfig& config,
                                            std::span<const double> groupLrs) {
  static constexpr std::array<std::string_view, 5> kKeys = {
      "lr_range_test_min_lr", "lr_range_test_step_size", "lr_range_test_step_rate",
      "lr_range_test_staircase", "last_batch_iteration"};
  const ParamReader reader(config.params, config.type, kKeys);
  const std::size_t groups = groupLrs.size();
  LrRangeTestOptions options;
  options.minLrs = reader.perGroup("lr_range_test_min_lr", groups, kNonNegative, kLrWords)
                       .value_or(std::vector<double>(groups, 1e-3));
  options.stepSize =
      reader.number("lr_range_test_step_size", kPositive, "a number > 0 (training steps)")
          .value_or(2000.0);
  options.stepRate =
      reader.number("lr_range_test_step_rate", kNonNegative, "a finite number >= 0").value_or(1.0);
  options.staircase = reader.boolean("lr_range_test_staircase").value_or(false);
  options.lastBatchIteration = reader.lastBatchIteration();
  return std::make_unique<LrRangeTest>(std::move(options));
}

}  // namespace

std::unique_ptr<LrSchedule> makeLrSchedule(const config::SchedulerConfig& config,
                                           std::span<const double> groupLrs,
                                           const LrScheduleOptions& options) {
  STRETCH_CHECK(!groupLrs.empty(), "an lr schedule needs at least one parameter group");
  for (const double lr : groupLrs) {
    STRETCH_CHECK(std::isfinite(lr) && lr >= 0.0, "optimizer lr {} is not a finite number >= 0",
                  lr);
  }
  if (config.type == "WarmupLR") {
    return makeWarmup(config, groupLrs, /*decay=*/false);
  }
  if (config.type == "WarmupDecayLR") {
    return makeWarmup(config, groupLrs, /*decay=*/true);
  }
  if (config.type == "WarmupCosineLR") {
    return makeWarmupCosine(config, groupLrs, options.formulas);
  }
  if (config.type == "OneCycle") {
    return makeOneCycle(config, groupLrs, options);
  }
  if (config.type == "LRRangeTest") {
    return makeLrRangeTest(config, groupLrs);
  }
  std::string expected = fmt::format(
      "one of {} (names are case-sensitive; torch.optim.lr_scheduler classes are "
      "not supported)",
      joinNames(kLrScheduleNames));
  if (const auto guess = closestMatch(config.type, kLrScheduleNames)) {
    expected += fmt::format("; did you mean \"{}\"?", *guess);
  }
  throw ConfigError(
      ErrorDetail{"scheduler.type", fmt::format("\"{}\"", config.type), std::move(expected)});
}

std::unique_ptr<LrSchedule> makeLrSchedule(const config::SchedulerConfig& config,
                                           int numParamGroups, double optimizerLr,
                                           const LrScheduleOptions& options) {
  STRETCH_CHECK_GE(numParamGroups, 1, "an lr schedule needs at least one parameter group");
  const std::vector<double> groupLrs(static_cast<std::size_t>(numParamGroups), optimizerLr);
  return makeLrSchedule(config, groupLrs, options);
}

}  // namespace stretch::engine
