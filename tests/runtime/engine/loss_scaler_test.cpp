// The fp16 loss scalers against DeepSpeed: every trace DeepSpeed's own DynamicLossScaler recorded
// (fixtures/engine/ls_samples.txt) reproduced exactly, the min-scale exception, the doubling
// points with the default window; FP16_Optimizer's (ZeRO stage 0) rule from the reference's
// section 2.4; the factory and its errors; state save/load; properties of both dynamic rules.

#include "runtime/engine/loss_scaler.hpp"

#include <cmath>
#include <cstdint>
#include <iostream>
#include <optional>
#include <rapidcheck.h>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "runtime/common/error.hpp"
#include "runtime/config/ds_config.hpp"
#include "tests/support/test_support.hpp"
#include "tests/support/text_support.hpp"

namespace stretch::engine {
namespace {

using test::trim;
using ::testing::HasSubstr;

// ---- The recorded traces ------------------------------------------------------------------------

struct TraceRow {
  std::int64_t iter = 0;
  bool overflow = false;
  double scaleBefore = 0;
  std::int64_t hystBefore = 0;
  double scaleAfter = 0;
  std::int64_t hystAfter = 0;
  std::int64_t lastOverflowIter = 0;
};

struct Trace {
  std::string title;
  std::vector<TraceRow> rows;
};

struct LsSamples {
  std::vector<Trace> traces;
  std::vector<int> guardPattern;  // "min-scale guard ... pattern [1,1,1] -> Exception : <msg>"
  std::string guardMessage;
  std::vector<std::pair<std::int64_t, double>> defaultDoublings;  // (cur_iter, scale after)
};

LsSamples parseLsSamples(const std::string& text) {
  LsSamples samples;
  for (const std::string& line : test::trimmedLines(text)) {
    if (line.starts_with("iter |")) {
      continue;
    }
    if (line.starts_with("### ")) {
      samples.traces.push_back(Trace{trim(line.substr(4)), {}});
      continue;
    }
    if (line.starts_with("min-scale guard")) {
      const auto open = line.find('[');
      const auto close = line.find(']');
      for (const std::string& item :
           test::trimmedFields(line.substr(open + 1, close - open - 1), ',')) {
        samples.guardPattern.push_back(std::stoi(item));
      }
      samples.guardMessage = trim(line.substr(line.find("Exception :") + 11));
      continue;
    }
    if (line.starts_with("defaults (window=1000)")) {
      std::size_t pos = line.find("= [");
      while ((pos = line.find('(', pos)) != std::string::npos) {
        const auto comma = line.find(',', pos);
        const auto close = line.find(')', pos);
        samples.defaultDoublings.emplace_back(std::stoll(line.substr(pos + 1, comma - pos - 1)),
                                              std::stod(line.substr(comma + 1, close - comma - 1)));
        pos = close;
      }
      continue;
    }
    const std::vector<std::string> parts = test::trimmedFields(line, '|');
    if (samples.traces.empty() || parts.size() != 7) {
      ADD_FAILURE() << "unexpected line in ls_samples.txt: " << line;
      continue;
    }
    samples.traces.back().rows.push_back(
        TraceRow{std::stoll(parts[0]), parts[1] == "1", std::stod(parts[2]), std::stoll(parts[3]),
                 std::stod(parts[4]), std::stoll(parts[5]), std::stoll(parts[6])});
  }
  return samples;
}

const LsSamples& samples() {
  static const LsSamples parsed =
      parseLsSamples(test::readFile(test::fixturePath("engine/ls_samples.txt")));
  return parsed;
}

config::Fp16Config dynamicFp16(std::int64_t power, std::int64_t window, std::int64_t hysteresis,
                               bool consecutive, double minScale = 1.0) {
  config::Fp16Config fp16;
  fp16.enabled = true;
  fp16.initialScalePower = power;
  fp16.lossScaleWindow = window;
  fp16.hysteresis = hysteresis;
  fp16.consecutiveHysteresis = consecutive;
  fp16.minLossScale = minScale;
  return fp16;
}

std::unique_ptr<LossScaler> scalerForTrace(const std::string& title) {
  if (title ==
      "DynamicLossScaler init=2^16 window=4 hysteresis(delayed_shift)=2 "
      "consecutive_hysteresis=False") {
    return makeLossScaler(dynamicFp16(16, 4, 2, false));
  }
  if (title == "same, consecutive_hysteresis=True") {
    return makeLossScaler(dynamicFp16(16, 4, 2, true));
  }
  if (title == "hysteresis=1 (every overflow halves)") {
    return makeLossScaler(dynamicFp16(16, 4, 1, false));
  }
  if (title == "raise_error_at_min_scale=False (scale clamps at min)") {
    DynamicLossScalerOptions options;
    options.initScale = 2;
    options.minScale = 1;
    options.delayedShift = 1;
    options.scaleWindow = 4;
    options.raiseErrorAtMinScale = false;
    return std::make_unique<DynamicLossScaler>(options);
  }
  return nullptr;
}

TEST(LossScalerSamples, ReproducesEveryRecordedTrace) {
  ASSERT_EQ(samples().traces.size(), 4u);
  int rows = 0;
  for (const Trace& trace : samples().traces) {
    SCOPED_TRACE(trace.title);
    auto scaler = scalerForTrace(trace.title);
    ASSERT_NE(scaler, nullptr) << "no config for this trace";
    auto* dynamic = dynamic_cast<DynamicLossScaler*>(scaler.get());
    ASSERT_NE(dynamic, nullptr);
    ASSERT_FALSE(trace.rows.empty());
    for (const TraceRow& row : trace.rows) {
      SCOPED_TRACE("iter " + std::to_string(row.iter));
      EXPECT_EQ(dynamic->curIter(), row.iter);
      EXPECT_EQ(dynamic->curScale(), row.scaleBefore);
      EXPECT_EQ(dynamic->curHysteresis(), row.hystBefore);
      dynamic->update(row.overflow);
      EXPECT_EQ(dynamic->curScale(), row.scaleAfter);
      EXPECT_EQ(dynamic->curHysteresis(), row.hystAfter);
      EXPECT_EQ(dynamic->lastOverflowIter(), row.lastOverflowIter);
      ++rows;
    }
  }
  std::cout << "reproduced " << rows << " recorded updates from " << samples().traces.size()
            << " traces\n";
}

TEST(LossScalerSamples, OverflowAtMinScaleThrowsDeepSpeedsException) {
  ASSERT_EQ(samples().guardPattern, (std::vector<int>{1, 1, 1}));
  auto scaler = makeLossScaler(dynamicFp16(1, 1000, 1, false, 1.0));  // init 2, min 1, hyst 1
  std::optional<std::size_t> thrownAt;
  for (std::size_t i = 0; i < samples().guardPattern.size(); ++i) {
    const double before = scaler->curScale();
    const auto stateBefore = scaler->state();
    try {
      scaler->update(samples().guardPattern[i] == 1);
    } catch (const LossScaleError& e) {
      thrownAt = i;
      EXPECT_EQ(e.what(), samples().guardMessage);
      EXPECT_EQ(before, 1.0);
      EXPECT_EQ(scaler->state(), stateBefore) << "DeepSpeed raises before changing anything";
      break;
    }
  }
  EXPECT_EQ(thrownAt, std::optional<std::size_t>(1)) << "2 -> 1, then the exception";
}

TEST(LossScalerSamples, DefaultWindowDoublesAtTheRecordedIterations) {
  ASSERT_EQ(samples().defaultDoublings.size(), 3u);
  config::Fp16Config fp16;
  fp16.enabled = true;  // every other key at its default
  auto scaler = makeLossScaler(fp16);
  EXPECT_EQ(scaler->curScale(), 65536.0);
  std::vector<std::pair<std::int64_t, double>> doublings;
  for (std::int64_t iter = 0; iter <= samples().defaultDoublings.back().first; ++iter) {
    const double before = scaler->curScale();
    scaler->update(false);
    if (scaler->curScale() != before) {
      doublings.emplace_back(iter, scaler->curScale());
    }
  }
  EXPECT_EQ(doublings, samples().defaultDoublings);
}

// ---- FP16_Optimizer's rule (ZeRO stage 0), reference section 2.4 --------------------------------

TEST(Fp16OptimizerLossScaler, HalvesOnEveryOverflowIgnoringHysteresis) {
  // The pattern of the first recorded trace, under the ZeRO-0 rule (hysteresis=2 is ignored).
  auto scaler = makeLossScaler(dynamicFp16(16, 4, 2, false), LossScaleRule::kFp16Optimizer);
  ASSERT_NE(dynamic_cast<Fp16OptimizerLossScaler*>(scaler.get()), nullptr);
  const std::vector<int> pattern = {1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0};
  const std::vector<double> expected = {32768, 16384, 8192,  8192,  8192,  8192,
                                        8192,  16384, 16384, 16384, 16384, 32768,
                                        16384, 16384, 16384, 16384, 16384, 32768};
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    scaler->update(pattern[i] == 1);
    EXPECT_EQ(scaler->curScale(), expected[i]) << "iter " << i;
  }
  EXPECT_EQ(scaler->state().lastOverflowIter, 12);
  EXPECT_EQ(scaler->state().curIter, 18);
}

TEST(Fp16OptimizerLossScaler, ClampsAtTheFloorWithoutRaising) {
  auto scaler = makeLossScaler(dynamicFp16(1, 1000, 2, false, 1.0), LossScaleRule::kFp16Optimizer);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NO_THROW(scaler->update(true));
    EXPECT_EQ(scaler->curScale(), 1.0);
  }
}

