#pragma once
// Simulated clusters for tests: a preset from fixtures/clusters resized, or one with round
// figures a test can compute costs from by hand.

#include <cstdint>
#include <string>
#include <utility>

#include "sim/cluster.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::test {

// fixtures/clusters/<name>.json with `nodes` nodes.
inline sim::ClusterSpec clusterPreset(const char* name, std::int64_t nodes) {
  sim::ClusterSpec spec = sim::loadClusterPreset(name, fixturePath("clusters"));
  spec.nodes = nodes;
  return spec;
}

// `nodes` x `gpusPerNode` GPUs; bandwidths in GB/s per GPU, latencies in microseconds.
inline sim::ClusterSpec handCluster(std::string name, std::int64_t nodes, std::int64_t gpusPerNode,
                                    double intraGBps, double interGBps, double intraLatencyUs,
                                    double interLatencyUs, double opLatencyUs = 0) {
  return {std::move(name), nodes,          gpusPerNode,    intraGBps,
          interGBps,       intraLatencyUs, interLatencyUs, opLatencyUs};
}

}  // namespace stretch::test
