#include "sim/scenario.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/common/error.hpp"
#include "sim/json_input.hpp"

#ifndef STRETCH_SIM_SOURCE_DIR
#define STRETCH_SIM_SOURCE_DIR "."
#endif

namespace stretch::sim {

namespace {

using nlohmann::json;

// Shorter names for the many call sites below.
[[noreturn]] void bad(const std::string& path, const json& value, const std::string& expected) {
  badValue(path, value, expected);
}
std::string show(const json& value) {
  return showJson(value);
}

[[noreturn]] void badText(const std::string& path, const std::string& value,
                          const std::string& expected) {
  throw ConfigError(ErrorDetail{path, value, expected});
}

std::string join(const std::string& prefix, std::string_view key) {
  return prefix.empty() ? std::string(key) : prefix + "." + std::string(key);
}

// Walks one JSON object: typed getters that throw ConfigError naming the path, and a record of
// the keys read so that the rest become "unknown key" warnings.
class ObjectReader {
 public:
  ObjectReader(const json& object, std::string path, std::vector<std::string>& warnings)
      : object_(object), path_(std::move(path)), warnings_(warnings) {
    if (!object_.is_object()) {
      bad(path_.empty() ? "scenario" : path_, object_, "a JSON object");
    }
  }
  ObjectReader(const ObjectReader&) = delete;
  ObjectReader& operator=(const ObjectReader&) = delete;
  ~ObjectReader() = default;

  // Reports the keys never looked at. Call once when done.
  void finish() {
    for (const auto& [key, value] : object_.items()) {
      if (!known_.contains(key)) {
        warnings_.push_back(fmt::format("{}: unknown key, ignored", join(path_, key)));
      }
    }
  }

  bool has(std::string_view key) {
    known_.insert(std::string(key));
    return object_.contains(std::string(key));
  }
  const json* find(std::string_view key) {
    known_.insert(std::string(key));
    const auto it = object_.find(std::string(key));
    return it == object_.end() ? nullptr : &*it;
  }
  // Marks a key as known without reading it (read by someone else).
  void accept(std::string_view key) { known_.insert(std::string(key)); }
  std::string pathOf(std::string_view key) const { return join(path_, key); }
  const std::string& path() const { return path_; }

  std::optional<double> number(std::string_view key) {
    const json* v = find(key);
    if (v == nullptr) {
      return std::nullopt;
    }
    if (!v->is_number()) {
      bad(pathOf(key), *v, "a number");
    }
    const double x = v->get<double>();
    if (!std::isfinite(x)) {
      bad(pathOf(key), *v, "a finite number");
    }
    return x;
  }
  // A number > 0 (positive) or >= 0.
  std::optional<double> positive(std::string_view key, const std::string& unit) {
    const auto x = number(key);
    if (x && !(*x > 0.0)) {
      bad(pathOf(key), *find(key), fmt::format("a positive number of {}", unit));
    }
    return x;
  }
  std::optional<double> nonNegative(std::string_view key, const std::string& unit) {
    const auto x = number(key);
    if (x && !(*x >= 0.0)) {
      bad(pathOf(key), *find(key), fmt::format("a non-negative number of {}", unit));
    }
    return x;
  }
  std::optional<std::int64_t> integer(std::string_view key, std::int64_t min,
                                      const std::string& expected) {
    const json* v = find(key);
    if (v == nullptr) {
      return std::nullopt;
    }
    if (v->is_number_integer()) {
      const auto x = v->get<std::int64_t>();
      if (v->is_number_unsigned() && v->get<std::uint64_t>() > std::uint64_t{INT64_MAX}) {
        bad(pathOf(key), *v, expected);
      }
      if (x >= min) {
        return x;
      }
    } else if (v->is_number_float()) {
      const double d = v->get<double>();
      if (std::isfinite(d) && d == std::floor(d) && d >= static_cast<double>(min) && d < 9.2e18) {
        return static_cast<std::int64_t>(d);
      }
    }
    bad(pathOf(key), *v, expected);
  }
  std::optional<std::string> string(std::string_view key) {
    const json* v = find(key);
    if (v == nullptr) {
      return std::nullopt;
    }
    if (!v->is_string()) {
      bad(pathOf(key), *v, "a string");
    }
    return v->get<std::string>();
  }
  std::optional<bool> boolean(std::string_view key) {
    const json* v = find(key);
    if (v == nullptr) {
      return std::nullopt;
    }
    if (!v->is_boolean()) {
      bad(pathOf(key), *v, "true or false");
    }
    return v->get<bool>();
  }