TEST(Fp16OptimizerLossScaler, LoadStateRestoresWindowButKeepsTheConfiguredMinimum) {
  Fp16OptimizerLossScaler scaler({65536.0, 1000, 4.0});
  LossScalerState state;
  state.dynamic = true;
  state.curScale = 16;
  state.curIter = 50;
  state.lastOverflowIter = 45;
  state.scaleWindow = 4;
  state.minScale = 0.25;
  scaler.loadState(state);
  EXPECT_EQ(scaler.state().scaleWindow, 4);
  EXPECT_EQ(scaler.state().minScale, 4.0);
  scaler.update(true);  // 16 / 2 = 8, above the kept minimum 4
  scaler.update(true);  // 4
  scaler.update(true);  // clamped at 4, not 2
  EXPECT_EQ(scaler.curScale(), 4.0);
}

// ---- Factory ------------------------------------------------------------------------------------

TEST(MakeLossScaler, StaticAndDisabled) {
  config::Fp16Config off;
  auto none = makeLossScaler(off);
  EXPECT_FALSE(none->dynamic());
  EXPECT_EQ(none->curScale(), 1.0);

  config::Fp16Config fixed;
  fixed.enabled = true;
  fixed.lossScale = 128;
  for (const auto rule : {LossScaleRule::kZeroOptimizer, LossScaleRule::kFp16Optimizer}) {
    auto scaler = makeLossScaler(fixed, rule);
    EXPECT_FALSE(scaler->dynamic());
    scaler->update(true);
    scaler->update(false);
    EXPECT_EQ(scaler->curScale(), 128.0);
    EXPECT_EQ(scaler->state().curIter, 2);
  }
}

