#include "sim/scenario.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/common/error.hpp"
#include "runtime/common/file_io.hpp"
#include "runtime/config/json_reader.hpp"

#ifndef STRETCH_SIM_SOURCE_DIR
#define STRETCH_SIM_SOURCE_DIR "."
#endif

namespace stretch::sim {

namespace {

using namespace config::json;  // the JSON reader's rules and errors (json_reader.hpp)

// A value that is not one JSON value as written (a CSV field, a count of names).
[[noreturn]] void badText(const std::string& path, const std::string& value,
                          const std::string& expected) {
  throw ConfigError(ErrorDetail{path, value, expected});
}

// A number in (0, max].
std::optional<double> positive(const ObjectReader& r, std::string_view key, std::string_view unit,
                               double max) {
  const std::string expected = fmt::format("a positive number of {}, at most {:g}", unit, max);
  return r.readNumber(key, NumberRule{0.0, true, expected, max});
}

// A number in [0, max].
std::optional<double> nonNegative(const ObjectReader& r, std::string_view key,
                                  std::string_view unit, double max) {
  const std::string expected = fmt::format("a non-negative number of {}, at most {:g}", unit, max);
  return r.readNumber(key, NumberRule{0.0, false, expected, max});
}

// Times and durations: in (0, max] or [0, max] for the unit's maximum (kMaxScenarioHours).
std::optional<double> positiveHours(const ObjectReader& r, std::string_view key) {
  return positive(r, key, "hours", kMaxScenarioHours);
}
std::optional<double> nonNegativeHours(const ObjectReader& r, std::string_view key) {
  return nonNegative(r, key, "hours", kMaxScenarioHours);
}
std::optional<double> nonNegativeSeconds(const ObjectReader& r, std::string_view key) {
  return nonNegative(r, key, "seconds", kMaxScenarioSeconds);
}
std::optional<double> positiveSeconds(const ObjectReader& r, std::string_view key) {
  return positive(r, key, "seconds", kMaxScenarioSeconds);
}

// A bandwidth in [kMinClusterGBps, kMaxClusterGBps].
std::optional<double> bandwidth(const ObjectReader& r, std::string_view key) {
  const std::string expected =
      fmt::format("a number of GB/s in [{:g}, {:g}]", kMinClusterGBps, kMaxClusterGBps);
  return r.readNumber(key, NumberRule{kMinClusterGBps, false, expected, kMaxClusterGBps});
}

// An integer in [min, max]; an integral float (2.0) counts. `expected` is followed by the
// maximum when it is not int64's.
std::optional<std::int64_t> integer(const ObjectReader& r, std::string_view key, std::int64_t min,
                                    std::string_view expected,
                                    std::int64_t max = std::numeric_limits<std::int64_t>::max()) {
  const std::string text = max == std::numeric_limits<std::int64_t>::max()
                               ? std::string(expected)
                               : fmt::format("{}, at most {}", expected, max);
  return r.readInt(key, IntRule{min, max, text, /*allowIntegralFloat=*/true});
}

// Global ranks a script may name: one per GPU of the largest cluster.
constexpr std::int64_t kMaxRank = kMaxClusterNodes * kMaxGpusPerNode;

// The value read at key; "<path>.<key> = (missing): expected <expected>" when it is absent.
template <typename T>
T required(const ObjectReader& r, std::string_view key, std::optional<T> value,
           std::string_view expected) {
  if (!value) {
    r.fail(key, expected);
  }
  return *value;
}

// Reads every element of an array of objects ("<path>[i]") with read; the keys it never looks up
// become warnings.
template <typename Read>
void forEachObject(const Json& list, const std::string& path, std::string_view expected,
                   std::vector<std::string>& warnings, Read read) {
  if (!list.is_array()) {
    throwValue(path, list, expected);
  }
  for (std::size_t i = 0; i < list.size(); ++i) {
    const ObjectReader r(list[i], indexPath(path, i));
    read(r);
    r.warnUnread(warnings);
  }
}

std::filesystem::path resolve(const std::filesystem::path& baseDir, const std::string& file) {
  std::filesystem::path p(file);
  return p.is_absolute() ? p : baseDir / p;
}

std::vector<FailureCause> parseCauses(const Json& list, const std::string& path,
                                      std::vector<std::string>& warnings) {
  constexpr std::string_view kExpected = "a non-empty array of causes";
  if (list.empty()) {
    throwValue(path, list, kExpected);
  }
  std::vector<FailureCause> causes;
  std::set<std::string> names;
  double total = 0.0;
  forEachObject(list, path, kExpected, warnings, [&](const ObjectReader& r) {
    FailureCause c;
    const auto name = r.readString("name");
    if (!name || name->empty()) {
      r.fail("name", "the cause's name");
    }
    c.name = *name;
    if (!names.insert(c.name).second) {
      r.fail("name", "a name not used by another cause");
    }
    const auto count = nonNegative(r, "count", "failures", kMaxCauseWeight);
    const auto weight = nonNegative(r, "weight", "shares", kMaxCauseWeight);
    if (count && weight) {
      r.fail("weight", "either count or weight, not both");
    }
    if (!count && !weight) {
      r.fail("count", "a count or a weight");
    }
    c.weight = count ? *count : *weight;
    c.nodeLost = r.readBool("node_lost").value_or(true);
    c.repairHours = nonNegativeHours(r, "repair_hours");
    r.accept("category");  // free text for people
    r.accept("note");
    total += c.weight;
    causes.push_back(std::move(c));
  });
  if (!(total > 0.0)) {
    badText(path, "all weights 0", "at least one cause with a positive count or weight");
  }
  return causes;
}

std::vector<TraceFailure> parseTraceEvents(const Json& list, const std::string& path,
                                           std::vector<std::string>& warnings) {
  std::vector<TraceFailure> events;
  forEachObject(list, path, "an array of failures", warnings, [&](const ObjectReader& r) {
    TraceFailure f;
    f.atHours =
        required(r, "at_hours", nonNegativeHours(r, "at_hours"), "the failure's time in hours");
    const Json* node = r.find("node");
    if (node != nullptr && node->is_string()) {
      f.node = node->get<std::string>();
    } else if (node != nullptr && node->is_number_integer() && node->get<std::int64_t>() >= 0) {
      f.node = std::to_string(node->get<std::int64_t>());
    } else {
      r.fail("node", "a node id or a non-negative index");
    }
    f.cause = r.readString("cause").value_or("");
    f.repairHours = nonNegativeHours(r, "repair_hours");
    events.push_back(std::move(f));
  });
  std::stable_sort(events.begin(), events.end(), [](const TraceFailure& a, const TraceFailure& b) {
    return a.atHours < b.atHours;
  });
  return events;
}

// A cause table or trace file (what it is: "failure cause table"): {"<key>": [...], ...} or
// the bare array.
template <typename Parse>
auto parseListFile(const std::filesystem::path& path, std::string_view what, std::string_view key,
                   std::string_view expected, Parse parse) {
  const std::string source = path.filename().string();
  const Json root = config::json::parseJson(readFile(path, what), path.string());
  std::vector<std::string> warnings;  // a file's extra keys (sources, notes) are documentation
  if (root.is_object()) {
    const auto it = root.find(key);
    if (it == root.end()) {
      badText(fmt::format("{}: {}", source, key), std::string(kMissing), std::string(expected));
    }
    return parse(*it, fmt::format("{}: {}", source, key), warnings);
  }
  return parse(root, source, warnings);
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
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(x) || x < 0.0 ||
      x > kMaxScenarioHours) {
    badText(path, text.empty() ? "empty" : text,
            fmt::format("a non-negative number of hours, at most {:g}", kMaxScenarioHours));
  }
  return x;
}

void parseJob(const ObjectReader& r, const std::filesystem::path& baseDir, Scenario& s) {
  JobSpec& job = s.job;

  const Json* inlineConfig = r.find("config");
  const auto configFile = r.readString("config_file");
  if (inlineConfig != nullptr && configFile) {
    r.fail("config_file", "either job.config or job.config_file, not both");
  }
  config::ParsedConfig parsed;
  if (inlineConfig != nullptr) {
    if (!inlineConfig->is_object()) {
      r.fail("config", "a DeepSpeed config object");
    }
    parsed = config::parseConfig(inlineConfig->dump(), "job.config");
  } else if (configFile) {
    const auto path = resolve(baseDir, *configFile);
    job.configFile = path;
    parsed = config::loadConfig(path);
  } else {
    r.fail("config", "a DeepSpeed config (job.config or job.config_file)");
  }
  job.config = parsed.config;
  for (const auto& w : parsed.warnings) {
    s.warnings.push_back(fmt::format("job config: {}", w));
  }

  const auto sps = positiveSeconds(r, "seconds_per_sample_per_gpu");
  const auto flops = positive(r, "flops_per_sample", "FLOPs", 1e30);
  const auto peak = positive(r, "peak_tflops", "TFLOP/s", 1e9);
  const auto mfu = r.readNumber("mfu", NumberRule{0.0, true, "a fraction in (0, 1]", 1.0});
  job.modelParallelSize =
      integer(r, "model_parallel_size", 1, "a positive integer", kMaxRank).value_or(1);
  if (sps && (flops || peak || mfu)) {
    r.fail(flops  ? "flops_per_sample"
           : peak ? "peak_tflops"
                  : "mfu",
           "either seconds_per_sample_per_gpu or flops_per_sample with peak_tflops and mfu");
  }
  if (sps) {
    job.secondsPerSample = *sps;
  } else if (flops && peak && mfu) {
    // The model-parallel group shares each sample's FLOPs.
    job.secondsPerSample =
        *flops / (*peak * 1e12 * *mfu * static_cast<double>(job.modelParallelSize));
    if (!(job.secondsPerSample > 0.0 && job.secondsPerSample <= kMaxScenarioSeconds)) {
      r.failAs("flops_per_sample", fmt::format("{:g}", *flops),
               fmt::format("FLOPs that give between 0 and {:g} seconds per sample per GPU "
                           "(flops_per_sample / (peak_tflops x 1e12 x mfu x "
                           "model_parallel_size) = {:g})",
                           kMaxScenarioSeconds, job.secondsPerSample));
    }
  } else {
    r.fail("seconds_per_sample_per_gpu",
           "seconds per sample per GPU, or flops_per_sample, peak_tflops and mfu");
  }

  if (const Json* gb = r.find("gradient_bytes"); gb != nullptr) {
    if (!gb->is_number() || gb->get<double>() < 0.0 || !std::isfinite(gb->get<double>()) ||
        gb->get<double>() > kMaxScenarioBytes) {
      r.fail("gradient_bytes",
             fmt::format("a non-negative number of bytes, at most {:g}", kMaxScenarioBytes));
    }
    job.gradientBytes = gb->is_number_unsigned() ? gb->get<std::uint64_t>()
                        : gb->is_number_integer()
                            ? static_cast<std::uint64_t>(gb->get<std::int64_t>())
                            : static_cast<std::uint64_t>(gb->get<double>());
  }
  const auto buckets = integer(r, "bucket_count", 1, "a positive integer", kMaxBucketCount);
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
    if (job.bucketCount > kMaxBucketCount) {
      r.fail("gradient_bytes",
             fmt::format("at most {} buckets of zero_optimization.reduce_bucket_size ({} "
                         "bytes; {} here): give job.bucket_count",
                         kMaxBucketCount, bucketBytes, job.bucketCount));
    }
  }
  if (job.gradientBytes == 0) {
    job.bucketCount = 0;
  }
  job.backwardFraction =
      r.readNumber("backward_fraction", NumberRule{0.0, false, "a fraction in [0, 1]", 1.0})
          .value_or(job.backwardFraction);
  job.overlapComm = r.readBool("overlap_comm").value_or(job.config.zero.overlapCommEffective());
  job.computeSpread =
      r.readNumber("compute_spread",
                   NumberRule{0.0, false,
                              fmt::format("a non-negative fraction of the step's compute, at "
                                          "most {:g}",
                                          kMaxComputeSpread),
                              kMaxComputeSpread})
          .value_or(0.0);
  job.stepOverheadSeconds = nonNegativeSeconds(r, "step_overhead_seconds").value_or(0.0);