 private:
  const json& object_;
  std::string path_;
  std::vector<std::string>& warnings_;
  std::set<std::string> known_;
};

std::string readText(const std::filesystem::path& path) {
  return sim::readTextFile(path, "file");
}

json parseJsonText(std::string_view text, const std::string& source) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    throw ConfigError(fmt::format("{}: not valid JSON: {}", source, e.what()));
  }
}

std::filesystem::path resolve(const std::filesystem::path& baseDir, const std::string& file) {
  std::filesystem::path p(file);
  return p.is_absolute() ? p : baseDir / p;
}

std::vector<FailureCause> parseCauses(const json& list, const std::string& path,
                                      std::vector<std::string>& warnings) {
  if (!list.is_array() || list.empty()) {
    bad(path, list, "a non-empty array of causes");
  }
  std::vector<FailureCause> causes;
  std::set<std::string> names;
  double total = 0.0;
  for (std::size_t i = 0; i < list.size(); ++i) {
    ObjectReader r(list[i], fmt::format("{}[{}]", path, i), warnings);
    FailureCause c;
    const auto name = r.string("name");
    if (!name || name->empty()) {
      badText(r.pathOf("name"), name ? "\"\"" : "missing", "the cause's name");
    }
    c.name = *name;
    if (!names.insert(c.name).second) {
      badText(r.pathOf("name"), c.name, "a name not used by another cause");
    }
    const auto count = r.nonNegative("count", "failures");
    const auto weight = r.nonNegative("weight", "shares");
    if (count && weight) {
      badText(r.pathOf("weight"), show(*r.find("weight")), "either count or weight, not both");
    }
    if (!count && !weight) {
      badText(r.pathOf("count"), "missing", "a count or a weight");
    }
    c.weight = count ? *count : *weight;
    c.nodeLost = r.boolean("node_lost").value_or(true);
    c.repairHours = r.nonNegative("repair_hours", "hours");
    r.accept("category");  // free text for people
    r.accept("note");
    r.finish();
    total += c.weight;
    causes.push_back(std::move(c));
  }
  if (!(total > 0.0)) {
    badText(path, "all weights 0", "at least one cause with a positive count or weight");
  }
  return causes;
}

std::vector<TraceFailure> parseTraceEvents(const json& list, const std::string& path,
                                           std::vector<std::string>& warnings) {
  if (!list.is_array()) {
    bad(path, list, "an array of failures");
  }
  std::vector<TraceFailure> events;
  for (std::size_t i = 0; i < list.size(); ++i) {
    ObjectReader r(list[i], fmt::format("{}[{}]", path, i), warnings);
    TraceFailure f;
    const auto at = r.nonNegative("at_hours", "hours");
    if (!at) {
      badText(r.pathOf("at_hours"), "missing", "the failure's time in hours");
    }
    f.atHours = *at;
    const json* node = r.find("node");
    if (node == nullptr) {
      badText(r.pathOf("node"), "missing", "a node id or index");
    }
    if (node->is_string()) {
      f.node = node->get<std::string>();
    } else if (node->is_number_integer() && node->get<std::int64_t>() >= 0) {
      f.node = std::to_string(node->get<std::int64_t>());
    } else {
      bad(r.pathOf("node"), *node, "a node id or a non-negative index");
    }
    f.cause = r.string("cause").value_or("");
    f.repairHours = r.nonNegative("repair_hours", "hours");
    r.finish();
    events.push_back(std::move(f));
  }
  std::stable_sort(events.begin(), events.end(), [](const TraceFailure& a, const TraceFailure& b) {
    return a.atHours < b.atHours;
  });
  return events;
}