TEST(MakeLossScaler, DynamicSettingsComeFromTheConfig) {
  auto scaler = makeLossScaler(dynamicFp16(8, 7, 3, true, 0.5));
  const LossScalerState s = scaler->state();
  EXPECT_TRUE(s.dynamic);
  EXPECT_EQ(s.curScale, 256.0);
  EXPECT_EQ(s.scaleWindow, 7);
  EXPECT_EQ(s.delayedShift, 3);
  EXPECT_EQ(s.curHysteresis, 3);
  EXPECT_TRUE(s.consecutiveHysteresis);
  EXPECT_EQ(s.minScale, 0.5);
  EXPECT_EQ(s.scaleFactor, 2.0);
  EXPECT_EQ(s.lastOverflowIter, -1);
  EXPECT_TRUE(dynamic_cast<DynamicLossScaler&>(*scaler).raiseErrorAtMinScale());
}

std::string errorOf(const config::Fp16Config& fp16) {
  try {
    makeLossScaler(fp16);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(MakeLossScaler, ErrorsNameTheKey) {
  EXPECT_EQ(errorOf(dynamicFp16(16, 0, 2, false)),
            "fp16.loss_scale_window = 0: expected a positive integer (dynamic loss scaling)");
  EXPECT_EQ(errorOf(dynamicFp16(16, 1000, 0, false)),
            "fp16.hysteresis = 0: expected a positive integer");
  EXPECT_EQ(errorOf(dynamicFp16(16, 1000, 2, false, 0.0)),
            "fp16.min_loss_scale = 0: expected a number > 0 (dynamic loss scaling)");
  EXPECT_EQ(errorOf(dynamicFp16(2000, 1000, 2, false)),
            "fp16.initial_scale_power = 2000: expected an integer in [0, 1023] (the initial "
            "scale is 2^power)");
  config::Fp16Config negative;
  negative.enabled = true;
  negative.lossScale = -1;
  EXPECT_EQ(errorOf(negative),
            "fp16.loss_scale = -1: expected a finite number >= 0 (0 = dynamic loss scaling)");
}

TEST(LossScalerState, LoadingTheOtherKindIsAnError) {
  auto dynamic = makeLossScaler(dynamicFp16(16, 4, 2, false));
  StaticLossScaler fixed(8);
  EXPECT_THROW(fixed.loadState(dynamic->state()), ConfigError);
  EXPECT_THROW(dynamic->loadState(fixed.state()), ConfigError);
}

TEST(LossScalerState, DynamicLoadRestoresTheWholeScalerLikeDeepSpeedsPickle) {
  auto source = makeLossScaler(dynamicFp16(10, 3, 4, true, 2.0));
  source->update(true);
  source->update(false);
  auto target = makeLossScaler(dynamicFp16(16, 1000, 2, false));
  target->loadState(source->state());
  EXPECT_EQ(target->state(), source->state());
  for (const int overflow : {0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1}) {
    source->update(overflow == 1);
    target->update(overflow == 1);
    EXPECT_EQ(target->state(), source->state());
  }
}

// ---- Properties ---------------------------------------------------------------------------------

struct Setup {
  std::int64_t power;
  std::int64_t window;
  std::int64_t hysteresis;
  bool consecutive;
  double minScale;
  std::vector<bool> pattern;
};

rc::Gen<Setup> setupGen() {
  return rc::gen::build<Setup>(
      rc::gen::set(&Setup::power, rc::gen::inRange<std::int64_t>(0, 25)),
      rc::gen::set(&Setup::window, rc::gen::inRange<std::int64_t>(1, 8)),
      rc::gen::set(&Setup::hysteresis, rc::gen::inRange<std::int64_t>(1, 5)),
      rc::gen::set(&Setup::consecutive),
      rc::gen::set(&Setup::minScale, rc::gen::element(0.25, 1.0, 4.0, 1024.0)),
      rc::gen::set(&Setup::pattern,
                   rc::gen::container<std::vector<bool>>(rc::gen::weightedOneOf<bool>(
                       {{3, rc::gen::just(false)}, {1, rc::gen::just(true)}}))));
}

void showValue(const Setup& s, std::ostream& os) {
  os << "power=" << s.power << " window=" << s.window << " hysteresis=" << s.hysteresis
     << " consecutive=" << s.consecutive << " min=" << s.minScale << " pattern=";
  for (const bool b : s.pattern) {
    os << (b ? '1' : '0');
  }
}

RC_GTEST_PROP(LossScalerProperty, DynamicScaleNeverGoesBelowMinScale, ()) {
  const Setup s = *setupGen();
  for (const auto rule : {LossScaleRule::kZeroOptimizer, LossScaleRule::kFp16Optimizer}) {
    auto scaler = makeLossScaler(
        dynamicFp16(s.power, s.window, s.hysteresis, s.consecutive, s.minScale), rule);
    const double init = scaler->curScale();
    std::int64_t done = 0;
    for (const bool overflow : s.pattern) {
      const double before = scaler->curScale();
      try {
        scaler->update(overflow);
      } catch (const LossScaleError&) {
        RC_ASSERT(rule == LossScaleRule::kZeroOptimizer);
        RC_ASSERT(overflow);
        RC_ASSERT(before == s.minScale);
        break;
      }
      ++done;
      const LossScalerState st = scaler->state();
      RC_ASSERT(st.curIter == done);
      if (init >= s.minScale) {
        RC_ASSERT(st.curScale >= s.minScale);
      }
      // Only halvings (clamped at min) and doublings.
      RC_ASSERT(st.curScale == before || st.curScale == 2 * before || st.curScale == before / 2 ||
                st.curScale == s.minScale);
      if (rule == LossScaleRule::kZeroOptimizer) {
        RC_ASSERT(st.curHysteresis >= 1 && st.curHysteresis <= s.hysteresis);
      }
      if (overflow && before >= s.minScale) {
        RC_ASSERT(st.curScale <= before);
        RC_ASSERT(st.lastOverflowIter == done - 1);
      }
    }
  }
}

// With delayed_shift 1 and no exception, DeepSpeed's two rules coincide.
RC_GTEST_PROP(LossScalerProperty, RulesAgreeWithoutHysteresisAndWithoutRaising, ()) {
  const Setup s = *setupGen();
  DynamicLossScalerOptions options;
  options.initScale = std::ldexp(1.0, static_cast<int>(s.power));
  options.scaleWindow = s.window;
  options.minScale = s.minScale;
  options.delayedShift = 1;
  options.consecutiveHysteresis = s.consecutive;
  options.raiseErrorAtMinScale = false;
  DynamicLossScaler zero(options);
  Fp16OptimizerLossScaler fused({options.initScale, s.window, s.minScale});
  for (const bool overflow : s.pattern) {
    zero.update(overflow);
    fused.update(overflow);
    RC_ASSERT(zero.curScale() == fused.curScale());
    RC_ASSERT(zero.lastOverflowIter() == fused.lastOverflowIter());
    RC_ASSERT(zero.curIter() == fused.curIter());
  }
}

RC_GTEST_PROP(LossScalerProperty, SaveLoadMidSequenceContinuesIdentically, ()) {
  const Setup s = *setupGen();
  const auto split = *rc::gen::inRange<std::size_t>(0, s.pattern.size() + 1);
  for (const auto rule : {LossScaleRule::kZeroOptimizer, LossScaleRule::kFp16Optimizer}) {
    const auto fp16 = dynamicFp16(s.power, s.window, s.hysteresis, s.consecutive, s.minScale);
    auto original = makeLossScaler(fp16, rule);
    auto runOne = [](LossScaler& scaler, bool overflow) {
      try {
        scaler.update(overflow);
        return true;
      } catch (const LossScaleError&) {
        return false;
      }
    };
    bool alive = true;
    for (std::size_t i = 0; i < split && alive; ++i) {
      alive = runOne(*original, s.pattern[i]);
    }
    if (!alive) {
      continue;
    }
    auto resumed = makeLossScaler(fp16, rule);
    resumed->loadState(original->state());
    RC_ASSERT(resumed->state() == original->state());
    for (std::size_t i = split; i < s.pattern.size(); ++i) {
      const bool a = runOne(*original, s.pattern[i]);
      const bool b = runOne(*resumed, s.pattern[i]);
      RC_ASSERT(a == b);
      RC_ASSERT(resumed->state() == original->state());
      if (!a) {
        break;
      }
    }
  }
}

}  // namespace
}  // namespace stretch::engine