  job.totalSamples =
      integer(r, "total_samples", 1, "a positive number of samples", kMaxScenarioSamples);
  job.totalSteps = integer(r, "total_steps", 1, "a positive number of steps", kMaxScenarioSteps);
  job.horizonHours = positiveHours(r, "horizon_hours");
  if (!job.totalSamples && !job.totalSteps && !job.horizonHours) {
    r.fail("total_samples", "total_samples, total_steps or horizon_hours");
  }

  if (const auto c = r.readObject("checkpoint", "a JSON object")) {
    CheckpointSpec& ck = job.checkpoint;
    ck.intervalMinutes = positive(*c, "interval_minutes", "minutes", kMaxScenarioMinutes);
    ck.everySteps = integer(*c, "every_steps", 1, "a positive number of steps", kMaxScenarioSteps);
    if (ck.intervalMinutes && ck.everySteps) {
      c->fail("every_steps", "either interval_minutes or every_steps, not both");
    }
    ck.saveSeconds = nonNegativeSeconds(*c, "save_seconds").value_or(0.0);
    ck.loadSeconds = nonNegativeSeconds(*c, "load_seconds").value_or(0.0);
    c->warnUnread(s.warnings);
  }
  job.restartOverheadSeconds =
      readSecondsByNodes(r, "restart_overhead_seconds", s.warnings).value_or(0.0);
  job.failureDetectionSeconds =
      readSecondsByNodes(r, "failure_detection_seconds", s.warnings).value_or(0.0);
  if (const auto rec = r.readObject("recovery", "a JSON object")) {
    RecoverySpec& live = job.recovery;
    const std::string mode = rec->readString("mode").value_or("checkpoint");
    if (mode != "checkpoint" && mode != "live") {
      rec->fail("mode", "\"checkpoint\" or \"live\"");
    }
    live.live = mode == "live";
    const auto reconfigure = readSecondsByNodes(*rec, "reconfigure_seconds", s.warnings);
    if (live.live && !reconfigure) {
      rec->fail("reconfigure_seconds",
                "seconds from a failure to the survivors training again (live mode)");
    }
    live.reconfigureSeconds = reconfigure.value_or(SecondsByNodes{});
    live.transferGBps = bandwidth(*rec, "transfer_GBps").value_or(0.0);
    if (const auto bytes = nonNegative(*rec, "state_bytes", "bytes", kMaxScenarioBytes)) {
      live.stateBytes = static_cast<std::uint64_t>(*bytes);
    } else {
      const bool half = job.config.fp16.enabled || job.config.bf16.enabled;
      live.stateBytes = job.gradientBytes * (half ? 7 : 3);
    }
    rec->warnUnread(s.warnings);
  }
  r.warnUnread(s.warnings);
}

