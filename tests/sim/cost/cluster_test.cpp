// Cluster presets (fixtures/clusters/*.json) and the scenario "cluster" object: every preset
// loads and carries a source, overrides and explicit fields parse, unknown keys warn, and every
// bad value is an error naming cluster.<key>, the value and what was expected.

#include "sim/cluster.hpp"

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "runtime/common/error.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::sim {
namespace {

using Json = nlohmann::json;

std::filesystem::path presetDir() {
  return test::fixturePath("clusters");
}

TEST(ClusterPresets, EveryPresetLoadsValidatesAndNamesItsSource) {
  const auto names = clusterPresetNames(presetDir());
  for (const char* required : {"dgx-h100", "dgx-a100", "cloud-a10g-4x", "cpu-loopback"})
    EXPECT_NE(std::find(names.begin(), names.end(), required), names.end()) << required;
  for (const auto& name : names) {
    SCOPED_TRACE(name);
    const ClusterSpec spec = loadClusterPreset(name, presetDir());
    EXPECT_EQ(spec.name, name);
    EXPECT_NO_THROW(validateCluster(spec));
    std::ifstream in(presetDir() / (name + ".json"));
    const Json doc = Json::parse(in, nullptr, true, true);
    ASSERT_TRUE(doc.contains("source"));
    EXPECT_GT(doc["source"].get<std::string>().size(), 20u) << "a source that says something";
    EXPECT_TRUE(doc.contains("description"));
    // What sim/collective_cost.hpp's monotonicity in ranks assumes of every preset.
    EXPECT_LE(static_cast<double>(spec.gpusPerNode) * spec.interNodeGBps, spec.intraNodeGBps);
    EXPECT_GE(spec.interLatencyUs, spec.intraLatencyUs);
  }
}

TEST(ClusterPresets, DgxFiguresAreTheLineRates) {
  const ClusterSpec h100 = loadClusterPreset("dgx-h100", presetDir());
  EXPECT_EQ(h100.gpusPerNode, 8);
  EXPECT_DOUBLE_EQ(h100.intraNodeGBps, 450);
  EXPECT_DOUBLE_EQ(h100.interNodeGBps, 400.0 / 8);  // 8 x 400 Gb/s per node, per GPU
  EXPECT_GT(h100.interLatencyUs, h100.intraLatencyUs);
  const ClusterSpec a100 = loadClusterPreset("dgx-a100", presetDir());
  EXPECT_DOUBLE_EQ(a100.intraNodeGBps, 300);
  EXPECT_DOUBLE_EQ(a100.interNodeGBps, 200.0 / 8);
}

TEST(ClusterPresets, UnknownOrUnsafePresetNamesListTheAvailableOnes) {
  for (const char* name : {"dgx-h1000", "../clusters/dgx-h100", "/etc/passwd", ""}) {
    SCOPED_TRACE(name);
    const std::string message =
        test::errorOf<ConfigError>([&] { loadClusterPreset(name, presetDir()); });
    EXPECT_NE(message.find("cluster.preset"), std::string::npos) << message;
    EXPECT_NE(message.find("dgx-h100"), std::string::npos) << message;  // the list
  }
}

TEST(ClusterPresets, MalformedPresetFilesAreErrorsNamingKeyAndFile) {
  test::TempDir dir("sim-cluster");
  ASSERT_FALSE(dir.path().empty());
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir.path() / (name + ".json")) << text;
  };
  const std::string good =
      R"("source": "test", "gpus_per_node": 2, "intra_node_GBps": 10, "inter_node_GBps": 1,
         "intra_latency_us": 1, "inter_latency_us": 5)";
  write("ok", R"({"name": "ok", // comments are allowed
                  )" +
                  good + "}");
  EXPECT_EQ(loadClusterPreset("ok", dir.path()).gpusPerNode, 2);
  EXPECT_EQ(clusterPresetNames(dir.path()), std::vector<std::string>{"ok"});

  write("renamed", R"({"name": "other", )" + good + "}");
  write("typo", R"({"name": "typo", "gpu_per_node": 3, )" + good + "}");
  write("nosource", R"({"name": "nosource", "gpus_per_node": 2, "intra_node_GBps": 10,
                        "inter_node_GBps": 1, "intra_latency_us": 1, "inter_latency_us": 5})");
  write("negative", R"({"name": "negative", "source": "s", "gpus_per_node": 2,
                        "intra_node_GBps": 10, "inter_node_GBps": -1, "intra_latency_us": 1,
                        "inter_latency_us": 5})");
  write("broken", R"({"name": "broken",)");
  const struct {
    const char* preset;
    const char* mentions;
  } cases[] = {{"renamed", "cluster.name"},
               {"typo", "cluster.gpu_per_node"},
               {"nosource", "cluster.source"},
               {"negative", "cluster.inter_node_GBps = -1"},
               {"broken", "invalid JSON"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.preset);
    const std::string message =
        test::errorOf<ConfigError>([&] { loadClusterPreset(c.preset, dir.path()); });
    EXPECT_NE(message.find(c.mentions), std::string::npos) << message;
    EXPECT_NE(message.find(c.preset), std::string::npos) << message;  // names the file
  }
}

