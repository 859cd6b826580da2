#include "planner/plan_input.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "planner/example_job.hpp"  // generated from fixtures/plans/example.json
#include "runtime/common/error.hpp"
#include "runtime/common/file_io.hpp"
#include "runtime/config/json_reader.hpp"

namespace stretch::planner {

namespace {

using namespace config::json;  // the JSON reader's rules and errors (json_reader.hpp)

std::vector<std::int64_t> microBatchList(const ObjectReader& owner, const Json& v,
                                         const std::string& path) {
  if (!v.is_array() || v.empty()) {
    owner.failValue(path, v, "a non-empty array of positive integers");
  }
  if (v.size() > config::kMaxMicroBatchCount) {
    owner.failValue(path, v,
                    fmt::format("at most {} micro batch sizes", config::kMaxMicroBatchCount));
  }
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    out.push_back(readIntElement(owner, v[i], indexPath(path, i),
                                 IntRule{1, config::kMaxTrainBatchLimit, "a positive integer",
                                         /*allowIntegralFloat=*/true}));
  }
  return out;
}

std::vector<config::ElasticityVersion> readVersions(const ObjectReader& r, const Json& v) {
  if (!v.is_array() || v.empty()) {
    r.fail("versions", "a non-empty array of \"0.1\", \"0.2\", \"exact\"");
  }
  std::vector<config::ElasticityVersion> versions;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const Json& e = v[i];
    const std::string text = e.is_string() ? e.get<std::string>() : e.is_number() ? e.dump() : "";
    config::ElasticityVersion version{};
    if (text == "0.1") {
      version = config::ElasticityVersion::V0_1;
    } else if (text == "0.2") {
      version = config::ElasticityVersion::V0_2;
    } else if (text == "exact") {
      version = config::ElasticityVersion::Exact;
    } else {
      r.failValue(indexPath(r.childPath("versions"), i), e, "\"0.1\", \"0.2\" or \"exact\"");
    }
    if (std::find(versions.begin(), versions.end(), version) == versions.end()) {
      versions.push_back(version);
    }
  }
  return versions;
}

// "world_sizes": {"min_gpus": a, "max_gpus": b}, kept as the two ends; the planner expands the
// range over whole nodes.
std::vector<ExpectedSize> readRange(const ObjectReader& range, std::vector<std::string>& warnings) {
  const IntRule gpus{1, 100'000'000, "a positive number of GPUs", /*allowIntegralFloat=*/true};
  const std::int64_t lo = range.readInt("min_gpus", gpus).value_or(1);
  const auto hi = range.readInt("max_gpus", gpus);
  if (!hi) {
    range.fail("max_gpus", "the most GPUs the job may get");
  }
  if (*hi < lo) {
    range.fail("max_gpus", fmt::format("a number >= min_gpus ({})", lo));
  }
  range.warnUnread(warnings);
  return {ExpectedSize{lo, 1.0}, ExpectedSize{*hi, 1.0}};
}

// "expected_world_sizes": {"512": 0.7, "504": 0.3}, sorted by GPU count.
std::vector<ExpectedSize> readDistribution(const ObjectReader& r, const Json& v) {
  if (!v.is_object() || v.empty()) {
    r.fail("expected_world_sizes",
           "an object mapping a GPU count to its weight, e.g. {\"512\": 0.7, \"504\": 0.3}");
  }
  const ObjectReader sizes(v, r.childPath("expected_world_sizes"));
  std::vector<ExpectedSize> out;
  double total = 0.0;
  for (const auto& [key, value] : v.items()) {
    char* end = nullptr;
    const long long gpus = std::strtoll(key.c_str(), &end, 10);
    if (key.empty() || end != key.c_str() + key.size() || gpus < 1 || gpus > 100'000'000) {
      sizes.failAs(key, "\"" + key + "\"", "a positive GPU count as the key");
    }
    const double weight = *sizes.readNumber(key, NumberRule{0.0, false, "a non-negative weight"});
    total += weight;
    out.push_back(ExpectedSize{gpus, weight});
  }
  if (!(total > 0.0)) {
    r.fail("expected_world_sizes", "at least one positive weight");
  }
  std::sort(out.begin(), out.end(),
            [](const ExpectedSize& a, const ExpectedSize& b) { return a.gpus < b.gpus; });
  return out;
}

