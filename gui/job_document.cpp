#include "gui/job_document.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "runtime/common/error.hpp"
#include "runtime/common/file_io.hpp"
#include "runtime/config/ds_config.hpp"
#include "sim/cluster.hpp"

namespace stretch::gui {

// Generated from fixtures/gui/example_job.json (gui/CMakeLists.txt).
extern const char* const kExampleJobJson;

namespace {

using nlohmann::json;

constexpr std::array<std::string_view, 3> kVersions = {"0.1", "0.2", "exact"};
constexpr std::array<std::string_view, 3> kObjectives = {"time", "cost", "ettr"};
constexpr std::array<std::string_view, 4> kFailureModels = {"none", "exponential", "weibull",
                                                            "trace"};

const std::array<FieldSpec, 25> kFields = {{
    {"elasticity.enabled",
     FieldTarget::Config,
     FieldKind::Flag,
     "Elastic",
     "elasticity.enabled: let the job run at any valid world size",
     "false",
     {}},
    {"elasticity.max_train_batch_size",
     FieldTarget::Config,
     FieldKind::Integer,
     "Max batch",
     "elasticity.max_train_batch_size: the largest global batch the solver may choose",
     "2000",
     {}},
    {"elasticity.micro_batch_sizes",
     FieldTarget::Config,
     FieldKind::IntegerList,
     "Micro batches",
     "elasticity.micro_batch_sizes: micro batches per GPU the job can run, e.g. 2, 4, 8",
     "2, 4, 6",
     {}},
    {"elasticity.min_gpus",
     FieldTarget::Config,
     FieldKind::Integer,
     "Min GPUs",
     "elasticity.min_gpus: smallest world size to consider",
     "1",
     {}},
    {"elasticity.max_gpus",
     FieldTarget::Config,
     FieldKind::Integer,
     "Max GPUs",
     "elasticity.max_gpus: largest world size to consider",
     "10000",
     {}},
    {"elasticity.num_gpus_per_node",
     FieldTarget::Config,
     FieldKind::Integer,
     "GPUs per node",
     "elasticity.num_gpus_per_node: v0.2 and exact keep whole nodes",
     "1",
     {}},
    {"elasticity.model_parallel_size",
     FieldTarget::Config,
     FieldKind::Integer,
     "Model parallel",
     "elasticity.model_parallel_size: GPUs per data-parallel rank (v0.2 and exact)",
     "1",
     {}},
    {"elasticity.version", FieldTarget::Config, FieldKind::Choice, "Version",
     "elasticity.version: DeepSpeed's solvers 0.1 and 0.2, or Stretch's exact search", "0.2",
     kVersions},
    {"elasticity.prefer_larger_batch",
     FieldTarget::Config,
     FieldKind::Flag,
     "Prefer larger batch",
     "elasticity.prefer_larger_batch: tie-break towards larger batches",
     "true",
     {}},
    {"cluster.preset",
     FieldTarget::Scenario,
     FieldKind::Preset,
     "Cluster preset",
     "cluster.preset: a preset of fixtures/clusters, or the scenario's own figures",
     "",
     {}},
    {"cluster.nodes",
     FieldTarget::Scenario,
     FieldKind::Integer,
     "Nodes",
     "cluster.nodes: nodes in the cluster",
     "",
     {}},
    {"failures.model", FieldTarget::Scenario, FieldKind::Choice, "Failure model",
     "failures.model: none, exponential (MTBF), weibull (MTBF and shape) or a trace file", "none",
     kFailureModels},
    {"failures.node_mtbf_hours",
     FieldTarget::Scenario,
     FieldKind::Number,
     "Node MTBF (h)",
     "failures.node_mtbf_hours: mean time between failures of one node",
     "",
     {}},
    {"failures.shape",
     FieldTarget::Scenario,
     FieldKind::Number,
     "Weibull shape",
     "failures.shape: < 1 clusters failures early, 1 is exponential, > 1 is wear-out",
     "1",
     {}},
    {"failures.trace_file",
     FieldTarget::Scenario,
     FieldKind::File,
     "Trace file",
     "failures.trace_file: CSV time_hours,node,cause,repair_hours or JSON events",
     "",
     {}},
    {"failures.repair_hours",
     FieldTarget::Scenario,
     FieldKind::Number,
     "Repair (h)",
     "failures.repair_hours: how long a failed node is away (empty: forever)",
     "",
     {}},
    {"job.checkpoint.interval_minutes",
     FieldTarget::Scenario,
     FieldKind::Number,
     "Checkpoint interval (min)",
     "job.checkpoint.interval_minutes: time between saves",
     "",
     {}},
    {"job.checkpoint.save_seconds",
     FieldTarget::Scenario,
     FieldKind::Number,
     "Checkpoint cost (s)",
     "job.checkpoint.save_seconds: training stalls this long per save",
     "0",
     {}},
    {"job.checkpoint.load_seconds",
     FieldTarget::Scenario,
     FieldKind::Number,
     "Checkpoint load (s)",
     "job.checkpoint.load_seconds: added to every resume",
     "0",
     {}},
    {"job.restart_overhead_seconds",
     FieldTarget::Scenario,
     FieldKind::Number,
     "Restart overhead (s)",
     "job.restart_overhead_seconds: rendezvous, process start and initialisation per start",
     "0",
     {}},
    {"job.total_samples",
     FieldTarget::Scenario,
     FieldKind::Integer,
     "Samples to train",
     "job.total_samples: the job ends when it has trained this many samples",
     "",
     {}},
    {"job.horizon_hours",
     FieldTarget::Scenario,
     FieldKind::Number,
     "Horizon (h)",
     "job.horizon_hours: the run stops here if it has not finished",
     "",
     {}},
    {"plan.objective", FieldTarget::Scenario, FieldKind::Choice, "Plan objective",
     "plan.objective: what the recommendation optimises: time to train, cost or ETTR", "time",
     kObjectives},
    {"plan.price_per_gpu_hour",
     FieldTarget::Scenario,
     FieldKind::Number,
     "Price per GPU-hour",
     "plan.price_per_gpu_hour: enables the cost column and the cost objective",
     "",
     {}},
    {"plan.seeds",
     FieldTarget::Scenario,
     FieldKind::Integer,
     "Plan seeds",
     "plan.seeds: 0 for the analytic scale table, N for N Monte Carlo replicas per world size",
     "0",
     {}},
}};

std::string trim(std::string_view text) {
  std::size_t b = 0;
  std::size_t e = text.size();
  while (b < e && std::isspace(static_cast<unsigned char>(text[b])) != 0) {
    ++b;
  }
  while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1])) != 0) {
    --e;
  }
  return std::string(text.substr(b, e - b));
}

