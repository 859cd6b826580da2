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
      worldSize =
          rules.largestValidMultipleAtMost(s, std::min(static_cast<std::int64_t>(n) * s, cap));
      std::fill(used.begin(), used.begin() + worldSize / s, s);
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

std::optional<MemberPlan> planMembers(const NodeSequence& candidates, const WorldSizeRules& rules,
                                      NodeSelection selection) {
  STRETCH_CHECK_EQ(candidates.usedSum(), candidates.slotSum(),
                   "planMembers: every candidate's `used` must be its slots");
  const std::int64_t total = candidates.slotSum();
  std::int64_t cap = total;
  if (rules.elastic()) {
    cap = std::min(cap, rules.validGpuCounts().empty() ? 0 : rules.validGpuCounts().back());
  }
  const auto n = static_cast<std::int64_t>(candidates.size());
  const bool equal = n > 0 && candidates.minSlots() == candidates.maxSlots();
  if (selection == NodeSelection::WholeNodes && !equal) {
    if (n == 0) {
      return std::nullopt;
    }
    // Mixed node sizes: the subset sums over the list.
    std::vector<CandidateNode> list;
    list.reserve(candidates.size());
    for (auto it = candidates.begin(); it != candidates.end(); ++it) {
      list.push_back({it.entry().nodeId, it.entry().slots, it.entry().key});
    }
    std::optional<WorldPlan> plan = planWorld(std::move(list), rules, selection);
    if (!plan) {
      return std::nullopt;
    }
    std::vector<NodeEntry> used;
    std::vector<NodeEntry> spare;
    used.reserve(plan->used.size());
    std::size_t next = 0;
    for (auto it = candidates.begin(); it != candidates.end(); ++it) {
      const NodeEntry& e = it.entry();
      if (next < plan->used.size() && plan->used[next].key == e.key) {
        used.push_back(NodeEntry{e.nodeId, e.slots, plan->used[next].used, e.key});
        ++next;
      } else {
        spare.push_back(e);
      }
    }
    return MemberPlan{plan->worldSize, NodeSequence::fromSorted(std::move(used)),
                      NodeSequence::fromSorted(std::move(spare))};
  }
  std::int64_t worldSize = 0;
  std::size_t count = 0;
  if (selection == NodeSelection::PartialNodes) {
    worldSize = rules.largestValidAtMost(cap);
    count = candidates.prefixWithSlots(worldSize);
  } else {
    const std::int64_t s = candidates.minSlots();
    worldSize = rules.largestValidMultipleAtMost(s, std::min(n * s, cap));
    count = static_cast<std::size_t>(worldSize / s);
  }
  if (worldSize < 1) {
    return std::nullopt;
  }
  auto [used, spare] = candidates.split(count);
  // Whole nodes run a worker on every slot; the last node of a partial layout may not.
  const std::int64_t extra = used.slotSum() - worldSize;
  if (extra > 0) {
    NodeEntry last = used.entry(used.size() - 1);
    last.used = last.slots - extra;
    used = used.replaced(used.size() - 1, std::move(last));
  }
  STRETCH_CHECK_EQ(used.usedSum(), worldSize, "member plan");
  return MemberPlan{worldSize, std::move(used), std::move(spare)};
}

}  // namespace stretch::agent