std::vector<std::string> splitCsvLine(const std::string& line) {
  std::vector<std::string> fields;
  std::string field;
  for (char c : line) {
    if (c == ',') {
      fields.push_back(field);
      field.clear();
    } else if (c != '\r') {
      field += c;
    }
  }
  fields.push_back(field);
  for (auto& f : fields) {
    const auto b = f.find_first_not_of(" \t");
    const auto e = f.find_last_not_of(" \t");
    f = b == std::string::npos ? std::string() : f.substr(b, e - b + 1);
  }
  return fields;
}

double parseCsvNumber(const std::string& text, const std::string& path) {
  char* end = nullptr;
  const double x = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(x) || x < 0.0) {
    badText(path, text.empty() ? "empty" : text, "a non-negative number");
  }
  return x;
}

ClusterSpec parseClusterSection(const json& section, const std::filesystem::path& presetDir,
                                std::vector<std::string>& warnings) {
  std::vector<std::string> clusterWarnings;
  ClusterSpec cluster = sim::parseCluster(section, presetDir, &clusterWarnings);
  warnings.insert(warnings.end(), clusterWarnings.begin(), clusterWarnings.end());
  return cluster;
}

void parseJob(const json& section, const std::filesystem::path& baseDir, Scenario& s) {
  ObjectReader r(section, "job", s.warnings);
  JobSpec& job = s.job;

  const json* inlineConfig = r.find("config");
  const auto configFile = r.string("config_file");
  if (inlineConfig != nullptr && configFile) {
    badText("job.config_file", *configFile, "either job.config or job.config_file, not both");
  }
  config::ParsedConfig parsed;
  if (inlineConfig != nullptr) {
    if (!inlineConfig->is_object()) {
      bad("job.config", *inlineConfig, "a DeepSpeed config object");
    }
    parsed = config::parseConfig(inlineConfig->dump(), "job.config");
  } else if (configFile) {
    const auto path = resolve(baseDir, *configFile);
    job.configFile = path;
    parsed = config::loadConfig(path);
  } else {
    badText("job.config", "missing", "a DeepSpeed config (job.config or job.config_file)");
  }
  job.config = parsed.config;
  for (const auto& w : parsed.warnings) {
    s.warnings.push_back(fmt::format("job config: {}", w));
  }

  const auto sps = r.positive("seconds_per_sample_per_gpu", "seconds");
  const auto flops = r.positive("flops_per_sample", "FLOPs");
  const auto peak = r.positive("peak_tflops", "TFLOP/s");
  const auto mfu = r.number("mfu");
  job.modelParallelSize = r.integer("model_parallel_size", 1, "a positive integer").value_or(1);
  if (mfu && !(*mfu > 0.0 && *mfu <= 1.0)) {
    bad("job.mfu", *r.find("mfu"), "a fraction in (0, 1]");
  }
  if (sps && (flops || peak || mfu)) {
    badText("job.flops_per_sample", flops ? show(*r.find("flops_per_sample")) : "set",
            "either seconds_per_sample_per_gpu or flops_per_sample with peak_tflops and mfu");
  }
  if (sps) {
    job.secondsPerSample = *sps;
  } else if (flops && peak && mfu) {
    // The model-parallel group shares each sample's FLOPs.
    job.secondsPerSample =
        *flops / (*peak * 1e12 * *mfu * static_cast<double>(job.modelParallelSize));
  } else {
    badText("job.seconds_per_sample_per_gpu", "missing",
            "seconds per sample per GPU, or flops_per_sample, peak_tflops and mfu");
  }

  if (const json* gb = r.find("gradient_bytes"); gb != nullptr) {
    if (!gb->is_number() || gb->get<double>() < 0.0 || !std::isfinite(gb->get<double>())) {
      bad("job.gradient_bytes", *gb, "a non-negative number of bytes");
    }
    job.gradientBytes = gb->is_number_unsigned() ? gb->get<std::uint64_t>()
                        : gb->is_number_integer()
                            ? static_cast<std::uint64_t>(gb->get<std::int64_t>())
                            : static_cast<std::uint64_t>(gb->get<double>());
  }
  const auto buckets = r.integer("bucket_count", 1, "a positive integer");
  if (buckets) {
    job.bucketCount = *buckets;
  } else if (job.gradientBytes == 0) {
    job.bucketCount = 0;
  } else {
    const bool half = job.config.fp16.enabled || job.config.bf16.enabled;
    const auto elementBytes = static_cast<std::uint64_t>(half ? 2 : 4);
    const auto bucketBytes =
        static_cast<std::uint64_t>(std::max<std::int64_t>(1, job.config.zero.reduceBucketSize)) *
        elementBytes;
    job.bucketCount =
        static_cast<std::int64_t>((job.gradientBytes + bucketBytes - 1) / bucketBytes);
  }
  if (job.gradientBytes == 0) {
    job.bucketCount = 0;
  }
  if (const auto bf = r.number("backward_fraction")) {
    if (!(*bf >= 0.0 && *bf <= 1.0)) {
      bad("job.backward_fraction", *r.find("backward_fraction"), "a fraction in [0, 1]");
    }
    job.backwardFraction = *bf;
  }
  job.overlapComm = r.boolean("overlap_comm").value_or(job.config.zero.overlapCommEffective());

  job.totalSamples = r.integer("total_samples", 1, "a positive number of samples");
  job.totalSteps = r.integer("total_steps", 1, "a positive number of steps");
  job.horizonHours = r.positive("horizon_hours", "hours");
  if (!job.totalSamples && !job.totalSteps && !job.horizonHours) {
    badText("job.total_samples", "missing", "total_samples, total_steps or horizon_hours");
  }

  if (const json* ck = r.find("checkpoint"); ck != nullptr) {
    ObjectReader c(*ck, "job.checkpoint", s.warnings);
    job.checkpoint.intervalMinutes = c.number("interval_minutes");
    if (job.checkpoint.intervalMinutes && !(*job.checkpoint.intervalMinutes > 0.0)) {
      bad("job.checkpoint.interval_minutes", *c.find("interval_minutes"),
          "a positive number of minutes");
    }
    job.checkpoint.everySteps = c.integer("every_steps", 1, "a positive number of steps");
    if (job.checkpoint.intervalMinutes && job.checkpoint.everySteps) {
      badText("job.checkpoint.every_steps", std::to_string(*job.checkpoint.everySteps),
              "either interval_minutes or every_steps, not both");
    }
    job.checkpoint.saveSeconds = c.nonNegative("save_seconds", "seconds").value_or(0.0);
    job.checkpoint.loadSeconds = c.nonNegative("load_seconds", "seconds").value_or(0.0);
    c.finish();
  }
  job.restartOverheadSeconds = r.nonNegative("restart_overhead_seconds", "seconds").value_or(0.0);
  r.finish();
}

