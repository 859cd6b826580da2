#pragma once
// What the simulator's scenario tests share: the smallest scenario that parses, and parsing one
// as a file in fixtures/scenarios would be (presets from fixtures/clusters).

#include <nlohmann/json.hpp>

#include "sim/scenario.hpp"
#include "tests/support/test_support.hpp"

namespace stretch::sim::scenario_support {

// 2 nodes of 4 GPUs, micro batch 2, 0.1 s a sample per GPU, one simulated hour.
inline nlohmann::json minimal() {
  return nlohmann::json::parse(R"({
    "cluster": {"nodes": 2, "gpus_per_node": 4, "intra_node_GBps": 100, "inter_node_GBps": 10,
                "intra_latency_us": 1, "inter_latency_us": 5},
    "job": {"config": {"train_micro_batch_size_per_gpu": 2},
            "seconds_per_sample_per_gpu": 0.1, "horizon_hours": 1}
  })");
}

inline Scenario parse(const nlohmann::json& j) {
  ScenarioOptions o;
  o.presetDir = test::fixturePath("clusters");
  return parseScenario(j, test::fixturePath("scenarios"), o);
}

}  // namespace stretch::sim::scenario_support
