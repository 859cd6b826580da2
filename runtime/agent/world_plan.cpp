#include "runtime/agent/world_plan.hpp"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/common/check.hpp"
#include "runtime/common/error.hpp"

namespace stretch::agent {

std::string_view toString(NodeSelection selection) noexcept {
  switch (selection) {
    case NodeSelection::WholeNodes:
      return "whole-nodes";
    case NodeSelection::PartialNodes:
      return "partial-nodes";
  }
  return "?";
}

std::optional<WorldPlan> planWorld(std::vector<CandidateNode> candidates,
                                   const WorldSizeRules& rules, NodeSelection selection) {
  std::int64_t total = 0;
  for (const CandidateNode& node : candidates) {
    STRETCH_CHECK_GE(node.slots, 1, "slots of node {}", node.nodeId);
    total += node.slots;
  }
  std::int64_t cap = total;
  if (rules.elastic()) {
    cap = std::min(cap, rules.validGpuCounts().empty() ? 0 : rules.validGpuCounts().back());
  }
  const std::size_t n = candidates.size();
  std::vector<std::int64_t> used(n, 0);
  std::int64_t worldSize = 0;

  if (selection == NodeSelection::PartialNodes) {
    worldSize = rules.largestValidAtMost(cap);
    std::int64_t rest = worldSize;
    for (std::size_t i = 0; i < n && rest > 0; ++i) {
      used[i] = std::min(candidates[i].slots, rest);
      rest -= used[i];
    }
  } else {
    const bool equal = std::all_of(candidates.begin(), candidates.end(), [&](const auto& c) {
      return c.slots == candidates.front().slots;
    });
    if (equal && n > 0) {
      const std::int64_t s = candidates.front().slots;
      for (std::int64_t k = std::min<std::int64_t>(static_cast<std::int64_t>(n), cap / s); k >= 1;
           --k) {
        if (rules.isValid(k * s)) {
          worldSize = k * s;
          std::fill(used.begin(), used.begin() + k, s);
          break;
        }
      }
    } else if (cap > 0) {
      // 0/1 subset sums; first[sum] = the first candidate with which `sum` became reachable, so
      // the subset found for a sum ends as early in the candidate order as possible.
      constexpr std::int64_t kUnreached = -1;
      std::vector<std::int64_t> first(static_cast<std::size_t>(cap) + 1, kUnreached);
      first[0] = static_cast<std::int64_t>(n);
      for (std::size_t i = 0; i < n; ++i) {
        const std::int64_t s = candidates[i].slots;
        for (std::int64_t sum = cap; sum >= s; --sum) {
          const auto at = static_cast<std::size_t>(sum);
          if (first[at] == kUnreached && first[at - static_cast<std::size_t>(s)] != kUnreached) {
            first[at] = static_cast<std::int64_t>(i);
          }
        }
      }
      for (std::int64_t sum = cap; sum >= 1; --sum) {
        if (first[static_cast<std::size_t>(sum)] != kUnreached && rules.isValid(sum)) {
          worldSize = sum;
          break;
        }
      }
      for (std::int64_t rest = worldSize; rest > 0;) {
        const auto i = static_cast<std::size_t>(first[static_cast<std::size_t>(rest)]);
        STRETCH_CHECK_LT(i, n, "subset reconstruction at {}", rest);
        used[i] = candidates[i].slots;
        rest -= candidates[i].slots;
      }
    }
  }
  if (worldSize < 1) {
    return std::nullopt;
  }
  WorldPlan plan;
  plan.worldSize = worldSize;
  plan.used.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (used[i] > 0) {
      plan.used.push_back(
          {std::move(candidates[i].nodeId), candidates[i].slots, used[i], candidates[i].key});
    } else {
      plan.spare.push_back(std::move(candidates[i].nodeId));
    }
  }
  STRETCH_CHECK_EQ(std::accumulate(plan.used.begin(), plan.used.end(), std::int64_t{0},
                                   [](std::int64_t a, const NodeShare& s) { return a + s.used; }),
                   worldSize, "world plan");
  return plan;
}

}  // namespace stretch::agent