TEST(ParseCluster, PresetWithOverrides) {
  std::vector<std::string> warnings;
  const ClusterSpec spec =
      parseCluster(Json{{"preset", "dgx-h100"}, {"nodes", 2048}, {"inter_node_GBps", 25}},
                   presetDir(), &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(spec.name, "dgx-h100");
  EXPECT_EQ(spec.nodes, 2048);
  EXPECT_EQ(spec.gpus(), 16384);
  EXPECT_DOUBLE_EQ(spec.intraNodeGBps, 450);
  EXPECT_DOUBLE_EQ(spec.interNodeGBps, 25);
}

TEST(ParseCluster, ExplicitFieldsAndUnknownKeysWarn) {
  std::vector<std::string> warnings;
  const ClusterSpec spec =
      parseCluster(Json::parse(R"({"nodes": 4, "gpus_per_node": 8, "intra_node_GBps": 300,
                                   "inter_node_GBps": 25, "intra_latency_us": 0.5,
                                   "inter_latency_us": 3, "topology": "fat-tree"})"),
                   presetDir(), &warnings);
  EXPECT_EQ(spec.name, "custom");
  EXPECT_EQ(spec.gpus(), 32);
  EXPECT_DOUBLE_EQ(spec.intraLatencyUs, 0.5);
  EXPECT_DOUBLE_EQ(spec.opLatencyUs, 0);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("cluster.topology"), std::string::npos) << warnings[0];
  // Without a warnings sink an unknown key is still not an error.
  EXPECT_NO_THROW(parseCluster(Json{{"preset", "dgx-a100"}, {"colour", "green"}}, presetDir()));
}

TEST(ParseCluster, OneGpuPerNodeNeedsNoIntraNodeBandwidth) {
  const ClusterSpec spec = parseCluster(Json{{"nodes", 3},
                                             {"gpus_per_node", 1},
                                             {"inter_node_GBps", 1},
                                             {"intra_latency_us", 0},
                                             {"inter_latency_us", 40}},
                                        presetDir());
  EXPECT_EQ(spec.gpus(), 3);
  ClusterSpec eight = spec;
  eight.gpusPerNode = 8;
  EXPECT_NE(
      test::errorOf<ConfigError>([&] { validateCluster(eight); }).find("cluster.intra_node_GBps"),
      std::string::npos);
}

TEST(ParseCluster, BadValuesNameKeyValueAndExpectation) {
  const Json base = Json::parse(R"({"nodes": 4, "gpus_per_node": 8, "intra_node_GBps": 300,
                                    "inter_node_GBps": 25, "intra_latency_us": 0.5,
                                    "inter_latency_us": 3})");
  const struct {
    const char* key;
    Json value;
    const char* mentions;
  } cases[] = {
      {"nodes", 0, "cluster.nodes = 0: expected an integer in [1, "},
      {"nodes", 2.5, "cluster.nodes = 2.5"},
      {"nodes", "4", "cluster.nodes = \"4\""},
      {"gpus_per_node", 100000, "cluster.gpus_per_node = 100000"},
      {"intra_node_GBps", -3, "cluster.intra_node_GBps = -3: expected a finite number"},
      {"inter_node_GBps", 0, "cluster.inter_node_GBps = 0: expected a finite number > 0"},
      {"inter_latency_us", -1, "cluster.inter_latency_us = -1"},
      {"op_latency_us", "fast", "cluster.op_latency_us"},
      {"preset", 7, "cluster.preset = 7: expected a string"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.key);
    Json cluster = base;
    cluster[c.key] = c.value;
    const std::string message =
        test::errorOf<ConfigError>([&] { parseCluster(cluster, presetDir()); });
    EXPECT_NE(message.find(c.mentions), std::string::npos) << message;
  }
  // An integral float is an integer.
  Json integral = base;
  integral["nodes"] = 4.0;
  EXPECT_EQ(parseCluster(integral, presetDir()).nodes, 4);
}

TEST(ParseCluster, MissingFieldsAndNonObjects) {
  Json cluster = Json::parse(R"({"nodes": 4, "gpus_per_node": 8, "intra_node_GBps": 300,
                                 "intra_latency_us": 0.5, "inter_latency_us": 3})");
  std::string message = test::errorOf<ConfigError>([&] { parseCluster(cluster, presetDir()); });
  EXPECT_NE(message.find("cluster.inter_node_GBps"), std::string::npos) << message;
  EXPECT_NE(message.find("preset"), std::string::npos) << message;  // says the alternative
  message = test::errorOf<ConfigError>([&] { parseCluster(Json::array({1, 2}), presetDir()); });
  EXPECT_NE(message.find("cluster = [1,2]: expected an object"), std::string::npos) << message;
  message = test::errorOf<ConfigError>([&] {
    parseCluster(Json{{"preset", "nope"}}, presetDir());
  });
  EXPECT_NE(message.find("cluster.preset = \"nope\""), std::string::npos) << message;
}

TEST(ParseCluster, ToJsonRoundTrips) {
  ClusterSpec spec = loadClusterPreset("cloud-a10g-4x", presetDir());
  spec.nodes = 12;
  const ClusterSpec back = parseCluster(clusterToJson(spec), presetDir());
  EXPECT_EQ(back.name, spec.name);
  EXPECT_EQ(back.nodes, spec.nodes);
  EXPECT_EQ(back.gpusPerNode, spec.gpusPerNode);
  EXPECT_EQ(back.intraNodeGBps, spec.intraNodeGBps);
  EXPECT_EQ(back.interNodeGBps, spec.interNodeGBps);
  EXPECT_EQ(back.intraLatencyUs, spec.intraLatencyUs);
  EXPECT_EQ(back.interLatencyUs, spec.interLatencyUs);
  EXPECT_EQ(back.opLatencyUs, spec.opLatencyUs);
}

TEST(ParseCluster, MissingPresetFolderListsNothingButStillNamesTheKey) {
  EXPECT_TRUE(clusterPresetNames("/nonexistent/stretch/clusters").empty());
  const std::string message = test::errorOf<ConfigError>(
      [&] { loadClusterPreset("dgx-h100", "/nonexistent/stretch/clusters"); });
  EXPECT_NE(message.find("cluster.preset"), std::string::npos) << message;
}

}  // namespace
}  // namespace stretch::sim
