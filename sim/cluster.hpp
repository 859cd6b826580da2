#pragma once
// The simulator's cluster model: identical nodes of `gpusPerNode` GPUs, each GPU with a per-GPU
// intra-node (NVLink / PCIe) bandwidth and a per-GPU inter-node (NIC) bandwidth, and a latency
// per hop on each kind of link. The collective cost model (sim/collective_cost.hpp) turns these
// figures into seconds per collective.
//
// Units: bandwidths in GB/s = 1e9 bytes per second per direction (as nccl-tests prints them),
// latencies in microseconds. "Per GPU" inter-node bandwidth is the node's NIC bandwidth divided
// by its GPUs: a DGX-H100 with 8 x 400 Gb/s NICs has 8 x 50 GB/s / 8 GPUs = 50 GB/s per GPU.
//
// Presets live in fixtures/clusters/<name>.json, one object per file:
//   {"name": "dgx-h100", "description": "...", "source": "where the figures come from",
//    "gpus_per_node": 8, "intra_node_GBps": 450, "inter_node_GBps": 50,
//    "intra_latency_us": 0.6, "inter_latency_us": 2.7, "op_latency_us": 6.6, "nodes": 1}
// "op_latency_us" (a fixed cost per collective, e.g. kernel launch; NCCL's "base latency") is
// optional and defaults to 0; "nodes" is the preset's default node count.

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace stretch::sim {

struct ClusterSpec {
  std::string name = "custom";
  std::int64_t nodes = 1;
  std::int64_t gpusPerNode = 8;
  double intraNodeGBps = 0;   // per-GPU intra-node (NVLink) bandwidth, GB/s = 1e9 B/s
  double interNodeGBps = 0;   // per-GPU inter-node (NIC) bandwidth, GB/s
  double intraLatencyUs = 0;  // per hop
  double interLatencyUs = 0;
  double opLatencyUs = 0;  // per collective, whatever its size (launch, synchronisation)
  std::int64_t gpus() const noexcept { return nodes * gpusPerNode; }
};

// Limits parseCluster and validateCluster enforce (beyond them the figures are typos).
inline constexpr std::int64_t kMaxClusterNodes = 10'000'000;
inline constexpr std::int64_t kMaxGpusPerNode = 1024;
// Bandwidths (GB/s per GPU, or 0 for intra-node with one GPU per node) and latencies
// (microseconds), bounded so that every transfer time derived from them stays finite.
inline constexpr double kMinClusterGBps = 1e-6;
inline constexpr double kMaxClusterGBps = 1e9;
inline constexpr double kMaxClusterLatencyUs = 1e12;

// Throws stretch::ConfigError naming "cluster.<key>", the value and what was expected when a
// field is out of range: nodes in [1, kMaxClusterNodes], gpusPerNode in [1, kMaxGpusPerNode],
// bandwidths finite and > 0 (intraNodeGBps may be 0 with one GPU per node), latencies finite
// and >= 0.
void validateCluster(const ClusterSpec& cluster);

// Reads presetDir/<name>.json (relaxed JSON: comments allowed). Throws stretch::ConfigError
// naming "cluster.preset" and the available names when there is no such preset, or naming
// "cluster.<key>" (and the file) when the file is malformed; "name" in the file must equal
// <name>.
ClusterSpec loadClusterPreset(std::string_view name, const std::filesystem::path& presetDir);

// The preset names in presetDir (file stems of *.json), sorted; empty when the folder is missing.
std::vector<std::string> clusterPresetNames(const std::filesystem::path& presetDir);

// A scenario's "cluster" object: {"preset": "dgx-h100", optional "nodes"/"gpus_per_node"/...
// overrides} or all explicit fields {"nodes", "gpus_per_node", "intra_node_GBps",
// "inter_node_GBps", "intra_latency_us", "inter_latency_us"} (plus optional "op_latency_us",
// "name"). Unknown keys are appended to `warnings` as "cluster.<key>: unknown key, ignored"
// (not an error). Throws stretch::ConfigError naming "cluster.<key>" otherwise.
ClusterSpec parseCluster(const nlohmann::json& cluster, const std::filesystem::path& presetDir,
                         std::vector<std::string>* warnings = nullptr);

// The spec as a JSON object with the preset keys (what parseCluster reads back).
nlohmann::json clusterToJson(const ClusterSpec& cluster);

}  // namespace stretch::sim
