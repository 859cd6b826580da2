#include "sim/cluster.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "runtime/common/error.hpp"
#include "runtime/common/file_io.hpp"
#include "runtime/common/strings.hpp"
#include "runtime/config/json_reader.hpp"

namespace stretch::sim {

namespace {

using namespace config::json;  // the JSON reader's rules and errors (json_reader.hpp)

// Every key a preset file may hold (a scenario's "cluster" object may also hold "preset").
constexpr std::string_view kPresetKeys[] = {"name",
                                            "description",
                                            "source",
                                            "nodes",
                                            "gpus_per_node",
                                            "intra_node_GBps",
                                            "inter_node_GBps",
                                            "intra_latency_us",
                                            "inter_latency_us",
                                            "op_latency_us"};

std::string finiteExpected(bool positive, std::string_view unit) {
  return fmt::format("a finite number {} ({})", positive ? "> 0" : ">= 0", unit);
}

// An integer in [min, max]; 2.0 is an integer as far as a user is concerned, 2.5 is not.
std::optional<std::int64_t> readInt(const ObjectReader& reader, std::string_view key,
                                    std::int64_t min, std::int64_t max) {
  const std::string expected = fmt::format("an integer in [{}, {}]", min, max);
  return reader.readInt(key, IntRule{min, max, expected, /*allowIntegralFloat=*/true});
}

std::optional<double> readNumber(const ObjectReader& reader, std::string_view key, bool positive,
                                 std::string_view unit) {
  const std::string expected = finiteExpected(positive, unit);
  return reader.readNumber(key, NumberRule{0.0, positive, expected});
}

// Reads every numeric field present in the object into `spec`.
void readFields(const ObjectReader& reader, ClusterSpec& spec) {
  if (auto v = readInt(reader, "nodes", 1, kMaxClusterNodes))
    spec.nodes = *v;
  if (auto v = readInt(reader, "gpus_per_node", 1, kMaxGpusPerNode))
    spec.gpusPerNode = *v;
  if (auto v = readNumber(reader, "intra_node_GBps", false, "GB/s per GPU"))
    spec.intraNodeGBps = *v;
  if (auto v = readNumber(reader, "inter_node_GBps", true, "GB/s per GPU"))
    spec.interNodeGBps = *v;
  if (auto v = readNumber(reader, "intra_latency_us", false, "microseconds per hop"))
    spec.intraLatencyUs = *v;
  if (auto v = readNumber(reader, "inter_latency_us", false, "microseconds per hop"))
    spec.interLatencyUs = *v;
  if (auto v = readNumber(reader, "op_latency_us", false, "microseconds per collective"))
    spec.opLatencyUs = *v;
}

void requireKeys(const ObjectReader& reader, std::span<const std::string_view> keys,
                 std::string_view alternative) {
  for (std::string_view key : keys) {
    if (!reader.has(key))
      reader.fail(key, fmt::format("the key to be present{}", alternative));
  }
}

bool validPresetName(std::string_view name) {
  if (name.empty() || name.size() > 100 || name.front() == '.')
    return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  });
}

std::string joinNames(const std::vector<std::string>& names) {
  if (names.empty())
    return "(no presets found)";
  std::string out;
  for (const auto& n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out;
}

[[noreturn]] void invalid(std::string_view key, std::string value, std::string expected) {
  throw ConfigError(
      ErrorDetail{fmt::format("cluster.{}", key), std::move(value), std::move(expected)});
}

// A preset file's figures are checked like a scenario's; its errors also name the file.
ClusterSpec readPreset(std::string_view name, const ObjectReader& reader) {
  reader.rejectUnknown(kPresetKeys,
                       fmt::format("a cluster preset key ({})", fmt::join(kPresetKeys, ", ")));
  static constexpr std::string_view kRequired[] = {"name",
                                                   "source",
                                                   "gpus_per_node",
                                                   "intra_node_GBps",
                                                   "inter_node_GBps",
                                                   "intra_latency_us",
                                                   "inter_latency_us"};
  requireKeys(reader, kRequired, "");

  ClusterSpec spec;
  spec.name = *reader.readString("name");
  if (spec.name != name)
    reader.fail("name", jsonQuote(name) + " (the file name)");
  reader.readString("description");
  if (reader.readString("source")->empty())
    reader.fail("source", "where the figures come from");
  readFields(reader, spec);
  validateCluster(spec);
  return spec;
}

}  // namespace