void parseAgent(const json& section, Scenario& s) {
  ObjectReader r(section, "agent", s.warnings);
  AgentSpec& a = s.agent;
  a.minNodes = r.integer("min_nodes", 1, "a positive integer");
  a.maxNodes = r.integer("max_nodes", 1, "a positive integer");
  if (a.minNodes && a.maxNodes && *a.maxNodes < *a.minNodes) {
    badText("agent.max_nodes", std::to_string(*a.maxNodes), "an integer >= agent.min_nodes");
  }
  a.maxRestarts =
      r.integer("max_restarts", 0, "a non-negative integer").value_or(kUnlimitedRestarts);
  a.lastCallSeconds = r.nonNegative("last_call_seconds", "seconds").value_or(a.lastCallSeconds);
  a.monitorIntervalSeconds =
      r.positive("monitor_interval_seconds", "seconds").value_or(a.monitorIntervalSeconds);
  a.waitTimeoutSeconds =
      r.positive("wait_timeout_seconds", "seconds").value_or(a.waitTimeoutSeconds);
  if (const auto sel = r.string("node_selection")) {
    if (*sel == "whole-nodes") {
      a.selection = agent::NodeSelection::WholeNodes;
    } else if (*sel == "partial-nodes") {
      a.selection = agent::NodeSelection::PartialNodes;
    } else {
      badText("agent.node_selection", *sel, "\"whole-nodes\" or \"partial-nodes\"");
    }
  }
  r.finish();
}