void parseAgent(const ObjectReader& r, Scenario& s) {
  AgentSpec& a = s.agent;
  a.minNodes = integer(r, "min_nodes", 1, "a positive integer", kMaxClusterNodes);
  a.maxNodes = integer(r, "max_nodes", 1, "a positive integer", kMaxClusterNodes);
  if (a.minNodes && a.maxNodes && *a.maxNodes < *a.minNodes) {
    r.fail("max_nodes", "an integer >= agent.min_nodes");
  }
  a.maxRestarts =
      integer(r, "max_restarts", 0, "a non-negative integer").value_or(kUnlimitedRestarts);
  a.lastCallSeconds = nonNegativeSeconds(r, "last_call_seconds").value_or(a.lastCallSeconds);
  a.monitorIntervalSeconds =
      positiveSeconds(r, "monitor_interval_seconds").value_or(a.monitorIntervalSeconds);
  a.waitTimeoutSeconds = positiveSeconds(r, "wait_timeout_seconds").value_or(a.waitTimeoutSeconds);
  if (const auto sel = r.readString("node_selection")) {
    if (*sel == "whole-nodes") {
      a.selection = agent::NodeSelection::WholeNodes;
    } else if (*sel == "partial-nodes") {
      a.selection = agent::NodeSelection::PartialNodes;
    } else {
      r.fail("node_selection", "\"whole-nodes\" or \"partial-nodes\"");
    }
  }
  r.warnUnread(s.warnings);
}

