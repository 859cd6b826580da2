// Replays DeepSpeed's own outputs (fixtures/elasticity/*.json, produced by DeepSpeed's code, see
// fixtures/elasticity/README.md) through the config parser and the solver.
//
// Every case must match DeepSpeed exactly - final batch, valid sizes, micro batch and error class -
// unless it is listed in kDeviations, where DeepSpeed crashes or answers something unusable. Each
// deviation says what Stretch does instead and is checked; docs/compatibility.md lists them all.
// A case that starts to differ without an entry fails, and so does an entry that no longer applies.

#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "runtime/common/error.hpp"
#include "runtime/config/ds_config.hpp"
#include "runtime/elasticity/solver.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::elasticity {
namespace {

using nlohmann::json;

enum class Deviation {
  // DeepSpeed returns an empty or None valid list, batch 0, a batch above the cap, or crashes
  // (ZeroDivisionError, TypeError, ...): Stretch throws a typed elasticity error.
  TypedError,
  // DeepSpeed's error class is not an elasticity error (ValueError, NotImplementedError, ...):
  // Stretch throws ElasticityConfigError for the same input.
  ConfigErrorClass,
  // Stretch's config layer is stricter (bools, floats or strings where DeepSpeed's duck typing
  // accepts them): ElasticityConfigError / ConfigError instead of an answer.
  StricterTypes,
  // v0.2 sizes the micro batch from the data-parallel size, not all GPUs (DeepSpeed PR #8395):
  // same batch and valid sizes, a micro batch that divides the per-rank batch.
  DataParallelMicroBatch,
  // v0.2 with model parallelism: world_size counts GPUs, and data-parallel size = GPUs / mp.
  // DeepSpeed uses the same number both ways. Stretch's answer must be self-consistent.
  WorldSizeCountsGpus,
  // v0.2 with max_gpus below one node: DeepSpeed drops the bound and returns sizes above
  // max_gpus; Stretch rejects the config (ElasticityConfigError).
  BoundEnforced,
  // return_microbatch without a world size on v0.1 (issue #8156): WORLD_SIZE is read (PR #8286).
  WorldSizeFromEnvironment,
};

const std::map<std::string, Deviation, std::less<>>& deviations();

struct Outcome {
  std::optional<ElasticPlan> plan;
  std::string errorKind;
  std::string message;
};

Outcome run(const json& c) {
  Outcome out;
  try {
    const config::ParsedConfig parsed =
        config::parseConfig(c.at("config").dump(), c.value("name", "case"));
    SolveRequest request;
    request.worldSize = c.value("world_size", std::int64_t{0});
    request.returnMicroBatch = c.value("return_microbatch", false);
    if (c.contains("env_WORLD_SIZE")) {
      request.envWorldSize = c.at("env_WORLD_SIZE").get<std::string>();
    }
    if (c.contains("target_deepspeed_version")) {
      request.targetDeepspeedVersion = c.at("target_deepspeed_version").get<std::string>();
    }
    out.plan = computeElasticConfig(parsed.config.elasticity, request);
  } catch (const Error& e) {
    out.errorKind = e.kind();
    out.message = e.what();
  }
  return out;
}

bool isElasticityKind(const std::string& kind) {
  return kind == "ElasticityError" || kind == "ElasticityConfigError" ||
         kind == "ElasticityIncompatibleWorldSize";
}

// The DeepSpeed answer of a case, normalised over the two fixture formats.
struct Expected {
  std::optional<std::string> error;
  std::int64_t batch = 0;
  std::optional<std::vector<std::int64_t>> valid;  // nullopt: DeepSpeed returned None
  bool hasMicro = false;
  std::optional<std::int64_t> micro;
};

Expected expectedOf(const json& c) {
  const json& e = c.at("expected");
  Expected x;
  if (e.contains("error") || e.contains("expected_error")) {
    x.error = e.contains("error") ? e.at("error") : e.at("expected_error");
    return x;
  }
  x.batch = e.at("final_batch_size");
  if (!e.at("valid_gpus").is_null())
    x.valid = e.at("valid_gpus").get<std::vector<std::int64_t>>();
  if (e.contains("micro_batch")) {
    x.hasMicro = true;
    if (!e.at("micro_batch").is_null())
      x.micro = e.at("micro_batch").get<std::int64_t>();
  }
  return x;
}

bool deepspeedAnswerIsUnusable(const json& c, const Expected& x) {
  const json& el = c.at("config").value("elasticity", json::object());
  const auto cap = el.value("max_train_batch_size", json());
  const bool batchAboveCap = cap.is_number_integer() && x.batch > cap.get<std::int64_t>();
  return !x.valid || x.valid->empty() || x.batch <= 0 || batchAboveCap ||
         std::any_of(x.valid->begin(), x.valid->end(), [](std::int64_t v) { return v <= 0; });
}

void checkSelfConsistent(const std::string& name, const ElasticPlan& plan) {
  for (std::int64_t v : plan.validWorldSizes) {
    EXPECT_EQ(plan.finalBatchSize % v, 0) << name;
  }
  if (plan.microBatch) {
    ASSERT_GT(plan.resolvedWorldSize, 0) << name;
    EXPECT_EQ((plan.finalBatchSize / plan.resolvedWorldSize) % *plan.microBatch, 0) << name;
  }
}

void checkCase(const json& c) {
  const std::string name = c.at("name");
  SCOPED_TRACE(name);
  const Expected x = expectedOf(c);
  const Outcome ours = run(c);
  const auto dev = deviations().find(name);

  if (dev == deviations().end()) {
    // Must be identical to DeepSpeed.
    if (x.error) {
      EXPECT_EQ(ours.errorKind, *x.error) << (ours.plan ? "Stretch answered" : ours.message);
      return;
    }
    ASSERT_TRUE(ours.plan.has_value()) << ours.errorKind << ": " << ours.message;
    EXPECT_FALSE(deepspeedAnswerIsUnusable(c, x)) << "unusable DeepSpeed answer needs an entry";
    EXPECT_EQ(ours.plan->finalBatchSize, x.batch);
    EXPECT_EQ(ours.plan->validWorldSizes, x.valid.value_or(std::vector<std::int64_t>{}));
    if (x.hasMicro) {
      EXPECT_EQ(ours.plan->microBatch, x.micro);
    }
    return;
  }

  switch (dev->second) {
    case Deviation::TypedError:
      EXPECT_TRUE(x.error || deepspeedAnswerIsUnusable(c, x))
          << "DeepSpeed's answer is fine: remove the deviation";
      EXPECT_TRUE(isElasticityKind(ours.errorKind)) << "got " << ours.errorKind;
      EXPECT_NE(x.error, ours.errorKind) << "same as DeepSpeed: remove the deviation";
      break;
    case Deviation::BoundEnforced: {
      ASSERT_FALSE(x.error.has_value());
      const json& el = c.at("config").at("elasticity");
      const std::int64_t mp = el.value("model_parallel_size", 1);
      const std::int64_t maxGpus = el.value("max_gpus", 10000);
      EXPECT_TRUE(std::any_of(x.valid->begin(), x.valid->end(), [&](std::int64_t dp) {
        return dp * mp > maxGpus;
      })) << "DeepSpeed respected max_gpus: remove the deviation";
      EXPECT_EQ(ours.errorKind, "ElasticityConfigError") << ours.message;
      break;
    }
    case Deviation::ConfigErrorClass:
      ASSERT_TRUE(x.error.has_value());
      EXPECT_FALSE(isElasticityKind(*x.error));
      EXPECT_EQ(ours.errorKind, "ElasticityConfigError") << ours.message;
      break;
    case Deviation::StricterTypes:
      EXPECT_TRUE(ours.errorKind == "ElasticityConfigError" || ours.errorKind == "ConfigError")
          << "got " << ours.errorKind;
      break;
    case Deviation::DataParallelMicroBatch:
      ASSERT_FALSE(x.error.has_value());
      ASSERT_TRUE(ours.plan.has_value()) << ours.message;
      EXPECT_EQ(ours.plan->finalBatchSize, x.batch);
      EXPECT_EQ(ours.plan->validWorldSizes, x.valid.value_or(std::vector<std::int64_t>{}));
      ASSERT_TRUE(ours.plan->microBatch.has_value());
      EXPECT_NE(ours.plan->microBatch, x.micro) << "same as DeepSpeed: remove the deviation";
      checkSelfConsistent(name, *ours.plan);
      break;
    case Deviation::WorldSizeCountsGpus:
      if (ours.plan) {
        checkSelfConsistent(name, *ours.plan);
        EXPECT_TRUE(std::binary_search(ours.plan->validWorldSizes.begin(),
                                       ours.plan->validWorldSizes.end(),
                                       ours.plan->resolvedWorldSize));
      } else {
        EXPECT_TRUE(isElasticityKind(ours.errorKind)) << ours.errorKind;
      }
      break;
    case Deviation::WorldSizeFromEnvironment:
      EXPECT_EQ(x.error, "ZeroDivisionError");
      EXPECT_TRUE(isElasticityKind(ours.errorKind)) << "got " << ours.errorKind;
      break;
  }
}

void replay(const std::string& file, const char* key) {
  const json doc = json::parse(test::readFile(test::fixturePath(file)));
  std::size_t n = 0;
  for (const json& c : doc.at(key)) {
    checkCase(c);
    ++n;
  }
  EXPECT_GT(n, 0u);
}

TEST(DeepSpeedVectors, UnitTestCasesFromDeepSpeed) {
  replay("elasticity/deepspeed_cases.json", "compute_elastic_config_cases");
}

TEST(DeepSpeedVectors, GeneratedVectors) {
  replay("elasticity/deepspeed_vectors.json", "cases");
}

TEST(DeepSpeedVectors, EveryDeviationNamesAnExistingCase) {
  std::set<std::string> names;
  const std::vector<std::pair<std::string, std::string>> files = {
      {"elasticity/deepspeed_cases.json", "compute_elastic_config_cases"},
      {"elasticity/deepspeed_vectors.json", "cases"}};
  for (const auto& [file, key] : files) {
    const json doc = json::parse(test::readFile(test::fixturePath(file)));
    for (const json& c : doc.at(key)) {
      names.insert(c.at("name").get<std::string>());
    }
  }
  ASSERT_GT(names.size(), 100u);
  for (const auto& [name, d] : deviations()) {
    EXPECT_TRUE(names.count(name)) << "stale deviation entry: " << name;
  }
}

// Filled in from the vectors; every entry is a DeepSpeed bug or quirk listed in
// docs/compatibility.md.
const std::map<std::string, Deviation, std::less<>>& deviations() {
  static const std::map<std::string, Deviation, std::less<>> kDeviations = {
#include "tests/runtime/elasticity/deepspeed_deviations.inc"
  };
  return kDeviations;
}

}  // namespace
}  // namespace stretch::elasticity