void parseFailures(const json& section, const std::filesystem::path& baseDir, Scenario& s) {
  ObjectReader r(section, "failures", s.warnings);
  FailureSpec& f = s.failures;
  const std::string model = r.string("model").value_or("none");
  if (model == "none") {
    f.model = FailureModelKind::None;
  } else if (model == "exponential") {
    f.model = FailureModelKind::Exponential;
  } else if (model == "weibull") {
    f.model = FailureModelKind::Weibull;
  } else if (model == "trace") {
    f.model = FailureModelKind::Trace;
  } else {
    badText("failures.model", model, "\"none\", \"exponential\", \"weibull\" or \"trace\"");
  }
  const auto mtbf = r.positive("node_mtbf_hours", "hours");
  if ((f.model == FailureModelKind::Exponential || f.model == FailureModelKind::Weibull) && !mtbf) {
    badText("failures.node_mtbf_hours", "missing",
            fmt::format("a positive number of hours (required by model \"{}\")", model));
  }
  f.nodeMtbfHours = mtbf.value_or(0.0);
  const auto shape = r.positive("shape", "(Weibull shape)");
  if (f.model == FailureModelKind::Weibull) {
    if (!shape) {
      badText("failures.shape", "missing", "the Weibull shape k > 0");
    }
    f.shape = *shape;
  }
  const json* events = r.find("events");
  const auto traceFile = r.string("trace_file");
  if (events != nullptr && traceFile) {
    badText("failures.trace_file", *traceFile, "either failures.events or failures.trace_file");
  }
  if (events != nullptr) {
    f.trace = parseTraceEvents(*events, "failures.events", s.warnings);
  } else if (traceFile) {
    f.trace = loadFailureTrace(resolve(baseDir, *traceFile));
  }
  if (f.model == FailureModelKind::Trace && events == nullptr && !traceFile) {
    badText("failures.events", "missing", "failures.events or failures.trace_file (model trace)");
  }
  if (f.model != FailureModelKind::Trace && (events != nullptr || traceFile)) {
    s.warnings.push_back(
        fmt::format("failures.{}: ignored, model is \"{}\" (set model \"trace\" to replay it)",
                    events != nullptr ? "events" : "trace_file", model));
  }
  if (const json* causes = r.find("causes"); causes != nullptr) {
    if (causes->is_string()) {
      f.causes = loadCauseTable(resolve(baseDir, causes->get<std::string>()));
    } else {
      f.causes = parseCauses(*causes, "failures.causes", s.warnings);
    }
  }
  if (const auto rep = r.string("replacement")) {
    if (*rep == "immediate") {
      f.replacement = ReplacementKind::Immediate;
    } else if (*rep == "none") {
      f.replacement = ReplacementKind::None;
    } else if (rep->rfind("spares:", 0) == 0) {
      const std::string count = rep->substr(7);
      char* end = nullptr;
      const long long k = std::strtoll(count.c_str(), &end, 10);
      if (count.empty() || end != count.c_str() + count.size() || k < 0) {
        badText("failures.replacement", *rep, "\"immediate\", \"spares:K\" (K >= 0) or \"none\"");
      }
      f.replacement = ReplacementKind::Spares;
      f.spares = k;
    } else {
      badText("failures.replacement", *rep, "\"immediate\", \"spares:K\" (K >= 0) or \"none\"");
    }
  }
  f.repairHours = r.nonNegative("repair_hours", "hours");
  r.finish();
}