PlanSettings parseSettings(const Json& object, std::vector<std::string>& warnings) {
  PlanSettings s;
  const ObjectReader r(object, "plan");
  if (const Json* v = r.find("objective"); v != nullptr) {
    const auto parsed = v->is_string() ? parseObjective(v->get<std::string>()) : std::nullopt;
    if (!parsed) {
      r.fail("objective", "\"time\", \"cost\" or \"ettr\"");
    }
    s.objective = *parsed;
  }
  s.pricePerGpuHour = r.readNumber("price_per_gpu_hour",
                                   NumberRule{0.0, true, "a positive price per GPU-hour", 1e9});
  const std::string seedsExpected =
      fmt::format("an integer in [0, {}] (0: analytic estimates)", kMaxSeeds);
  s.seeds = r.readInt("seeds", IntRule{0, kMaxSeeds, seedsExpected, /*allowIntegralFloat=*/true})
                .value_or(0);
  const std::string sweepExpected = fmt::format("an integer in [0, {}] (0: automatic)", kMaxSeeds);
  s.sweepSeeds =
      r.readInt("sweep_seeds", IntRule{0, kMaxSeeds, sweepExpected, /*allowIntegralFloat=*/true})
          .value_or(0);
  s.threads = static_cast<int>(
      r.readInt("threads", IntRule{0, 4096, "an integer in [0, 4096] (0: every hardware thread)",
                                   /*allowIntegralFloat=*/true})
          .value_or(0));
  if (const Json* v = r.find("versions"); v != nullptr) {
    s.versions = readVersions(r, *v);
  }
  const std::string maxBatchExpected =
      fmt::format("a positive integer <= {}", config::kMaxTrainBatchLimit);
  s.maxBatch = r.readInt("max_batch", IntRule{1, config::kMaxTrainBatchLimit, maxBatchExpected,
                                              /*allowIntegralFloat=*/true});
  if (const Json* v = r.find("micro_batch_sizes"); v != nullptr) {
    s.microBatches = microBatchList(r, *v, r.childPath("micro_batch_sizes"));
  }
  if (const Json* v = r.find("micro_batch_candidates"); v != nullptr) {
    if (!v->is_array()) {
      r.fail("micro_batch_candidates", "an array of micro batch lists");
    }
    for (std::size_t i = 0; i < v->size(); ++i) {
      s.microBatchCandidates.push_back(
          microBatchList(r, (*v)[i], indexPath(r.childPath("micro_batch_candidates"), i)));
    }
  }
  s.batchTolerance =
      r.readNumber("batch_tolerance", NumberRule{0.0, false, "a fraction in [0, 0.5]", 0.5})
          .value_or(s.batchTolerance);

  if (r.has("world_sizes") && r.has("expected_world_sizes")) {
    r.fail("expected_world_sizes",
           "either plan.world_sizes or plan.expected_world_sizes, not both");
  }
  if (const auto range =
          r.readObject("world_sizes", "an object {\"min_gpus\": a, \"max_gpus\": b}")) {
    s.expectedSizes = readRange(*range, warnings);
    s.expectedFromRange = true;
  }
  if (const Json* v = r.find("expected_world_sizes"); v != nullptr) {
    s.expectedSizes = readDistribution(r, *v);
  }

  if (const auto interval = r.readObject("checkpoint_interval_minutes",
                                         "an object {\"min\": a, \"max\": b} in minutes")) {
    const NumberRule minutes{0.0, true, "a positive number of minutes"};
    s.intervalMinMinutes = interval->readNumber("min", minutes);
    s.intervalMaxMinutes = interval->readNumber("max", minutes);
    if (s.intervalMinMinutes && s.intervalMaxMinutes &&
        *s.intervalMaxMinutes < *s.intervalMinMinutes) {
      interval->fail("max", fmt::format("a number >= min ({})", *s.intervalMinMinutes));
    }
    interval->warnUnread(warnings);
  }
  s.maxRows = r.readInt("max_rows",
                        IntRule{1, 1000, "an integer in [1, 1000]", /*allowIntegralFloat=*/true})
                  .value_or(s.maxRows);
  r.warnUnread(warnings);
  return s;
}

// A job file's text; source names it in syntax errors.
PlanInput parseJob(std::string_view text, std::string_view source,
                   const std::filesystem::path& baseDir, const sim::ScenarioOptions& options) {
  Json root = config::json::parseJson(text, source);
  if (!root.is_object()) {
    config::json::throwValue("job", root,
                             "a JSON object (a scenario with an optional \"plan\" object)");
  }
  PlanInput input;
  Json planObject = Json::object();
  if (const auto it = root.find("plan"); it != root.end()) {
    planObject = *it;
    root.erase(it);
  }
  if (const auto it = root.find("description"); it != root.end() && it->is_string()) {
    input.description = it->get<std::string>();
  }
  input.scenario = sim::parseScenario(root, baseDir, options);
  input.name = input.scenario.name;
  input.warnings = input.scenario.warnings;
  input.settings = parseSettings(planObject, input.warnings);
  return input;
}

}  // namespace

std::string_view toString(Objective objective) noexcept {
  switch (objective) {
    case Objective::Time:
      return "time";
    case Objective::Cost:
      return "cost";
    case Objective::Ettr:
      return "ettr";
  }
  return "?";
}

std::optional<Objective> parseObjective(std::string_view text) noexcept {
  if (text == "time") {
    return Objective::Time;
  }
  if (text == "cost") {
    return Objective::Cost;
  }
  if (text == "ettr") {
    return Objective::Ettr;
  }
  return std::nullopt;
}

PlanInput parsePlanInput(std::string_view text, const std::filesystem::path& baseDir,
                         const sim::ScenarioOptions& options) {
  return parseJob(text, "job", baseDir, options);
}

PlanInput loadPlanInput(const std::filesystem::path& path, const sim::ScenarioOptions& options) {
  PlanInput input = parseJob(readFile(path, "job file"), path.string(),
                             path.has_parent_path() ? path.parent_path() : ".", options);
  if (input.name == "scenario") {
    input.name = path.stem().string();
    input.scenario.name = input.name;
  }
  return input;
}

std::string_view bundledExampleText() noexcept {
  return kBundledExampleJob;
}

PlanInput bundledExample() {
  PlanInput input = parsePlanInput(bundledExampleText(), ".");
  if (input.name == "scenario") {
    input.name = "example";
    input.scenario.name = "example";
  }
  return input;
}

}  // namespace stretch::planner