// A token as JSON: an integer or a finite number when it reads fully as one, else the string.
json scalarOf(const std::string& token) {
  // A value the field shows as JSON (a cost given per node count: {"fixed_seconds": ..., "points":
  // [...]}) comes back as that JSON, so that editing around it never turns it into a string.
  if (!token.empty() && token.front() == '{') {
    json parsed = json::parse(token, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object()) {
      return parsed;
    }
  }
  std::int64_t i = 0;
  const char* end = token.data() + token.size();
  if (auto [p, ec] = std::from_chars(token.data(), end, i); ec == std::errc() && p == end) {
    return i;
  }
  double d = 0.0;
  if (auto [p, ec] = std::from_chars(token.data(), end, d);
      ec == std::errc() && p == end && std::isfinite(d)) {
    return d;
  }
  return token;
}

// Splits "a.b.c" into its keys.
std::vector<std::string> keysOf(std::string_view id) {
  std::vector<std::string> keys;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = id.find('.', start);
    keys.emplace_back(id.substr(start, dot == std::string_view::npos ? id.npos : dot - start));
    if (dot == std::string_view::npos) {
      return keys;
    }
    start = dot + 1;
  }
}

const json* lookup(const json& doc, std::string_view id) {
  const json* node = &doc;
  for (const std::string& key : keysOf(id)) {
    if (!node->is_object()) {
      return nullptr;
    }
    const auto it = node->find(key);
    if (it == node->end()) {
      return nullptr;
    }
    node = &*it;
  }
  return node;
}

void assign(json& doc, std::string_view id, std::optional<json> value) {
  const std::vector<std::string> keys = keysOf(id);
  json* node = &doc;
  for (std::size_t i = 0; i + 1 < keys.size(); ++i) {
    if (!node->is_object()) {
      *node = json::object();
    }
    if (!value && !node->contains(keys[i])) {
      return;  // nothing to remove
    }
    node = &(*node)[keys[i]];
  }
  if (!node->is_object()) {
    *node = json::object();
  }
  if (value) {
    (*node)[keys.back()] = std::move(*value);
  } else {
    node->erase(keys.back());
  }
}

// JSON text of a value as the form shows it: numbers as written by nlohmann, strings bare.
std::string displayText(const json& value) {
  if (value.is_string()) {
    return value.get<std::string>();
  }
  if (value.is_array()) {
    std::string out;
    for (const json& item : value) {
      out += (out.empty() ? "" : ", ") + displayText(item);
    }
    return out;
  }
  return value.dump();
}

void writeFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text << '\n';
  out.close();
  if (!out) {
    throw IoError(ErrorDetail{path.string(), "(not written)", "a writable file"});
  }
}

FieldError errorOf(const Error& e) {
  FieldError out;
  if (e.detail()) {
    out.path = e.detail()->path;
  }
  out.message = e.what();
  return out;
}

}  // namespace