void parseFailures(const ObjectReader& r, const std::filesystem::path& baseDir, Scenario& s) {
  FailureSpec& f = s.failures;
  const std::string model = r.readString("model").value_or("none");
  if (model == "none") {
    f.model = FailureModelKind::None;
  } else if (model == "exponential") {
    f.model = FailureModelKind::Exponential;
  } else if (model == "weibull") {
    f.model = FailureModelKind::Weibull;
  } else if (model == "trace") {
    f.model = FailureModelKind::Trace;
  } else {
    r.fail("model", "\"none\", \"exponential\", \"weibull\" or \"trace\"");
  }
  const std::string mtbfExpected =
      fmt::format("a number of hours in [{:g}, {:g}]", kMinNodeMtbfHours, kMaxMeanHours);
  const auto mtbf = r.readNumber("node_mtbf_hours",
                                 NumberRule{kMinNodeMtbfHours, false, mtbfExpected, kMaxMeanHours});
  if ((f.model == FailureModelKind::Exponential || f.model == FailureModelKind::Weibull) && !mtbf) {
    r.fail("node_mtbf_hours", fmt::format("{} (required by model \"{}\")", mtbfExpected, model));
  }
  f.nodeMtbfHours = mtbf.value_or(0.0);
  const std::string shapeExpected = fmt::format("the Weibull shape k, a number in [{:g}, {:g}]",
                                                kMinWeibullShape, kMaxWeibullShape);
  const auto shape =
      r.readNumber("shape", NumberRule{kMinWeibullShape, false, shapeExpected, kMaxWeibullShape});
  if (f.model == FailureModelKind::Weibull) {
    f.shape = required(r, "shape", shape, shapeExpected);
  }
  const Json* events = r.find("events");
  const auto traceFile = r.readString("trace_file");
  if (events != nullptr && traceFile) {
    r.fail("trace_file", "either failures.events or failures.trace_file");
  }
  if (events != nullptr) {
    f.trace = parseTraceEvents(*events, r.childPath("events"), s.warnings);
  } else if (traceFile) {
    f.trace = loadFailureTrace(resolve(baseDir, *traceFile));
  }
  if (f.model == FailureModelKind::Trace && events == nullptr && !traceFile) {
    r.fail("events", "failures.events or failures.trace_file (model trace)");
  }
  if (f.model != FailureModelKind::Trace && (events != nullptr || traceFile)) {
    s.warnings.push_back(
        fmt::format("failures.{}: ignored, model is \"{}\" (set model \"trace\" to replay it)",
                    events != nullptr ? "events" : "trace_file", model));
  }
  if (const Json* causes = r.find("causes"); causes != nullptr) {
    if (causes->is_string()) {
      f.causes = loadCauseTable(resolve(baseDir, causes->get<std::string>()));
    } else {
      f.causes = parseCauses(*causes, r.childPath("causes"), s.warnings);
    }
  }
  if (const auto rep = r.readString("replacement")) {
    const std::string kExpected =
        fmt::format("\"immediate\", \"spares:K\" (0 <= K <= {}) or \"none\"", kMaxClusterNodes);
    if (*rep == "immediate") {
      f.replacement = ReplacementKind::Immediate;
    } else if (*rep == "none") {
      f.replacement = ReplacementKind::None;
    } else if (rep->rfind("spares:", 0) == 0) {
      const std::string count = rep->substr(7);
      char* end = nullptr;
      const long long k = std::strtoll(count.c_str(), &end, 10);
      if (count.empty() || end != count.c_str() + count.size() || k < 0 || k > kMaxClusterNodes) {
        r.fail("replacement", kExpected);
      }
      f.replacement = ReplacementKind::Spares;
      f.spares = k;
    } else {
      r.fail("replacement", kExpected);
    }
  }
  f.repairHours = nonNegativeHours(r, "repair_hours");
  r.warnUnread(s.warnings);
}

