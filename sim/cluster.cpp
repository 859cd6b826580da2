#include "sim/cluster.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <optional>
#include <span>
#include <sstream>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/common/error.hpp"
#include "sim/json_input.hpp"

namespace stretch::sim {

namespace {

using Json = nlohmann::json;

constexpr std::size_t kMaxWrittenValue = 80;

std::string written(const Json& value) {
  return showJson(value, kMaxWrittenValue);
}

// Where the object being read comes from: a scenario's "cluster" object or a preset file.
struct Source {
  std::string file;  // empty for a scenario object

  [[noreturn]] void fail(std::string_view key, std::string value, std::string expected) const {
    if (!file.empty())
      expected += fmt::format(" (preset file {})", file);
    throw ConfigError(
        ErrorDetail{fmt::format("cluster.{}", key), std::move(value), std::move(expected)});
  }
};

std::optional<std::int64_t> readInt(const Json& object, std::string_view key, std::int64_t min,
                                    std::int64_t max, const Source& source) {
  const auto it = object.find(key);
  if (it == object.end())
    return std::nullopt;
  const std::string expected = fmt::format("an integer in [{}, {}]", min, max);
  std::optional<std::int64_t> value;
  if (it->is_number_unsigned()) {
    const auto u = it->get<std::uint64_t>();
    if (u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      value = static_cast<std::int64_t>(u);
  } else if (it->is_number_integer()) {
    value = it->get<std::int64_t>();
  } else if (it->is_number_float()) {
    const double d = it->get<double>();
    // 2.0 is an integer as far as a user is concerned; 2.5 is not.
    if (std::isfinite(d) && std::trunc(d) == d && std::fabs(d) < 9.0e15)
      value = static_cast<std::int64_t>(d);
  }
  if (!value || *value < min || *value > max)
    source.fail(key, written(*it), expected);
  return value;
}

std::optional<double> readNumber(const Json& object, std::string_view key, bool positive,
                                 std::string_view unit, const Source& source) {
  const auto it = object.find(key);
  if (it == object.end())
    return std::nullopt;
  const std::string expected =
      fmt::format("a finite number {} ({})", positive ? "> 0" : ">= 0", unit);
  if (!it->is_number())
    source.fail(key, written(*it), expected);
  const double value = it->get<double>();
  if (!std::isfinite(value) || value < 0 || (positive && value == 0))
    source.fail(key, written(*it), expected);
  return value;
}

std::optional<std::string> readString(const Json& object, std::string_view key,
                                      const Source& source) {
  const auto it = object.find(key);
  if (it == object.end())
    return std::nullopt;
  if (!it->is_string())
    source.fail(key, written(*it), "a string");
  return it->get<std::string>();
}

// Reads every numeric field present in `object` into `spec`.
void readFields(const Json& object, ClusterSpec& spec, const Source& source) {
  if (auto v = readInt(object, "nodes", 1, kMaxClusterNodes, source))
    spec.nodes = *v;
  if (auto v = readInt(object, "gpus_per_node", 1, kMaxGpusPerNode, source))
    spec.gpusPerNode = *v;
  if (auto v = readNumber(object, "intra_node_GBps", false, "GB/s per GPU", source))
    spec.intraNodeGBps = *v;
  if (auto v = readNumber(object, "inter_node_GBps", true, "GB/s per GPU", source))
    spec.interNodeGBps = *v;
  if (auto v = readNumber(object, "intra_latency_us", false, "microseconds per hop", source))
    spec.intraLatencyUs = *v;
  if (auto v = readNumber(object, "inter_latency_us", false, "microseconds per hop", source))
    spec.interLatencyUs = *v;
  if (auto v = readNumber(object, "op_latency_us", false, "microseconds per collective", source))
    spec.opLatencyUs = *v;
}

void requireKeys(const Json& object, std::span<const std::string_view> keys, const Source& source,
                 std::string_view alternative) {
  for (std::string_view key : keys) {
    if (!object.contains(key))
      source.fail(key, "missing", fmt::format("the key to be present{}", alternative));
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

void validateWith(const ClusterSpec& c, const Source& source) {
  if (c.nodes < 1 || c.nodes > kMaxClusterNodes)
    source.fail("nodes", std::to_string(c.nodes),
                fmt::format("an integer in [1, {}]", kMaxClusterNodes));
  if (c.gpusPerNode < 1 || c.gpusPerNode > kMaxGpusPerNode)
    source.fail("gpus_per_node", std::to_string(c.gpusPerNode),
                fmt::format("an integer in [1, {}]", kMaxGpusPerNode));
  auto number = [&](std::string_view key, double v, bool positive, std::string_view unit) {
    if (!std::isfinite(v) || v < 0 || (positive && v == 0))
      source.fail(key, fmt::format("{}", v),
                  fmt::format("a finite number {} ({})", positive ? "> 0" : ">= 0", unit));
  };
  number("intra_node_GBps", c.intraNodeGBps, c.gpusPerNode > 1,
         c.gpusPerNode > 1 ? "GB/s per GPU; 0 only with one GPU per node" : "GB/s per GPU");
  number("inter_node_GBps", c.interNodeGBps, true, "GB/s per GPU");
  number("intra_latency_us", c.intraLatencyUs, false, "microseconds per hop");
  number("inter_latency_us", c.interLatencyUs, false, "microseconds per hop");
  number("op_latency_us", c.opLatencyUs, false, "microseconds per collective");
}

}  // namespace

void validateCluster(const ClusterSpec& cluster) {
  validateWith(cluster, Source{});
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
  const Source scenario;
  const std::filesystem::path file = presetDir / (std::string(name) + ".json");
  std::error_code ec;
  if (!validPresetName(name) || !std::filesystem::is_regular_file(file, ec)) {
    scenario.fail("preset", fmt::format("\"{}\"", name),
                  fmt::format("one of the presets in {}: {}", presetDir.string(),
                              joinNames(clusterPresetNames(presetDir))));
  }
  const Source source{file.string()};
  std::ifstream in(file, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (!in.good() && !in.eof())
    throw IoError(fmt::format("cannot read cluster preset {}", file.string()));
  Json document;
  try {
    document = Json::parse(buffer.str(), nullptr, /*allow_exceptions=*/true,
                           /*ignore_comments=*/true);
  } catch (const Json::parse_error& e) {
    throw ConfigError(fmt::format("{}: invalid JSON: {}", file.string(), e.what()));
  }
  if (!document.is_object())
    throw ConfigError(ErrorDetail{file.string(), written(document), "a JSON object"});

  static constexpr std::string_view kKnown[] = {"name",
                                                "description",
                                                "source",
                                                "nodes",
                                                "gpus_per_node",
                                                "intra_node_GBps",
                                                "inter_node_GBps",
                                                "intra_latency_us",
                                                "inter_latency_us",
                                                "op_latency_us"};
  for (const auto& [key, value] : document.items()) {
    if (std::find(std::begin(kKnown), std::end(kKnown), key) == std::end(kKnown))
      source.fail(key, written(value),
                  "a cluster preset key (name, description, source, nodes, gpus_per_node, "
                  "intra_node_GBps, inter_node_GBps, intra_latency_us, inter_latency_us, "
                  "op_latency_us)");
  }
  static constexpr std::string_view kRequired[] = {"name",
                                                   "source",
                                                   "gpus_per_node",
                                                   "intra_node_GBps",
                                                   "inter_node_GBps",
                                                   "intra_latency_us",
                                                   "inter_latency_us"};
  requireKeys(document, kRequired, source, "");

  ClusterSpec spec;
  spec.name = *readString(document, "name", source);
  if (spec.name != name)
    source.fail("name", written(document["name"]), fmt::format("\"{}\" (the file name)", name));
  readString(document, "description", source);
  if (readString(document, "source", source)->empty())
    source.fail("source", "\"\"", "where the figures come from");
  readFields(document, spec, source);
  validateWith(spec, source);
  return spec;
}

ClusterSpec parseCluster(const nlohmann::json& cluster, const std::filesystem::path& presetDir,
                         std::vector<std::string>* warnings) {
  const Source source;
  if (!cluster.is_object()) {
    throw ConfigError(ErrorDetail{"cluster", written(cluster),
                                  "an object: {\"preset\": NAME} or explicit \"nodes\", "
                                  "\"gpus_per_node\", \"intra_node_GBps\", ..."});
  }
  static constexpr std::string_view kKnown[] = {"preset",
                                                "name",
                                                "description",
                                                "source",
                                                "nodes",
                                                "gpus_per_node",
                                                "intra_node_GBps",
                                                "inter_node_GBps",
                                                "intra_latency_us",
                                                "inter_latency_us",
                                                "op_latency_us"};
  if (warnings != nullptr) {
    for (const auto& [key, value] : cluster.items()) {
      if (std::find(std::begin(kKnown), std::end(kKnown), key) == std::end(kKnown))
        warnings->push_back(fmt::format("cluster.{}: unknown key, ignored", key));
    }
  }

  ClusterSpec spec;
  if (auto preset = readString(cluster, "preset", source)) {
    spec = loadClusterPreset(*preset, presetDir);
  } else {
    constexpr std::string_view kRequired[] = {"nodes", "gpus_per_node", "inter_node_GBps",
                                              "intra_latency_us", "inter_latency_us"};
    requireKeys(cluster, kRequired, source, " (or \"preset\": one of the presets)");
    const auto gpusPerNode = readInt(cluster, "gpus_per_node", 1, kMaxGpusPerNode, source);
    if (*gpusPerNode > 1 && !cluster.contains("intra_node_GBps")) {
      source.fail("intra_node_GBps", "missing",
                  "the key to be present with more than one GPU per node (or \"preset\")");
    }
  }
  if (auto name = readString(cluster, "name", source))
    spec.name = *name;
  readString(cluster, "description", source);
  readString(cluster, "source", source);
  readFields(cluster, spec, source);
  validateCluster(spec);
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