void parseSpot(const json& section, Scenario& s) {
  ObjectReader r(section, "spot", s.warnings);
  SpotSpec spot;
  const auto mean = r.positive("node_mean_hours_between_preemptions", "hours");
  if (!mean) {
    badText("spot.node_mean_hours_between_preemptions", "missing",
            "the mean hours between preemptions of one node");
  }
  spot.nodeMeanHoursBetweenPreemptions = *mean;
  spot.returnHours = r.nonNegative("return_hours", "hours");
  r.finish();
  s.spot = spot;
}

void parseScaleEvents(const json& list, Scenario& s) {
  if (!list.is_array()) {
    bad("scale_events", list, "an array of {at_hours, kind, nodes}");
  }
  for (std::size_t i = 0; i < list.size(); ++i) {
    ObjectReader r(list[i], fmt::format("scale_events[{}]", i), s.warnings);
    ScaleEvent e;
    const auto at = r.nonNegative("at_hours", "hours");
    if (!at) {
      badText(r.pathOf("at_hours"), "missing", "the event's time in hours");
    }
    e.atHours = *at;
    const auto kind = r.string("kind");
    if (kind == "join") {
      e.kind = ScaleKind::Join;
    } else if (kind == "leave") {
      e.kind = ScaleKind::Leave;
    } else {
      badText(r.pathOf("kind"), kind.value_or("missing"), "\"join\" or \"leave\"");
    }
    e.nodes = r.integer("nodes", 1, "a positive number of nodes").value_or(1);
    r.finish();
    s.scaleEvents.push_back(e);
  }
  std::stable_sort(s.scaleEvents.begin(), s.scaleEvents.end(),
                   [](const ScaleEvent& a, const ScaleEvent& b) { return a.atHours < b.atHours; });
}

void parseScript(const json& list, Scenario& s) {
  if (!list.is_array()) {
    bad("script", list, "an array of {at_step, kind, ...}");
  }
  for (std::size_t i = 0; i < list.size(); ++i) {
    ObjectReader r(list[i], fmt::format("script[{}]", i), s.warnings);
    ScriptEvent e;
    const auto at = r.integer("at_step", 0, "a non-negative step number");
    if (!at) {
      badText(r.pathOf("at_step"), "missing", "the step after which the event happens");
    }
    e.atStep = *at;
    const auto kind = r.string("kind");
    if (kind == "kill_worker") {
      e.kind = ScriptKind::KillWorker;
      const auto rank = r.integer("rank", 0, "a non-negative global rank");
      if (!rank) {
        badText(r.pathOf("rank"), "missing", "the global rank of the worker to kill");
      }
      e.rank = *rank;
      if (const json* code = r.find("exit_code"); code != nullptr) {
        if (!code->is_number_integer() || code->get<std::int64_t>() == 0 ||
            code->get<std::int64_t>() < -64 || code->get<std::int64_t>() > 255) {
          bad(r.pathOf("exit_code"), *code,
              "a non-zero exit code (1..255, or -N for killed by signal N)");
        }
        e.exitCode = static_cast<int>(code->get<std::int64_t>());
      }
    } else if (kind == "leave" || kind == "join") {
      e.kind = kind == "leave" ? ScriptKind::Leave : ScriptKind::Join;
      const auto node = r.string("node");
      if (!node || node->empty()) {
        badText(r.pathOf("node"), node ? "\"\"" : "missing", "a node id");
      }
      e.node = *node;
      if (e.kind == ScriptKind::Join) {
        e.slots = r.integer("slots", 1, "a positive number of slots").value_or(0);
      }
    } else {
      badText(r.pathOf("kind"), kind.value_or("missing"), "\"kill_worker\", \"leave\" or \"join\"");
    }
    r.finish();
    s.script.push_back(e);
  }
  std::stable_sort(s.script.begin(), s.script.end(),
                   [](const ScriptEvent& a, const ScriptEvent& b) { return a.atStep < b.atStep; });
}

}  // namespace

