#include "planner/plan_input.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "planner/example_job.hpp"  // generated from fixtures/plans/example.json
#include "runtime/common/error.hpp"
#include "sim/json_input.hpp"

namespace stretch::planner {

namespace {

using nlohmann::json;

// A shorter name for the many call sites below.
[[noreturn]] void bad(const std::string& path, const json& value, const std::string& expected) {
  sim::badValue(path, value, expected);
}

// Typed reads of the "plan" object; every key read is remembered so the rest become warnings.
class PlanReader {
 public:
  PlanReader(const json& object, std::vector<std::string>& warnings)
      : object_(object), warnings_(warnings) {
    if (!object_.is_object()) {
      bad("plan", object_, "a JSON object");
    }
  }

  const json* find(const std::string& key) {
    known_.insert(key);
    const auto it = object_.find(key);
    return it == object_.end() ? nullptr : &*it;
  }

  std::optional<double> number(const std::string& key, double lo, double hi, bool openLo,
                               const std::string& expected) {
    const json* v = find(key);
    if (v == nullptr) {
      return std::nullopt;
    }
    if (!v->is_number()) {
      bad("plan." + key, *v, expected);
    }
    const double x = v->get<double>();
    if (!std::isfinite(x) || x > hi || (openLo ? x <= lo : x < lo)) {
      bad("plan." + key, *v, expected);
    }
    return x;
  }

  std::optional<std::int64_t> integer(const std::string& key, std::int64_t lo, std::int64_t hi,
                                      const std::string& expected) {
    const json* v = find(key);
    if (v == nullptr) {
      return std::nullopt;
    }
    return integerValue(*v, "plan." + key, lo, hi, expected);
  }

  static std::int64_t integerValue(const json& v, const std::string& path, std::int64_t lo,
                                   std::int64_t hi, const std::string& expected) {
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi)) {
      bad(path, v, expected);
    }
    if (v.is_number_integer()) {
      const auto x = v.get<std::int64_t>();
      if (x >= lo && x <= hi) {
        return x;
      }
    } else if (v.is_number_float()) {
      const double d = v.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && d >= static_cast<double>(lo) &&
          d <= static_cast<double>(hi)) {
        return static_cast<std::int64_t>(d);
      }
    }
    bad(path, v, expected);
  }

  void finish() {
    for (const auto& [key, value] : object_.items()) {
      if (!known_.contains(key)) {
        warnings_.push_back(fmt::format("plan.{}: unknown key, ignored", key));
      }
    }
  }

 private:
  const json& object_;
  std::vector<std::string>& warnings_;
  std::set<std::string> known_;
};

std::vector<std::int64_t> microBatchList(const json& v, const std::string& path) {
  if (!v.is_array() || v.empty()) {
    bad(path, v, "a non-empty array of positive integers");
  }
  if (v.size() > config::kMaxMicroBatchCount) {
    bad(path, v, fmt::format("at most {} micro batch sizes", config::kMaxMicroBatchCount));
  }
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    out.push_back(PlanReader::integerValue(v[i], fmt::format("{}[{}]", path, i), 1,
                                           config::kMaxTrainBatchLimit, "a positive integer"));
  }
  return out;
}