void parseSpot(const ObjectReader& r, Scenario& s) {
  SpotSpec spot;
  spot.nodeMeanHoursBetweenPreemptions =
      required(r, "node_mean_hours_between_preemptions",
               positive(r, "node_mean_hours_between_preemptions", "hours", kMaxMeanHours),
               "the mean hours between preemptions of one node");
  spot.returnHours = nonNegativeHours(r, "return_hours");
  r.warnUnread(s.warnings);
  s.spot = spot;
}

ScaleEvent readScaleEvent(const ObjectReader& r) {
  ScaleEvent e;
  e.atHours = required(r, "at_hours", nonNegativeHours(r, "at_hours"), "the event's time in hours");
  const auto kind = r.readString("kind");
  if (kind == "join") {
    e.kind = ScaleKind::Join;
  } else if (kind == "leave") {
    e.kind = ScaleKind::Leave;
  } else {
    r.fail("kind", "\"join\" or \"leave\"");
  }
  e.nodes = integer(r, "nodes", 1, "a positive number of nodes", kMaxClusterNodes).value_or(1);
  return e;
}

void parseScaleEvents(const Json& list, const std::string& path, Scenario& s) {
  forEachObject(list, path, "an array of {at_hours, kind, nodes}", s.warnings,
                [&](const ObjectReader& r) { s.scaleEvents.push_back(readScaleEvent(r)); });
  std::stable_sort(s.scaleEvents.begin(), s.scaleEvents.end(),
                   [](const ScaleEvent& a, const ScaleEvent& b) { return a.atHours < b.atHours; });
}