std::string_view toString(FailureModelKind kind) noexcept {
  switch (kind) {
    case FailureModelKind::None:
      return "none";
    case FailureModelKind::Exponential:
      return "exponential";
    case FailureModelKind::Weibull:
      return "weibull";
    case FailureModelKind::Trace:
      return "trace";
  }
  return "?";
}

std::filesystem::path defaultPresetDir(const std::filesystem::path& scenarioDir) {
  if (const char* env = std::getenv("STRETCH_CLUSTER_PRESETS"); env != nullptr && *env != 0) {
    return env;
  }
  std::error_code ec;
  if (!scenarioDir.empty()) {
    const auto sibling = scenarioDir / ".." / "clusters";
    if (std::filesystem::is_directory(sibling, ec)) {
      return sibling.lexically_normal();
    }
  }
  return std::filesystem::path(STRETCH_SIM_SOURCE_DIR) / "fixtures" / "clusters";
}

Scenario parseScenario(const nlohmann::json& root, const std::filesystem::path& baseDir,
                       const ScenarioOptions& options) {
  Scenario s;
  s.name = "scenario";
  ObjectReader r(root, "", s.warnings);
  const std::filesystem::path presetDir =
      options.presetDir.empty() ? defaultPresetDir(baseDir) : options.presetDir;

  const json* cluster = r.find("cluster");
  if (cluster == nullptr) {
    badText("cluster", "missing",
            "a cluster: {\"preset\": NAME} or {\"nodes\", \"gpus_per_node\", ...}");
  }
  s.cluster = parseClusterSection(*cluster, presetDir, s.warnings);

  const json* job = r.find("job");
  if (job == nullptr) {
    badText("job", "missing", "a job section");
  }
  parseJob(*job, baseDir, s);

  if (const json* agent = r.find("agent"); agent != nullptr) {
    parseAgent(*agent, s);
  }
  if (const json* failures = r.find("failures"); failures != nullptr) {
    parseFailures(*failures, baseDir, s);
  }
  if (const json* spot = r.find("spot"); spot != nullptr) {
    parseSpot(*spot, s);
  }
  if (const json* scale = r.find("scale_events"); scale != nullptr) {
    parseScaleEvents(*scale, s);
  }
  if (const json* script = r.find("script"); script != nullptr) {
    parseScript(*script, s);
  }
  if (const json* names = r.find("node_names"); names != nullptr) {
    if (!names->is_array()) {
      bad("node_names", *names, "an array of node ids");
    }
    std::set<std::string> seen;
    for (std::size_t i = 0; i < names->size(); ++i) {
      const json& n = (*names)[i];
      if (!n.is_string() || n.get<std::string>().empty()) {
        bad(fmt::format("node_names[{}]", i), n, "a non-empty node id");
      }
      if (!seen.insert(n.get<std::string>()).second) {
        bad(fmt::format("node_names[{}]", i), n, "an id not used by another node");
      }
      s.nodeNames.push_back(n.get<std::string>());
    }
    if (static_cast<std::int64_t>(s.nodeNames.size()) != s.cluster.nodes) {
      badText("node_names", fmt::format("{} name(s)", s.nodeNames.size()),
              fmt::format("one name per cluster node ({})", s.cluster.nodes));
    }
  }
  if (const json* seed = r.find("seed"); seed != nullptr) {
    if (seed->is_number_unsigned()) {
      s.seed = seed->get<std::uint64_t>();
    } else if (seed->is_number_integer() && seed->get<std::int64_t>() >= 0) {
      s.seed = static_cast<std::uint64_t>(seed->get<std::int64_t>());
    } else {
      bad("seed", *seed, "a non-negative integer");
    }
  }
  r.accept("name");
  r.accept("description");
  if (const auto name = r.string("name")) {
    s.name = *name;
  }
  r.finish();

  // Cross-section checks.
  if (s.cluster.nodes < 1 || s.cluster.gpusPerNode < 1) {
    badText("cluster.nodes", std::to_string(s.cluster.nodes),
            "at least one node with at least one GPU");
  }
  if (s.agent.minNodes && s.cluster.nodes < *s.agent.minNodes && s.scaleEvents.empty() &&
      s.script.empty()) {
    s.warnings.push_back(fmt::format(
        "agent.min_nodes = {}: more than the cluster's {} node(s); the job will never start",
        *s.agent.minNodes, s.cluster.nodes));
  }
  return s;
}

