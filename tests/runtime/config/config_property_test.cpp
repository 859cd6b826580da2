// Properties of the config layer: toJson/parseConfig round trips, resolveBatch's invariant, and
// parseConfig's promise to throw nothing but stretch::Error on any input.

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <ostream>
#include <rapidcheck.h>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "runtime/common/error.hpp"
#include "runtime/config/batch.hpp"
#include "runtime/config/ds_config.hpp"

namespace stretch::config {

// Counterexamples print as the JSON the property fed to the parser.
void showValue(const DsConfig& config, std::ostream& os) {
  os << toJson(config);
}
void showValue(const BatchKeys& keys, std::ostream& os) {
  const auto show = [&os](const char* name, const std::optional<std::int64_t>& v) {
    os << name << '=' << (v ? std::to_string(*v) : std::string("unset")) << ' ';
  };
  show("tb", keys.trainBatchSize);
  show("mb", keys.microBatchPerGpu);
  show("gas", keys.gradientAccumulation);
}

namespace {

namespace gen = rc::gen;

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

// Mostly the small powers-of-two-ish values real configs use, sometimes anything positive.
rc::Gen<std::int64_t> positiveInt() {
  return gen::weightedOneOf<std::int64_t>(
      {{6, gen::inRange<std::int64_t>(1, 65)},
       {3, gen::element<std::int64_t>(128, 256, 512, 1000, 1024, 2048, 4096, 100000)},
       {1, gen::positive<std::int64_t>()}});
}

rc::Gen<std::int64_t> intIn(std::int64_t lo, std::int64_t hi) {  // [lo, hi]
  return gen::weightedOneOf<std::int64_t>(
      {{4, gen::inRange<std::int64_t>(lo, std::min(hi, lo + 64) + 1)},
       {1, gen::element(lo, hi)},
       {1, hi == kInt64Max ? gen::inRange<std::int64_t>(lo, hi)
                           : gen::inRange<std::int64_t>(lo, hi + 1)}});
}

template <typename T>
rc::Gen<std::optional<T>> optionalOf(rc::Gen<T> value) {
  return gen::weightedOneOf<std::optional<T>>(
      {{1, gen::just(std::optional<T>())}, {3, gen::cast<std::optional<T>>(std::move(value))}});
}

rc::Gen<double> finiteDouble() {
  return gen::suchThat(gen::arbitrary<double>(), [](double d) { return std::isfinite(d); });
}

// Realistic values (learning rates, clip norms, ratios) and arbitrary ones that stress printing.
rc::Gen<double> nonNegativeDouble() {
  return gen::weightedOneOf<double>(
      {{4, gen::element(0.0, 1.0, 0.5, 1e-3, 3e-5, 0.1, 0.3, 2.0, 65536.0, 1e-8)},
       {3, gen::map(finiteDouble(), [](double d) { return std::fabs(d); })}});
}

rc::Gen<double> positiveDouble() {
  return gen::suchThat(nonNegativeDouble(), [](double d) { return d > 0.0; });
}

// Printable ASCII with some escapes and multi-byte UTF-8: JSON round-trips valid UTF-8 only.
rc::Gen<std::string> text() {
  const auto piece = gen::weightedOneOf<std::string>(
      {{20, gen::map(gen::inRange<int>(32, 127),
                     [](int c) { return std::string(1, static_cast<char>(c)); })},
       {2, gen::element<std::string>("\n", "\t", "\\", "\"", "/", "\x01")},
       {1, gen::element<std::string>("\xc3\xa9", "\xe6\x97\xa5", "\xf0\x9f\x98\x80")}});
  return gen::map(gen::container<std::vector<std::string>>(piece),
                  [](const std::vector<std::string>& pieces) {
                    std::string out;
                    for (const std::string& p : pieces) {
                      out += p;
                    }
                    return out;
                  });
}

rc::Gen<std::string> name(std::initializer_list<std::string> common) {
  return gen::weightedOneOf<std::string>(
      {{3, gen::elementOf(std::vector<std::string>(common))}, {1, gen::nonEmpty(text())}});
}

rc::Gen<ParamValue> paramValue() {
  return gen::oneOf(
      gen::cast<ParamValue>(gen::arbitrary<bool>()),
      gen::cast<ParamValue>(gen::weightedOneOf<std::int64_t>(
          {{3, gen::inRange<std::int64_t>(-10, 100000)}, {1, gen::arbitrary<std::int64_t>()}})),
      gen::cast<ParamValue>(gen::oneOf(nonNegativeDouble(), finiteDouble())),
      gen::cast<ParamValue>(gen::oneOf(gen::element<std::string>("auto", "cosine"), text())),
      gen::cast<ParamValue>(gen::container<std::vector<double>>(finiteDouble())));
}

rc::Gen<Params> params(std::initializer_list<std::string> names, bool forbidMaxGradNorm) {
  const auto entry =
      gen::pair(name(names), paramValue());  // duplicates collapse in the map, which is fine
  return gen::map(gen::container<std::vector<std::pair<std::string, ParamValue>>>(entry),
                  [forbidMaxGradNorm](const auto& entries) {
                    Params out;
                    for (const auto& [k, v] : entries) {
                      if (!(forbidMaxGradNorm && k == "max_grad_norm")) {
                        out.emplace(k, v);
                      }
                    }
                    return out;
                  });
}

rc::Gen<ElasticityConfig> elasticity() {
  return gen::exec([] {
    ElasticityConfig e;
    e.enabled = *gen::arbitrary<bool>();
    e.maxTrainBatchSize = *gen::weightedOneOf<std::int64_t>(
        {{4, gen::element<std::int64_t>(2000, 10000, 100000, 1024, 8192)},
         {1, gen::inRange<std::int64_t>(1, kMaxTrainBatchLimit + 1)}});
    e.microBatchSizes = *gen::resize(
        12,
        gen::nonEmpty(gen::container<std::vector<std::int64_t>>(gen::weightedOneOf<std::int64_t>(
            {{8, gen::inRange<std::int64_t>(1, 33)},
             {1, gen::inRange<std::int64_t>(1, kMaxTrainBatchLimit + 1)}}))));
    e.minGpus = *positiveInt();
    e.maxGpus = *intIn(e.minGpus, kInt64Max);
    e.numGpusPerNode = *gen::weightedOneOf<std::int64_t>(
        {{4, gen::element<std::int64_t>(1, 2, 4, 8, 16)}, {1, positiveInt()}});
    e.modelParallelSize = *gen::weightedOneOf<std::int64_t>(
        {{4, gen::element<std::int64_t>(1, 2, 4, 8)}, {1, positiveInt()}});
    e.minTime = *nonNegativeDouble();
    e.preferLargerBatch = *gen::arbitrary<bool>();
    e.ignoreNonElasticBatchInfo = *gen::arbitrary<bool>();
    e.version =
        *gen::element(ElasticityVersion::V0_1, ElasticityVersion::V0_2, ElasticityVersion::Exact);
    if (e.version == ElasticityVersion::Exact) {
      e.targetBatchSize = *optionalOf(intIn(1, kMaxTrainBatchLimit));
      e.batchTolerance = *gen::weightedOneOf<double>(
          {{3, gen::element(0.0, 0.05, 0.1, 0.25)},
           {1, gen::suchThat(nonNegativeDouble(), [](double d) { return d < 1.0; })}});
    }
    return e;
  });
}

rc::Gen<DsConfig> dsConfig() {
  return gen::exec([] {
    DsConfig c;
    c.batch.trainBatchSize = *optionalOf(positiveInt());
    c.batch.microBatchPerGpu = *optionalOf(positiveInt());
    c.batch.gradientAccumulation = *optionalOf(positiveInt());
    if (*gen::arbitrary<bool>()) {
      c.optimizer = OptimizerConfig{
          *name({"Adam", "AdamW", "SGD", "Lamb", "OneBitAdam", "Lion"}),
          *params({"lr", "betas", "eps", "weight_decay", "momentum", "torch_adam"}, true),
          *gen::arbitrary<bool>()};
    }
    if (*gen::arbitrary<bool>()) {
      c.scheduler = SchedulerConfig{
          *name({"WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "OneCycle", "LRRangeTest"}),
          *params({"warmup_min_lr", "warmup_max_lr", "warmup_num_steps", "total_num_steps",
                   "max_grad_norm"},
                  false)};
    }
    const int precision = *gen::element(0, 1, 2);  // none, fp16, bf16 (never both)
    c.fp16.enabled = precision == 1;
    c.fp16.autoCast = *gen::arbitrary<bool>();
    c.fp16.lossScale = *gen::weightedOneOf<double>(
        {{3, gen::just(0.0)}, {1, gen::element(128.0, 1024.0)}, {1, positiveDouble()}});
    c.fp16.initialScalePower = *intIn(0, 1023);
    if (c.fp16.dynamicLossScale()) {
      c.fp16.lossScaleWindow = *positiveInt();
      c.fp16.minLossScale = *positiveDouble();
    } else {
      c.fp16.lossScaleWindow = *gen::arbitrary<std::int64_t>();
      c.fp16.minLossScale = *finiteDouble();
    }
    c.fp16.hysteresis = *positiveInt();
    c.fp16.consecutiveHysteresis = *gen::arbitrary<bool>();
    c.bf16.enabled = precision == 2;
    c.bf16.immediateGradUpdate = *gen::arbitrary<bool>();
    c.bf16.checkGradOverflow = *gen::arbitrary<bool>();
    c.gradientClipping = *nonNegativeDouble();
    c.prescaleGradients = *gen::arbitrary<bool>();
    c.gradientPredivideFactor = *positiveDouble();
    c.gradientAllreduceOp = *gen::element(GradientAllreduceOp::Mean, GradientAllreduceOp::Sum);

    c.zero.stage = *gen::inRange<std::int64_t>(0, 4);
    c.zero.contiguousGradients = *gen::arbitrary<bool>();
    c.zero.reduceScatter = *gen::arbitrary<bool>();
    c.zero.reduceBucketSize = *gen::weightedOneOf<std::int64_t>(
        {{3, gen::element<std::int64_t>(500'000'000, 200'000'000, 50'000'000)},
         {1, positiveInt()}});
    c.zero.allgatherPartitions = *gen::arbitrary<bool>();
    c.zero.allgatherBucketSize = *positiveInt();
    c.zero.overlapComm = *optionalOf(gen::arbitrary<bool>());
    c.zero.loadFromFp32Weights = *gen::arbitrary<bool>();
    c.zero.elasticCheckpoint = *gen::arbitrary<bool>();
    c.zero.roundRobinGradients = *gen::arbitrary<bool>();
    c.zero.ignoreUnusedParameters = *gen::arbitrary<bool>();
    if (*gen::arbitrary<bool>()) {
      OffloadConfig offload;
      offload.device = *gen::element(OffloadDevice::None, OffloadDevice::Cpu, OffloadDevice::Nvme);
      offload.nvmePath = *optionalOf(gen::weightedOneOf<std::string>(
          {{3, gen::element<std::string>("/local_nvme", "/mnt/nvme0")}, {1, text()}}));
      if (offload.device == OffloadDevice::Nvme && !offload.nvmePath) {
        offload.nvmePath = "/local_nvme";
      }
      offload.pinMemory = *gen::arbitrary<bool>();
      offload.bufferCount = *intIn(0, kInt64Max);
      c.zero.offloadOptimizer = offload;
    }

    c.elasticity = *elasticity();
    if (c.elasticity.enabled && c.batch.anySet()) {
      // DeepSpeed refuses batch keys next to enabled elasticity unless told to ignore them.
      c.elasticity.ignoreNonElasticBatchInfo = true;
    }
    c.checkpoint.tagValidation =
        *gen::element(TagValidation::Ignore, TagValidation::Warn, TagValidation::Fail);
    c.checkpoint.loadUniversal = *gen::arbitrary<bool>();
    c.checkpoint.useNodeLocalStorage = *gen::arbitrary<bool>();
    c.checkpoint.parallelWritePipelineStage = *gen::arbitrary<bool>();
    c.stepsPerPrint = *optionalOf(positiveInt());
    c.wallClockBreakdown = *gen::arbitrary<bool>();
    c.commsLogger.enabled = *gen::arbitrary<bool>();
    c.commsLogger.verbose = *gen::arbitrary<bool>();
    c.commsLogger.profAll = *gen::arbitrary<bool>();
    c.commsLogger.debug = *gen::arbitrary<bool>();
    c.commsLogger.profOps = *gen::container<std::vector<std::string>>(
        name({"all_reduce", "all_gather", "broadcast", "reduce_scatter"}));
    return c;
  });
}

// Random edits of a text: delete, insert, replace or duplicate a slice.
std::string mutate(std::string input,
                   const std::vector<std::tuple<int, std::size_t, char>>& edits) {
  for (const auto& [kind, at, c] : edits) {
    const std::size_t pos = input.empty() ? 0 : at % (input.size() + 1);
    switch (kind) {
      case 0:
        if (pos < input.size()) {
          input.erase(pos, 1);
        }
        break;
      case 1:
        input.insert(pos, 1, c);
        break;
      case 2:
        if (pos < input.size()) {
          input[pos] = c;
        }
        break;
      default:
        input.insert(pos, input.substr(pos, static_cast<std::size_t>(c) % 16));
        break;
    }
  }
  return input;
}

rc::Gen<char> jsonishChar() {
  return gen::weightedOneOf<char>(
      {{6, gen::elementOf(std::string("{}[],:\"\\/*-+.0123456789eEtrufalsn \n\t"))},
       {1, gen::arbitrary<char>()}});
}

}  // namespace
}  // namespace stretch::config

namespace rc {
template <>
struct Arbitrary<stretch::config::DsConfig> {
  static Gen<stretch::config::DsConfig> arbitrary() { return stretch::config::dsConfig(); }
};
}  // namespace rc

namespace stretch::config {
namespace {

RC_GTEST_PROP(ConfigPropertyTest, ToJsonRoundTrips, (const DsConfig& config)) {
  const std::string json = toJson(config);
  const ParsedConfig parsed = parseConfig(json, "toJson");
  RC_ASSERT(parsed.config == config);
  RC_ASSERT(parsed.warnings.empty());
  RC_ASSERT(toJson(parsed.config) == json);
}

RC_GTEST_PROP(ConfigPropertyTest, ResolvedBatchesSatisfyTheInvariant, ()) {
  const auto key = optionalOf(gen::weightedOneOf<std::int64_t>(
      {{6, gen::inRange<std::int64_t>(-2, 257)},
       {2, gen::element<std::int64_t>(512, 1024, 4096, 9792, 80640)},
       {1, gen::arbitrary<std::int64_t>()}}));
  std::int64_t worldSize =
      *gen::weightedOneOf<std::int64_t>({{6, gen::inRange<std::int64_t>(1, 129)},
                                         {1, gen::inRange<std::int64_t>(-2, 1)},
                                         {1, gen::arbitrary<std::int64_t>()}});
  BatchKeys keys{*key, *key, *key};
  if (*gen::arbitrary<bool>()) {
    // A consistent triple with some keys dropped: the rows of DeepSpeed's table that succeed.
    const std::int64_t mb = *gen::inRange<std::int64_t>(1, 65);
    const std::int64_t gas = *gen::inRange<std::int64_t>(1, 65);
    worldSize = *gen::inRange<std::int64_t>(1, 1025);
    const auto keep = [](std::int64_t v) {
      return *gen::arbitrary<bool>() ? std::optional(v) : std::nullopt;
    };
    keys = BatchKeys{keep(mb * gas * worldSize), keep(mb), keep(gas)};
  }
  RC_TAG(keys.trainBatchSize.has_value(), keys.microBatchPerGpu.has_value(),
         keys.gradientAccumulation.has_value());
  try {
    const BatchTriple t = resolveBatch(keys, worldSize);
    RC_CLASSIFY(true, "resolved");
    RC_ASSERT(t.trainBatchSize > 0);
    RC_ASSERT(t.microBatchPerGpu > 0);
    RC_ASSERT(t.gradientAccumulation > 0);
    __extension__ typedef __int128 Wide;
    RC_ASSERT(Wide{t.trainBatchSize} ==
              Wide{t.microBatchPerGpu} * t.gradientAccumulation * worldSize);
    // Given keys are never changed.
    RC_ASSERT(!keys.trainBatchSize || *keys.trainBatchSize == t.trainBatchSize);
    RC_ASSERT(!keys.microBatchPerGpu || *keys.microBatchPerGpu == t.microBatchPerGpu);
    RC_ASSERT(!keys.gradientAccumulation || *keys.gradientAccumulation == t.gradientAccumulation);
  } catch (const ConfigError&) {
    // Rejections are fine; anything else escapes and fails the property.
  }
}

RC_GTEST_PROP(ConfigPropertyTest, RandomTextThrowsOnlyStretchErrors, ()) {
  const std::string input = *gen::container<std::string>(jsonishChar());
  try {
    parseConfig(input, "random");
  } catch (const Error&) {
  }
}

RC_GTEST_PROP(ConfigPropertyTest, MutatedConfigsThrowOnlyStretchErrors, (const DsConfig& config)) {
  const auto edits = *gen::nonEmpty(gen::container<std::vector<std::tuple<int, std::size_t, char>>>(
      gen::tuple(gen::inRange(0, 4), gen::arbitrary<std::size_t>(), jsonishChar())));
  const std::string input = mutate(toJson(config), edits);
  try {
    const ParsedConfig parsed = parseConfig(input, "mutated");
    RC_CLASSIFY(true, "still parses");
    // Whatever parses must serialise and parse back to itself.
    RC_ASSERT(parseConfig(toJson(parsed.config)).config == parsed.config);
  } catch (const Error&) {
  }
}

}  // namespace
}  // namespace stretch::config