std::span<const FieldSpec> fieldSpecs() {
  return kFields;
}

const FieldSpec* findField(std::string_view id) {
  for (const FieldSpec& f : kFields) {
    if (f.id == id) {
      return &f;
    }
  }
  return nullptr;
}

const FieldSpec* FieldError::field(FieldTarget target) const {
  const FieldSpec* best = nullptr;
  for (const FieldSpec& f : kFields) {
    if (f.target != target || path.rfind(f.id, 0) != 0) {
      continue;
    }
    const bool boundary =
        path.size() == f.id.size() || path[f.id.size()] == '.' || path[f.id.size()] == '[';
    if (boundary && (best == nullptr || f.id.size() > best->id.size())) {
      best = &f;
    }
  }
  return best;
}

json parseConfigJson(std::string_view text, std::string_view source) {
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/true);
  if (parsed.is_discarded()) {
    // Trailing commas (accepted by the config layer, not by nlohmann): take the config layer's
    // normalised form, or its error.
    const config::ParsedConfig normalised = config::parseConfig(text, source);
    parsed = json::parse(config::toJson(normalised.config));
  }
  if (!parsed.is_object()) {
    throw ConfigError(ErrorDetail{std::string(source), parsed.dump().substr(0, 40),
                                  "a JSON object (a DeepSpeed config)"});
  }
  return parsed;
}

JobDocument::JobDocument() {
  *this = fromScenarioText(kExampleJobJson, {}, "example_job.json");
}

JobDocument JobDocument::fromScenarioFile(const std::filesystem::path& path) {
  JobDocument doc = fromScenarioText(readFile(path), path.parent_path(), path.filename().string());
  doc.scenarioPath_ = path;
  if (!doc.scenario_.contains("name")) {
    doc.scenario_["name"] = path.stem().string();
  }
  return doc;
}

JobDocument JobDocument::fromScenarioText(std::string_view text,
                                          const std::filesystem::path& baseDir,
                                          std::string_view source) {
  JobDocument doc{std::nullopt};
  doc.baseDir_ = baseDir;
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    throw ConfigError(
        ErrorDetail{std::string(source), "(not a JSON object)", "a scenario JSON object"});
  }
  json& job = parsed["job"];
  if (!job.is_object()) {
    job = json::object();
  }
  if (job.contains("config_file") && job["config_file"].is_string()) {
    std::filesystem::path file = job["config_file"].get<std::string>();
    if (file.is_relative()) {
      file = baseDir / file;
    }
    doc.config_ = parseConfigJson(readFile(file), file.filename().string());
    doc.configPath_ = file;
    job.erase("config_file");
  } else if (job.contains("config")) {
    doc.config_ = job["config"];
    job.erase("config");
  }
  if (parsed.contains("cluster") && parsed["cluster"].is_object() &&
      !parsed["cluster"].contains("preset")) {
    doc.customCluster_ = parsed["cluster"];
  }
  doc.scenario_ = std::move(parsed);
  return doc;
}

JobDocument::JobDocument(std::nullopt_t) {}

void JobDocument::loadConfigFile(const std::filesystem::path& path) {
  setConfigText(readFile(path), path.filename().string());
  configPath_ = path;
}

void JobDocument::setConfigText(std::string_view text, std::string_view source) {
  config_ = parseConfigJson(text, source);
  configPath_.clear();
}

void JobDocument::saveScenario(const std::filesystem::path& path) {
  writeFile(path, scenarioText());
  scenarioPath_ = path;
  baseDir_ = path.parent_path();
}

void JobDocument::saveConfig(const std::filesystem::path& path) {
  writeFile(path, configText());
  configPath_ = path;
}

json& JobDocument::documentOf(FieldTarget target) {
  return target == FieldTarget::Config ? config_ : scenario_;
}

const json& JobDocument::documentOf(FieldTarget target) const {
  return target == FieldTarget::Config ? config_ : scenario_;
}

std::string JobDocument::fieldText(const FieldSpec& field) const {
  const json* value = lookup(documentOf(field.target), field.id);
  return value == nullptr ? std::string() : displayText(*value);
}