Scenario parseScenarioText(std::string_view text, const std::filesystem::path& baseDir,
                           const ScenarioOptions& options) {
  return parseScenario(parseJsonText(text, "scenario"), baseDir, options);
}

Scenario loadScenario(const std::filesystem::path& path, const ScenarioOptions& options) {
  const std::string text = readText(path);
  Scenario s = parseScenario(parseJsonText(text, path.string()),
                             path.has_parent_path() ? path.parent_path() : ".", options);
  if (s.name == "scenario") {
    s.name = path.stem().string();
  }
  return s;
}

std::vector<FailureCause> loadCauseTable(const std::filesystem::path& path) {
  const json root = parseJsonText(readText(path), path.string());
  std::vector<std::string> warnings;  // a table's extra keys (sources, notes) are documentation
  if (root.is_object()) {
    const auto it = root.find("causes");
    if (it == root.end()) {
      throw ConfigError(ErrorDetail{path.string() + ": causes", "missing", "an array of causes"});
    }
    return parseCauses(*it, path.filename().string() + ": causes", warnings);
  }
  return parseCauses(root, path.filename().string(), warnings);
}

std::vector<TraceFailure> loadFailureTrace(const std::filesystem::path& path) {
  const std::string text = readText(path);
  const std::string source = path.filename().string();
  const auto ext = path.extension().string();
  if (ext == ".json") {
    const json root = parseJsonText(text, path.string());
    std::vector<std::string> warnings;
    if (root.is_object()) {
      const auto it = root.find("events");
      if (it == root.end()) {
        throw ConfigError(ErrorDetail{source + ": events", "missing", "an array of failures"});
      }
      return parseTraceEvents(*it, source + ": events", warnings);
    }
    return parseTraceEvents(root, source, warnings);
  }
  // CSV: time_hours,node[,cause[,repair_hours]] with a header line; '#' starts a comment line.
  std::istringstream in(text);
  std::string line;
  std::vector<TraceFailure> events;
  bool header = false;
  std::size_t lineNo = 0;
  while (std::getline(in, line)) {
    ++lineNo;
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') {
      continue;
    }
    const auto fields = splitCsvLine(line);
    if (!header) {
      if (fields.empty() || fields[0] != "time_hours" || fields.size() < 2 || fields[1] != "node") {
        badText(fmt::format("{}:{}", source, lineNo), line,
                "a header \"time_hours,node,cause,repair_hours\"");
      }
      header = true;
      continue;
    }
    const std::string where = fmt::format("{}:{}", source, lineNo);
    if (fields.size() < 2 || fields.size() > 4) {
      badText(where, line, "time_hours,node[,cause[,repair_hours]]");
    }
    TraceFailure f;
    f.atHours = parseCsvNumber(fields[0], where + " time_hours");
    f.node = fields[1];
    if (f.node.empty()) {
      badText(where + " node", "empty", "a node id or index");
    }
    if (fields.size() > 2) {
      f.cause = fields[2];
    }
    if (fields.size() > 3 && !fields[3].empty()) {
      f.repairHours = parseCsvNumber(fields[3], where + " repair_hours");
    }
    events.push_back(std::move(f));
  }
  if (!header) {
    badText(source, "empty", "a CSV trace with a header \"time_hours,node,cause,repair_hours\"");
  }
  std::stable_sort(events.begin(), events.end(), [](const TraceFailure& a, const TraceFailure& b) {
    return a.atHours < b.atHours;
  });
  return events;
}

}  // namespace stretch::sim