PlanSettings parseSettings(const json& object, std::vector<std::string>& warnings) {
  PlanSettings s;
  PlanReader r(object, warnings);
  if (const json* v = r.find("objective"); v != nullptr) {
    const auto parsed = v->is_string() ? parseObjective(v->get<std::string>()) : std::nullopt;
    if (!parsed) {
      bad("plan.objective", *v, "\"time\", \"cost\" or \"ettr\"");
    }
    s.objective = *parsed;
  }
  s.pricePerGpuHour =
      r.number("price_per_gpu_hour", 0.0, 1e9, /*openLo=*/true, "a positive price per GPU-hour");
  s.seeds = r.integer("seeds", 0, kMaxSeeds,
                      fmt::format("an integer in [0, {}] (0: analytic estimates)", kMaxSeeds))
                .value_or(0);
  s.sweepSeeds = r.integer("sweep_seeds", 0, kMaxSeeds,
                           fmt::format("an integer in [0, {}] (0: automatic)", kMaxSeeds))
                     .value_or(0);
  s.threads = static_cast<int>(
      r.integer("threads", 0, 4096, "an integer in [0, 4096] (0: every hardware thread)")
          .value_or(0));
  if (const json* v = r.find("versions"); v != nullptr) {
    if (!v->is_array() || v->empty()) {
      bad("plan.versions", *v, "a non-empty array of \"0.1\", \"0.2\", \"exact\"");
    }
    s.versions.clear();
    for (std::size_t i = 0; i < v->size(); ++i) {
      const json& e = (*v)[i];
      std::string text = e.is_string() ? e.get<std::string>() : e.is_number() ? e.dump() : "";
      config::ElasticityVersion version{};
      if (text == "0.1") {
        version = config::ElasticityVersion::V0_1;
      } else if (text == "0.2") {
        version = config::ElasticityVersion::V0_2;
      } else if (text == "exact") {
        version = config::ElasticityVersion::Exact;
      } else {
        bad(fmt::format("plan.versions[{}]", i), e, "\"0.1\", \"0.2\" or \"exact\"");
      }
      if (std::find(s.versions.begin(), s.versions.end(), version) == s.versions.end()) {
        s.versions.push_back(version);
      }
    }
  }
  s.maxBatch = r.integer("max_batch", 1, config::kMaxTrainBatchLimit,
                         fmt::format("a positive integer <= {}", config::kMaxTrainBatchLimit));
  if (const json* v = r.find("micro_batch_sizes"); v != nullptr) {
    s.microBatches = microBatchList(*v, "plan.micro_batch_sizes");
  }
  if (const json* v = r.find("micro_batch_candidates"); v != nullptr) {
    if (!v->is_array()) {
      bad("plan.micro_batch_candidates", *v, "an array of micro batch lists");
    }
    for (std::size_t i = 0; i < v->size(); ++i) {
      s.microBatchCandidates.push_back(
          microBatchList((*v)[i], fmt::format("plan.micro_batch_candidates[{}]", i)));
    }
  }
  s.batchTolerance =
      r.number("batch_tolerance", 0.0, 0.5, /*openLo=*/false, "a fraction in [0, 0.5]")
          .value_or(s.batchTolerance);

  const json* range = r.find("world_sizes");
  const json* expected = r.find("expected_world_sizes");
  if (range != nullptr && expected != nullptr) {
    bad("plan.expected_world_sizes", *expected,
        "either plan.world_sizes or plan.expected_world_sizes, not both");
  }
  if (range != nullptr) {
    if (!range->is_object()) {
      bad("plan.world_sizes", *range, "an object {\"min_gpus\": a, \"max_gpus\": b}");
    }
    std::int64_t lo = 1;
    std::int64_t hi = 0;
    for (const auto& [key, value] : range->items()) {
      if (key == "min_gpus") {
        lo = PlanReader::integerValue(value, "plan.world_sizes.min_gpus", 1, 100'000'000,
                                      "a positive number of GPUs");
      } else if (key == "max_gpus") {
        hi = PlanReader::integerValue(value, "plan.world_sizes.max_gpus", 1, 100'000'000,
                                      "a positive number of GPUs");
      } else {
        warnings.push_back(fmt::format("plan.world_sizes.{}: unknown key, ignored", key));
      }
    }
    if (!range->contains("max_gpus")) {
      throw ConfigError(
          ErrorDetail{"plan.world_sizes.max_gpus", "missing", "the most GPUs the job may get"});
    }
    if (hi < lo) {
      throw ConfigError(ErrorDetail{"plan.world_sizes.max_gpus", std::to_string(hi),
                                    fmt::format("a number >= min_gpus ({})", lo)});
    }
    // Kept as the two ends; the planner expands the range over whole nodes.
    s.expectedSizes = {ExpectedSize{lo, 1.0}, ExpectedSize{hi, 1.0}};
    s.expectedFromRange = true;
  }
  if (expected != nullptr) {
    if (!expected->is_object() || expected->empty()) {
      bad("plan.expected_world_sizes", *expected,
          "an object mapping a GPU count to its weight, e.g. {\"512\": 0.7, \"504\": 0.3}");
    }
    double total = 0.0;
    for (const auto& [key, value] : expected->items()) {
      const std::string path = fmt::format("plan.expected_world_sizes.{}", key);
      char* end = nullptr;
      const long long gpus = std::strtoll(key.c_str(), &end, 10);
      if (key.empty() || end != key.c_str() + key.size() || gpus < 1 || gpus > 100'000'000) {
        throw ConfigError(ErrorDetail{path, "\"" + key + "\"", "a positive GPU count as the key"});
      }
      if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < 0.0) {
        bad(path, value, "a non-negative weight");
      }
      total += value.get<double>();
      s.expectedSizes.push_back(ExpectedSize{gpus, value.get<double>()});
    }
    if (!(total > 0.0)) {
      bad("plan.expected_world_sizes", *expected, "at least one positive weight");
    }
    std::sort(s.expectedSizes.begin(), s.expectedSizes.end(),
              [](const ExpectedSize& a, const ExpectedSize& b) { return a.gpus < b.gpus; });
  }

  if (const json* v = r.find("checkpoint_interval_minutes"); v != nullptr) {
    if (!v->is_object()) {
      bad("plan.checkpoint_interval_minutes", *v, "an object {\"min\": a, \"max\": b} in minutes");
    }
    for (const auto& [key, value] : v->items()) {
      const std::string path = "plan.checkpoint_interval_minutes." + key;
      if (key != "min" && key != "max") {
        warnings.push_back(path + ": unknown key, ignored");
        continue;
      }
      if (!value.is_number() || !std::isfinite(value.get<double>()) ||
          !(value.get<double>() > 0.0)) {
        bad(path, value, "a positive number of minutes");
      }
      (key == "min" ? s.intervalMinMinutes : s.intervalMaxMinutes) = value.get<double>();
    }
    if (s.intervalMinMinutes && s.intervalMaxMinutes &&
        *s.intervalMaxMinutes < *s.intervalMinMinutes) {
      throw ConfigError(ErrorDetail{"plan.checkpoint_interval_minutes.max",
                                    fmt::format("{}", *s.intervalMaxMinutes),
                                    fmt::format("a number >= min ({})", *s.intervalMinMinutes)});
    }
  }
  s.maxRows = r.integer("max_rows", 1, 1000, "an integer in [1, 1000]").value_or(s.maxRows);
  r.finish();
  return s;
}

std::string readText(const std::filesystem::path& path) {
  return sim::readTextFile(path, "job file");
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
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    throw ConfigError(fmt::format("job: not valid JSON: {}", e.what()));
  }
  if (!root.is_object()) {
    bad("job", root, "a JSON object (a scenario with an optional \"plan\" object)");
  }
  PlanInput input;
  json planObject = json::object();
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

PlanInput loadPlanInput(const std::filesystem::path& path, const sim::ScenarioOptions& options) {
  PlanInput input =
      parsePlanInput(readText(path), path.has_parent_path() ? path.parent_path() : ".", options);
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