ScriptEvent readScriptEvent(const ObjectReader& r) {
  ScriptEvent e;
  e.atStep = required(r, "at_step",
                      integer(r, "at_step", 0, "a non-negative step number", kMaxScenarioSteps),
                      "the step after which the event happens");
  const auto kind = r.readString("kind");
  if (kind == "kill_worker") {
    e.kind = ScriptKind::KillWorker;
    e.rank = required(r, "rank", integer(r, "rank", 0, "a non-negative global rank", kMaxRank),
                      "the global rank of the worker to kill");
    constexpr std::string_view kExitCode =
        "a non-zero exit code (1..255, or -N for killed by signal N)";
    if (const auto code = r.readInt("exit_code", IntRule{-64, 255, kExitCode})) {
      if (*code == 0) {
        r.fail("exit_code", kExitCode);
      }
      e.exitCode = static_cast<int>(*code);
    }
  } else if (kind == "leave" || kind == "join") {
    e.kind = kind == "leave" ? ScriptKind::Leave : ScriptKind::Join;
    const auto node = r.readString("node");
    if (!node || node->empty()) {
      r.fail("node", "a node id");
    }
    e.node = *node;
    if (e.kind == ScriptKind::Join) {
      e.slots = integer(r, "slots", 1, "a positive number of slots", kMaxGpusPerNode).value_or(0);
    }
  } else {
    r.fail("kind", "\"kill_worker\", \"leave\" or \"join\"");
  }
  return e;
}

void parseScript(const Json& list, const std::string& path, Scenario& s) {
  forEachObject(list, path, "an array of {at_step, kind, ...}", s.warnings,
                [&](const ObjectReader& r) { s.script.push_back(readScriptEvent(r)); });
  std::stable_sort(s.script.begin(), s.script.end(),
                   [](const ScriptEvent& a, const ScriptEvent& b) { return a.atStep < b.atStep; });
}