void JobDocument::setFieldText(const FieldSpec& field, std::string_view text) {
  json& doc = documentOf(field.target);
  const std::string t = trim(text);
  if (field.kind == FieldKind::Preset) {
    if (t.empty()) {
      // Back to the scenario's own figures (when it had some), keeping the node count.
      const json* nodes = lookup(scenario_, "cluster.nodes");
      json cluster = customCluster_.is_object() ? customCluster_ : json::object();
      if (nodes != nullptr) {
        cluster["nodes"] = *nodes;
      }
      scenario_["cluster"] = cluster;
    } else {
      // A preset replaces explicit figures (they would override it otherwise).
      const json* nodes = lookup(scenario_, "cluster.nodes");
      json cluster = {{"preset", t}};
      if (nodes != nullptr) {
        cluster["nodes"] = *nodes;
      }
      scenario_["cluster"] = cluster;
    }
    return;
  }
  if (t.empty()) {
    assign(doc, field.id, std::nullopt);
    return;
  }
  switch (field.kind) {
    case FieldKind::Flag:
      assign(doc, field.id, t == "true" ? json(true) : t == "false" ? json(false) : json(t));
      return;
    case FieldKind::IntegerList: {
      json list = json::array();
      std::string token;
      for (char c : t + ",") {
        if (c == ',' || std::isspace(static_cast<unsigned char>(c)) != 0) {
          if (!token.empty()) {
            list.push_back(scalarOf(token));
            token.clear();
          }
        } else {
          token += c;
        }
      }
      assign(doc, field.id, list);
      return;
    }
    case FieldKind::File:
      assign(doc, field.id, json(t));
      return;
    case FieldKind::Choice:
      // "exact", "none", "weibull" stay strings; the versions 0.1 / 0.2 become numbers.
      assign(doc, field.id, scalarOf(t));
      return;
    default:
      assign(doc, field.id, scalarOf(t));
      return;
  }
}

void JobDocument::writeText(const std::filesystem::path& path, const std::string& text) {
  writeFile(path, text);
}

std::filesystem::path JobDocument::presetDir() const {
  return sim::defaultPresetDir(baseDir_);
}

std::vector<std::string> JobDocument::presetNames() const {
  return sim::clusterPresetNames(presetDir());
}

json JobDocument::assembledScenario() const {
  json s = scenario_;
  s["job"]["config"] = config_;
  return s;
}

std::string JobDocument::scenarioText() const {
  return assembledScenario().dump(2);
}

std::string JobDocument::configText() const {
  return config_.dump(2);
}

std::string JobDocument::name() const {
  if (const json* n = lookup(scenario_, "name"); n != nullptr && n->is_string()) {
    return n->get<std::string>();
  }
  return scenarioPath_.empty() ? std::string("untitled") : scenarioPath_.stem().string();
}

ElasticityView JobDocument::evaluateElasticity() const {
  ElasticityView view;
  try {
    const config::ParsedConfig parsed = config::parseConfig(config_.dump(), "config");
    view.warnings = parsed.warnings;
    const config::ElasticityConfig& e = parsed.config.elasticity;
    view.enabled = e.enabled;
    view.version = e.version;
    view.modelParallelSize = e.version == config::ElasticityVersion::V0_1 ? 1 : e.modelParallelSize;
    if (!e.enabled) {
      return view;
    }
    elasticity::SolveRequest request;
    if (e.version == config::ElasticityVersion::V0_2) {
      // v0.2 sizes the batch for the job's current world size: the cluster's GPUs.
      try {
        json cluster = scenario_.contains("cluster") ? scenario_.at("cluster") : json::object();
        view.currentGpus = sim::parseCluster(cluster, presetDir()).gpus();
      } catch (const Error& clusterError) {
        FieldError err = errorOf(clusterError);
        err.message = fmt::format(
            "version 0.2 sizes its batch for the cluster's GPU count, and "
            "the cluster is invalid: {}",
            clusterError.what());
        view.error = err;
        return view;
      }
      request.envWorldSize = std::to_string(view.currentGpus);
    }
    const elasticity::ElasticPlan plan = elasticity::computeElasticConfig(e, request);
    view.finalBatchSize = plan.finalBatchSize;
    view.rows = elasticity::worldSizeTable(e, plan);
  } catch (const Error& error) {
    FieldError err = errorOf(error);
    // The config layer names the key inside the config; the form's ids are the same paths.
    view.error = err;
  }
  return view;
}

std::int64_t JobDocument::exactSearchWidth() const {
  try {
    const config::ParsedConfig parsed = config::parseConfig(config_.dump(), "config");
    const config::ElasticityConfig& e = parsed.config.elasticity;
    if (!e.enabled || e.version != config::ElasticityVersion::Exact) {
      return 0;
    }
    const elasticity::BatchRange range = elasticity::exactSearchRange(e);
    return range.hi >= range.lo ? range.hi - range.lo + 1 : 0;
  } catch (const Error&) {
    return 0;
  }
}

ScenarioCheck JobDocument::checkScenario() const {
  ScenarioCheck check;
  try {
    check.input = planner::parsePlanInput(assembledScenario().dump(), baseDir_);
    if (!scenario_.contains("name")) {
      check.input->scenario.name = name();
      check.input->name = name();
    }
  } catch (const Error& error) {
    check.error = errorOf(error);
  } catch (const std::exception& error) {
    check.error = FieldError{"", error.what()};
  }
  return check;
}

}  // namespace stretch::gui