void validateCluster(const ClusterSpec& c) {
  if (c.nodes < 1 || c.nodes > kMaxClusterNodes)
    invalid("nodes", std::to_string(c.nodes),
            fmt::format("an integer in [1, {}]", kMaxClusterNodes));
  if (c.gpusPerNode < 1 || c.gpusPerNode > kMaxGpusPerNode)
    invalid("gpus_per_node", std::to_string(c.gpusPerNode),
            fmt::format("an integer in [1, {}]", kMaxGpusPerNode));
  // Bounded so that no transfer or latency the simulator derives from them becomes infinite:
  // a bandwidth is 0 (intra-node with one GPU per node) or in [kMinClusterGBps,
  // kMaxClusterGBps], a latency at most kMaxClusterLatencyUs.
  auto number = [&](std::string_view key, double v, bool positive, std::string_view unit,
                    double minNonZero, double max) {
    if (!std::isfinite(v) || v < 0 || (positive && v == 0) || (v > 0 && v < minNonZero) || v > max)
      invalid(
          key, fmt::format("{}", v),
          fmt::format("{}, {}at most {:g}", finiteExpected(positive, unit),
                      minNonZero > 0 ? fmt::format("at least {:g} and ", minNonZero) : "", max));
  };
  number("intra_node_GBps", c.intraNodeGBps, c.gpusPerNode > 1,
         c.gpusPerNode > 1 ? "GB/s per GPU; 0 only with one GPU per node" : "GB/s per GPU",
         kMinClusterGBps, kMaxClusterGBps);
  number("inter_node_GBps", c.interNodeGBps, true, "GB/s per GPU", kMinClusterGBps,
         kMaxClusterGBps);
  number("intra_latency_us", c.intraLatencyUs, false, "microseconds per hop", 0.0,
         kMaxClusterLatencyUs);
  number("inter_latency_us", c.interLatencyUs, false, "microseconds per hop", 0.0,
         kMaxClusterLatencyUs);
  number("op_latency_us", c.opLatencyUs, false, "microseconds per collective", 0.0,
         kMaxClusterLatencyUs);
}

std::vector<std::string> clusterPresetNames(const std::filesystem::path& presetDir) {
  std::vector<std::string> names;
  std::error_code ec;
  std::filesystem::directory_iterator it(presetDir, ec);
  if (ec)
    return names;
  for (const auto& entry : it) {
    if (entry.path().extension() == ".json" && entry.is_regular_file(ec))
      names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

ClusterSpec loadClusterPreset(std::string_view name, const std::filesystem::path& presetDir) {
  const std::filesystem::path file = presetDir / (std::string(name) + ".json");
  std::error_code ec;
  if (!validPresetName(name) || !std::filesystem::is_regular_file(file, ec)) {
    invalid("preset", jsonQuote(name),
            fmt::format("one of the presets in {}: {}", presetDir.string(),
                        joinNames(clusterPresetNames(presetDir))));
  }
  const Json document = config::json::parseJson(readFile(file, "cluster preset"), file.string(),
                                                /*allowComments=*/true);
  try {
    return readPreset(name, ObjectReader(document, "cluster"));
  } catch (const ConfigError& e) {
    if (!e.detail())
      throw;
    const ErrorDetail& d = *e.detail();
    throw ConfigError(ErrorDetail{d.path, d.value,
                                  fmt::format("{} (preset file {})", d.expected, file.string())});
  }
}

ClusterSpec parseCluster(const nlohmann::json& cluster, const std::filesystem::path& presetDir,
                         std::vector<std::string>* warnings) {
  const ObjectReader reader(cluster, "cluster",
                            "an object: {\"preset\": NAME} or explicit \"nodes\", "
                            "\"gpus_per_node\", \"intra_node_GBps\", ...");
  ClusterSpec spec;
  if (auto preset = reader.readString("preset")) {
    spec = loadClusterPreset(*preset, presetDir);
  } else {
    constexpr std::string_view kRequired[] = {"nodes", "gpus_per_node", "inter_node_GBps",
                                              "intra_latency_us", "inter_latency_us"};
    requireKeys(reader, kRequired, " (or \"preset\": one of the presets)");
    const auto gpusPerNode = readInt(reader, "gpus_per_node", 1, kMaxGpusPerNode);
    if (*gpusPerNode > 1 && !reader.has("intra_node_GBps")) {
      reader.fail("intra_node_GBps",
                  "the key to be present with more than one GPU per node (or \"preset\")");
    }
  }
  if (auto name = reader.readString("name"))
    spec.name = *name;
  reader.readString("description");
  reader.readString("source");
  readFields(reader, spec);
  validateCluster(spec);
  if (warnings != nullptr)
    reader.warnUnread(*warnings);
  return spec;
}

nlohmann::json clusterToJson(const ClusterSpec& c) {
  return Json{{"name", c.name},
              {"nodes", c.nodes},
              {"gpus_per_node", c.gpusPerNode},
              {"intra_node_GBps", c.intraNodeGBps},
              {"inter_node_GBps", c.interNodeGBps},
              {"intra_latency_us", c.intraLatencyUs},
              {"inter_latency_us", c.interLatencyUs},
              {"op_latency_us", c.opLatencyUs}};
}

}  // namespace stretch::sim
