// libFuzzer target for the config parser and the solver entry point.
//
// Input: arbitrary bytes taken as a DeepSpeed config. Oracles, beyond "no crash, no hang, no leak,
// no undefined behaviour" (ASan + UBSan):
//  * only stretch::Error may escape the parser and the solver;
//  * a config that parses survives a round trip: parseConfig(toJson(c)) == c;
//  * a plan is sound: every valid size divides the batch, the batch is within the cap.
// The exact solver's cost is linear in its search range by design (checked by unit tests), so
// exact configs with large ranges are skipped to keep each input fast.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "runtime/common/error.hpp"
#include "runtime/config/ds_config.hpp"
#include "runtime/elasticity/solver.hpp"

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz oracle failed: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace stretch;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  config::ParsedConfig parsed;
  try {
    parsed = config::parseConfig(text, "<fuzz>");
  } catch (const Error&) {
    return 0;
  }
  try {
    if (!(config::parseConfig(config::toJson(parsed.config), "<round trip>").config ==
          parsed.config)) {
      fail("round trip changed the config");
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    fail("serialised config does not parse");
  }

  const config::ElasticityConfig& c = parsed.config.elasticity;
  if (c.version == config::ElasticityVersion::Exact && c.maxTrainBatchSize > 2'000'000 &&
      !c.targetBatchSize) {
    return 0;
  }
  // The world size comes from the input too, so membership and v0.2 fallbacks are explored.
  elasticity::SolveRequest request;
  request.worldSize = size > 0 ? data[size - 1] % 80 : 0;
  request.returnMicroBatch = size > 1 && (data[size - 2] & 1) != 0;
  request.envWorldSize = std::to_string(size % 64 + 1);
  try {
    const elasticity::ElasticPlan plan = elasticity::computeElasticConfig(c, request);
    if (plan.finalBatchSize < 1 || plan.finalBatchSize > c.maxTrainBatchSize) {
      fail("batch outside [1, max_train_batch_size]");
    }
    for (std::int64_t v : plan.validWorldSizes) {
      if (v < 1 || plan.finalBatchSize % v != 0)
        fail("valid size does not divide the batch");
    }
    if (plan.microBatch &&
        (plan.resolvedWorldSize < 1 ||
         (plan.finalBatchSize / plan.resolvedWorldSize) % *plan.microBatch != 0)) {
      fail("micro batch does not divide the per-rank batch");
    }
  } catch (const Error&) {
  }
  return 0;
}