void parseNodeNames(const ObjectReader& r, Scenario& s) {
  const Json* names = r.find("node_names");
  if (names == nullptr) {
    return;
  }
  if (!names->is_array()) {
    r.fail("node_names", "an array of node ids");
  }
  std::set<std::string> seen;
  for (std::size_t i = 0; i < names->size(); ++i) {
    const Json& n = (*names)[i];
    const std::string path = indexPath(r.childPath("node_names"), i);
    if (!n.is_string() || n.get<std::string>().empty()) {
      r.failValue(path, n, "a non-empty node id");
    }
    if (!seen.insert(n.get<std::string>()).second) {
      r.failValue(path, n, "an id not used by another node");
    }
    s.nodeNames.push_back(n.get<std::string>());
  }
  if (static_cast<std::int64_t>(s.nodeNames.size()) != s.cluster.nodes) {
    r.failAs("node_names", fmt::format("{} name(s)", s.nodeNames.size()),
             fmt::format("one name per cluster node ({})", s.cluster.nodes));
  }
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
  if (!root.is_object()) {
    throwValue("scenario", root, "a JSON object");
  }
  Scenario s;
  s.name = "scenario";
  const ObjectReader r(root, "");
  const std::filesystem::path presetDir =
      options.presetDir.empty() ? defaultPresetDir(baseDir) : options.presetDir;

  const Json* cluster = r.find("cluster");
  if (cluster == nullptr) {
    r.fail("cluster", "a cluster: {\"preset\": NAME} or {\"nodes\", \"gpus_per_node\", ...}");
  }
  s.cluster = parseCluster(*cluster, presetDir, &s.warnings);

  const auto job = r.readObject("job", "a JSON object");
  if (!job) {
    r.fail("job", "a job section");
  }
  parseJob(*job, baseDir, s);

  if (const auto agent = r.readObject("agent", "a JSON object")) {
    parseAgent(*agent, s);
  }
  if (const auto failures = r.readObject("failures", "a JSON object")) {
    parseFailures(*failures, baseDir, s);
  }
  if (const auto spot = r.readObject("spot", "a JSON object")) {
    parseSpot(*spot, s);
  }
  if (const Json* scale = r.find("scale_events"); scale != nullptr) {
    parseScaleEvents(*scale, r.childPath("scale_events"), s);
  }
  if (const Json* script = r.find("script"); script != nullptr) {
    parseScript(*script, r.childPath("script"), s);
  }
  parseNodeNames(r, s);
  if (const Json* seed = r.find("seed"); seed != nullptr) {
    if (seed->is_number_unsigned()) {
      s.seed = seed->get<std::uint64_t>();
    } else if (seed->is_number_integer() && seed->get<std::int64_t>() >= 0) {
      s.seed = static_cast<std::uint64_t>(seed->get<std::int64_t>());
    } else {
      r.fail("seed", "a non-negative integer");
    }
  }
  r.accept("description");
  r.accept("calibration");  // the measurements `stretch sim --calibrate` keeps beside its fit
  if (const auto name = r.readString("name")) {
    s.name = *name;
  }
  r.warnUnread(s.warnings);

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
  return parseScenario(config::json::parseJson(text, "scenario"), baseDir, options);
}

double stateTransferSeconds(const Scenario& s) noexcept {
  const double gbps =
      s.job.recovery.transferGBps > 0 ? s.job.recovery.transferGBps : s.cluster.interNodeGBps;
  return gbps > 0 ? static_cast<double>(s.job.recovery.stateBytes) / (gbps * 1e9) : 0.0;
}

Scenario loadScenario(const std::filesystem::path& path, const ScenarioOptions& options) {
  Scenario s = parseScenario(config::json::parseJson(readFile(path, "scenario"), path.string()),
                             path.has_parent_path() ? path.parent_path() : ".", options);
  if (s.name == "scenario") {
    s.name = path.stem().string();
  }
  return s;
}

std::vector<FailureCause> loadCauseTable(const std::filesystem::path& path) {
  return parseListFile(path, "failure cause table", "causes", "an array of causes", parseCauses);
}

std::vector<TraceFailure> loadFailureTrace(const std::filesystem::path& path) {
  if (path.extension() == ".json") {
    return parseListFile(path, "failure trace", "events", "an array of failures", parseTraceEvents);
  }
  const std::string text = readFile(path, "failure trace");
  const std::string source = path.filename().string();
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
