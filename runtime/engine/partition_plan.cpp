#include "runtime/engine/partition_plan.hpp"

#include <algorithm>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/common/error.hpp"
#include "runtime/live/generation.hpp"

namespace stretch::engine {

std::vector<std::int64_t> encodeHeld(const std::vector<HeldCopy>& copies) {
  if (copies.size() > static_cast<std::size_t>(kHeldSlots))
    throw InternalError(
        fmt::format("encodeHeld: {} copies, at most {}", copies.size(), kHeldSlots));
  std::vector<std::int64_t> out(static_cast<std::size_t>(kHeldSlots * kHeldFields), -1);
  for (std::size_t i = 0; i < copies.size(); ++i) {
    const HeldCopy& c = copies[i];
    const std::size_t at = i * kHeldFields;
    out[at] = c.own ? 1 : 0;
    out[at + 1] = c.step;
    out[at + 2] = c.world;
    out[at + 3] = c.partition;
    out[at + 4] = c.stateTensors;
    out[at + 5] = c.slot;
  }
  return out;
}

std::vector<std::vector<HeldCopy>> decodeHeld(const std::vector<std::int64_t>& all, int ranks) {
  const std::size_t perRank = static_cast<std::size_t>(kHeldSlots * kHeldFields);
  if (ranks < 0 || all.size() != perRank * static_cast<std::size_t>(ranks))
    throw InternalError(fmt::format("decodeHeld: {} values for {} rank(s)", all.size(), ranks));
  std::vector<std::vector<HeldCopy>> out(static_cast<std::size_t>(ranks));
  for (std::size_t r = 0; r < out.size(); ++r) {
    for (std::size_t i = 0; i < static_cast<std::size_t>(kHeldSlots); ++i) {
      const std::size_t at = r * perRank + i * kHeldFields;
      if (all[at] < 0)
        continue;  // an empty slot
      out[r].push_back(
          {all[at] == 1, all[at + 1], all[at + 2], all[at + 3], all[at + 4], all[at + 5]});
    }
  }
  return out;
}

namespace {

// The holder of partition `p` of (world, step): an own copy first, then a ward's; lowest rank.
std::optional<PartitionSource> holderOf(const std::vector<std::vector<HeldCopy>>& held,
                                        std::int64_t world, std::int64_t step, std::int64_t p,
                                        std::int64_t stateTensors) {
  for (const bool own : {true, false}) {
    for (std::size_t r = 0; r < held.size(); ++r) {
      for (const HeldCopy& c : held[r]) {
        if (c.own == own && c.world == world && c.step == step && c.partition == p &&
            c.stateTensors == stateTensors)
          return PartitionSource{static_cast<int>(r), c.slot, own};
      }
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<PartitionPlan> planPartitionRecovery(
    const std::vector<std::vector<HeldCopy>>& heldByRank) {
  // Candidate (step, world, tensors) layouts, newest step first (then the larger world).
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::greater<>> candidates;
  for (const auto& copies : heldByRank) {
    for (const HeldCopy& c : copies) {
      if (c.step >= 0 && c.world > 0 && c.partition >= 0 && c.partition < c.world)
        candidates.insert({c.step, c.world, c.stateTensors});
    }
  }
  for (const auto& [step, world, tensors] : candidates) {
    PartitionPlan plan;
    plan.step = step;
    plan.world = world;
    plan.stateTensors = tensors;
    bool complete = true;
    for (std::int64_t p = 0; p < world && complete; ++p) {
      const auto source = holderOf(heldByRank, world, step, p, tensors);
      if (source)
        plan.partitions.push_back(*source);
      else
        complete = false;
    }
    if (!complete)
      continue;
    // The replicated state: any own copy of that step and layout (every owner has one).
    std::optional<PartitionSource> replicated;
    for (const auto& source : plan.partitions) {
      if (source.own && (!replicated || source.rank < replicated->rank))
        replicated = source;
    }
    if (!replicated)
      continue;  // only wards' copies: the counters and scheduler of that step are gone
    plan.replicated = *replicated;
    return plan;
  }
  return std::nullopt;
}

std::string describeLostPartitions(const std::vector<std::vector<HeldCopy>>& heldByRank,
                                   int buddyDistance) {
  const HeldCopy* newest = nullptr;
  for (const auto& copies : heldByRank) {
    for (const HeldCopy& c : copies) {
      if (c.step >= 0 && (newest == nullptr || c.step > newest->step ||
                          (c.step == newest->step && c.world > newest->world)))
        newest = &c;
    }
  }
  if (newest == nullptr)
    return "no rank holds a copy of any partition (no step was completed with copies on)";
  std::vector<std::string> lost;
  for (std::int64_t p = 0; p < newest->world; ++p) {
    if (!holderOf(heldByRank, newest->world, newest->step, p, newest->stateTensors)) {
      // The agent's placement rule (runtime/live/generation.hpp), the one the copies were
      // placed by.
      const std::int64_t distance =
          live::liveBuddyDistance(buddyDistance, static_cast<int>(newest->world));
      lost.push_back(fmt::format("partition {} (held by old ranks {} and {})", p, p,
                                 (p + distance) % newest->world));
    }
  }
  if (lost.empty())
    return fmt::format("step {} of the {}-rank layout has no owner's copy left", newest->step,
                       newest->world);
  return fmt::format("at step {} of the {}-rank layout, {} died with every copy", newest->step,
                     newest->world, fmt::join(lost, ", "));
}

}  // namespace stretch::engine
