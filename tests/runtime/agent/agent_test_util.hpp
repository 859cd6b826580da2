#pragma once
// Helpers for the agent tests: configs with a known elastic plan and readable action lists.

#include <chrono>
#include <string>
#include <variant>
#include <vector>

#include "runtime/agent/state_machine.hpp"

namespace stretch::agent::test {

using namespace std::chrono_literals;

// Elastic v0.1, micro batches [2, 4], max_train_batch_size 16: final batch 16, valid GPU counts
// [1, 2, 4, 8]. At 8 GPUs micro 2 x gas 1; at 4 micro 4 x gas 1; at 2 micro 4 x gas 2.
inline config::DsConfig elasticTraining() {
  config::DsConfig ds;
  ds.elasticity.enabled = true;
  ds.elasticity.version = config::ElasticityVersion::V0_1;
  ds.elasticity.maxTrainBatchSize = 16;
  ds.elasticity.microBatchSizes = {2, 4};
  ds.elasticity.minGpus = 1;
  ds.elasticity.maxGpus = 64;
  return ds;
}

inline AgentConfig agentConfig(std::int64_t minNodes, std::int64_t maxNodes,
                               std::int64_t maxRestarts = 3) {
  AgentConfig c;
  c.minNodes = minNodes;
  c.maxNodes = maxNodes;
  c.maxRestarts = maxRestarts;
  c.training = elasticTraining();
  c.lastCall = 10s;
  c.waitTimeout = 300s;
  return c;
}

inline std::string kindOf(const Action& a) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, StartWorkers>) {
          return "start";
        } else if constexpr (std::is_same_v<T, StopWorkers>) {
          return "stop";
        } else if constexpr (std::is_same_v<T, Wait>) {
          return "wait";
        } else if constexpr (std::is_same_v<T, Finish>) {
          return "finish";
        } else if constexpr (std::is_same_v<T, Fail>) {
          return "fail";
        } else {
          return "log:" + v.event;
        }
      },
      a);
}

// The kinds of the actions, LogEvents left out unless withLogs.
inline std::vector<std::string> kinds(const std::vector<Action>& actions, bool withLogs = false) {
  std::vector<std::string> out;
  for (const Action& a : actions) {
    if (withLogs || !std::holds_alternative<LogEvent>(a)) {
      out.push_back(kindOf(a));
    }
  }
  return out;
}

template <class T>
std::vector<T> only(const std::vector<Action>& actions) {
  std::vector<T> out;
  for (const Action& a : actions) {
    if (const T* v = std::get_if<T>(&a)) {
      out.push_back(*v);
    }
  }
  return out;
}

template <class T>
T single(const std::vector<Action>& actions) {
  const std::vector<T> all = only<T>(actions);
  if (all.size() != 1) {
    throw std::runtime_error("expected exactly one action of the kind, got " +
                             std::to_string(all.size()));
  }
  return all.front();
}

}  // namespace stretch::agent::test
