#include "runtime/agent/live_plan.hpp"

#include <algorithm>
#include <set>
#include <string_view>
#include <tuple>

#include <fmt/format.h>

#include "runtime/live/generation.hpp"

namespace stretch::agent {

namespace {

std::string placeText(const WorkerPlace& p) {
  return fmt::format("{}:{}", p.nodeId, p.localRank);
}

std::string placesText(const std::vector<WorkerPlace>& places) {
  std::string out;
  for (const auto& p : places) {
    if (!out.empty())
      out += ',';
    out += placeText(p);
  }
  return out;
}

// Ids for interimMembers / interimDonors: positions in the group, then the places it does not
// hold, in the order met.
struct Ids {
  std::vector<WorkerPlace> known;
  std::map<WorkerPlace, int> index;  // O(log n) a look-up: groups run to 10^5 workers
  std::vector<int> group;
  explicit Ids(const std::vector<WorkerPlace>& g) : known(g) {
    for (std::size_t i = 0; i < g.size(); ++i) {
      group.push_back(static_cast<int>(i));
      index.emplace(g[i], static_cast<int>(i));
    }
  }
  int of(const WorkerPlace& p) {
    const auto [at, added] = index.emplace(p, static_cast<int>(known.size()));
    if (added)
      known.push_back(p);
    return at->second;
  }
  std::vector<int> of(const std::vector<WorkerPlace>& list) {
    std::vector<int> out;
    for (const auto& p : list)
      out.push_back(of(p));
    return out;
  }
  std::vector<WorkerPlace> places(const std::vector<int>& ids) const {
    std::vector<WorkerPlace> out;
    for (const int id : ids)
      out.push_back(known[static_cast<std::size_t>(id)]);
    return out;
  }
};

// `list` in the order of `next`'s nodes (local ranks ascending), then any on other nodes.
std::vector<WorkerPlace> inRankOrder(std::vector<WorkerPlace> list, const StartWorkers& next) {
  std::map<std::string_view, std::size_t> nodeRank;
  std::size_t i = 0;
  for (auto it = next.nodes.begin(); it != next.nodes.end(); ++it, ++i)
    nodeRank.emplace(it.entry().nodeId, i);
  const auto key = [&](const WorkerPlace& p) {
    const auto at = nodeRank.find(p.nodeId);
    return std::tuple(at == nodeRank.end() ? nodeRank.size() : at->second,
                      std::string_view(p.nodeId), p.localRank);
  };
  std::sort(list.begin(), list.end(),
            [&](const WorkerPlace& a, const WorkerPlace& b) { return key(a) < key(b); });
  return list;
}

// Positions in `members` by id (ids are small non-negative integers): members.size() for an id
// that is not a member. O(members + largest id).
std::vector<std::size_t> positionsOf(const std::vector<int>& members,
                                     const std::vector<int>& others) {
  int largest = -1;
  for (const int id : members)
    largest = std::max(largest, id);
  for (const int id : others)
    largest = std::max(largest, id);
  std::vector<std::size_t> at(static_cast<std::size_t>(largest + 1), members.size());
  for (std::size_t r = members.size(); r-- > 0;)
    at[static_cast<std::size_t>(members[r])] = r;
  return at;
}

}  // namespace

std::optional<std::string> whyStateIsLost(GroupLoss loss) {
  std::sort(loss.lost.begin(), loss.lost.end());
  loss.lost.erase(std::unique(loss.lost.begin(), loss.lost.end()), loss.lost.end());
  if (loss.world <= 0 || static_cast<std::int64_t>(loss.lost.size()) >= loss.world)
    return "every worker of the group that trained the last completed step is gone";
  if (!loss.partitionCopies || loss.world < 2)
    return std::nullopt;  // every survivor holds the whole state
  const std::int64_t d =
      live::liveBuddyDistance(static_cast<int>(loss.copyDistance), static_cast<int>(loss.world));
  for (const std::int64_t p : loss.lost) {
    const std::int64_t copy = (p + d) % loss.world;
    if (std::binary_search(loss.lost.begin(), loss.lost.end(), copy)) {
      return fmt::format("ZeRO partition {} was lost with its copy (ranks {} and {} of {})", p, p,
                         copy, loss.world);
    }
  }
  return std::nullopt;
}

std::vector<WorkerPlace> placesOf(const StartWorkers& start) {
  std::vector<WorkerPlace> out;
  for (const NodeAssignment& n : start.nodes) {
    for (std::int64_t local = 0; local < n.localWorldSize; ++local)
      out.push_back({n.nodeId, local});
  }
  return out;
}

LivePlan planLiveRecovery(const LiveSituation& s, const StartWorkers& next,
                          const elasticity::WorldSizeRules& rules) {
  LivePlan plan;
  std::map<std::string, std::int64_t> places;  // node -> workers it runs in `next`
  for (const NodeAssignment& n : next.nodes)
    places[n.nodeId] = n.localWorldSize;
  const auto hasPlace = [&](const WorkerPlace& p) {
    const auto it = places.find(p.nodeId);
    return it != places.end() && p.localRank < it->second;
  };

  std::vector<WorkerPlace> kept;     // capable, with a place in `next`
  std::vector<WorkerPlace> leftOut;  // capable, without one
  for (const RunningWorker& w : s.running) {
    if (!w.capable && !w.joiner) {
      plan.reason = fmt::format("worker {} of node {} (pid {}) cannot continue live",
                                w.place.localRank, w.place.nodeId, w.pid);
      return plan;
    }
    if (w.capable)
      (hasPlace(w.place) ? kept : leftOut).push_back(w.place);
  }
  if (kept.empty()) {
    plan.reason = fmt::format(
        "no running worker that can continue live has a place in generation {}", next.generation);
    return plan;
  }
  // The state: the group's ranks without a capable running worker are gone.
  if (!s.group.empty()) {
    std::set<WorkerPlace> alive(kept.begin(), kept.end());
    alive.insert(leftOut.begin(), leftOut.end());
    GroupLoss loss{
        static_cast<std::int64_t>(s.group.size()), {}, s.copyDistance, s.partitionCopies};
    for (std::size_t r = 0; r < s.group.size(); ++r) {
      if (!alive.contains(s.group[r]))
        loss.lost.push_back(static_cast<std::int64_t>(r));
    }
    if (auto why = whyStateIsLost(loss)) {
      plan.reason = std::move(*why);
      return plan;
    }
  }

  plan.live = true;
  std::sort(kept.begin(), kept.end());
  std::vector<WorkerPlace> sortedGroup = s.group;
  std::sort(sortedGroup.begin(), sortedGroup.end());
  const bool groupIntact = kept == sortedGroup;  // every worker of the group goes on
  std::int64_t joining = 0;
  for (const NodeAssignment& n : next.nodes) {
    for (std::int64_t local = 0; local < n.localWorldSize; ++local) {
      const WorkerPlace p{n.nodeId, local};
      if (std::binary_search(kept.begin(), kept.end(), p)) {
        plan.keep[n.nodeId].push_back(local);
      } else {
        plan.join[n.nodeId].push_back(local);
        ++joining;
      }
    }
  }
  kept = inRankOrder(kept, next);
  // Donors only where the workers keep ZeRO 1/2 copies: a ZeRO 0 rank holds the whole state.
  std::vector<WorkerPlace> everyone;
  if (s.partitionCopies) {
    everyone = kept;
    everyone.insert(everyone.end(), leftOut.begin(), leftOut.end());
  }
  const int distance = static_cast<int>(s.copyDistance);
  const auto donorsOf = [&](const std::vector<WorkerPlace>& chosen) {
    Ids ids(s.group);
    const auto survivorIds = ids.of(everyone);
    const auto chosenIds = ids.of(chosen);
    return inRankOrder(ids.places(interimDonors(ids.group, survivorIds, chosenIds, distance)),
                       next);
  };
  if (joining == 0) {
    const auto members = placesOf(next);
    plan.publish = LiveMembers{members, next.batch, donorsOf(members)};
    plan.reason =
        fmt::format("{} running worker(s) go on in generation {}", members.size(), next.generation);
  } else {
    if (!groupIntact) {
      // Workers were lost: the survivors go on alone while the joiners start, as many of them as
      // make a valid world size, chosen to keep every ZeRO partition.
      for (auto n = static_cast<std::int64_t>(kept.size()); n >= 1; --n) {
        if (const auto batch = rules.batchFor(n)) {
          Ids ids(s.group);
          const auto keptIds = ids.of(kept);
          const auto interim = inRankOrder(
              ids.places(interimMembers(ids.group, keptIds, distance, static_cast<std::size_t>(n))),
              next);
          plan.publish = LiveMembers{interim, *batch, donorsOf(interim)};
          break;
        }
      }
    }
    plan.awaitJoiners = true;
    plan.reason = fmt::format("{} running worker(s) go on{}; {} join generation {}", kept.size(),
                              plan.publish ? fmt::format(" ({} of them in an interim world)",
                                                         plan.publish->members.size())
                                           : std::string(" once the joiners are ready"),
                              joining, next.generation);
  }
  std::set<WorkerPlace> staying(kept.begin(), kept.end());
  if (plan.publish) {
    for (const WorkerPlace& d : plan.publish->donors) {
      staying.insert(d);
      if (!hasPlace(d))
        plan.releaseAfterDonating.push_back(d);
    }
    if (!plan.publish->donors.empty())
      plan.reason += fmt::format("; donors {}", placesText(plan.publish->donors));
  }
  for (const RunningWorker& w : s.running) {
    if (!staying.contains(w.place))
      plan.stop.push_back(w.place);
  }
  std::sort(plan.stop.begin(), plan.stop.end());
  return plan;
}

std::vector<int> interimMembers(const std::vector<int>& members, std::vector<int> survivors,
                                int distance, std::size_t count) {
  // Survivors in rank order (their position in `members`).
  const std::vector<std::size_t> position = positionsOf(members, survivors);
  const auto rankOf = [&](int id) { return position[static_cast<std::size_t>(id)]; };
  std::sort(survivors.begin(), survivors.end(),
            [&](int a, int b) { return rankOf(a) < rankOf(b); });
  count = std::min(count, survivors.size());
  const std::vector<int> first(survivors.begin(),
                               survivors.begin() + static_cast<std::ptrdiff_t>(count));
  const int world = static_cast<int>(members.size());
  if (world < 2 || count == 0 || count == survivors.size())
    return first;
  const int d = live::liveBuddyDistance(distance, world);
  const auto covers = [&](const std::vector<bool>& chosen) {
    for (int p = 0; p < world; ++p) {
      if (!chosen[static_cast<std::size_t>(p)] &&
          !chosen[static_cast<std::size_t>((p + d) % world)])
        return false;
    }
    return true;
  };
  // Choices in lexicographic order of survivor positions; a node has few workers, and the
  // search stops after a bounded number of choices (then the first `count` stay): 100,000, or
  // fewer in large groups, so that a choice costs at most about 4 million rank checks
  // (milliseconds, at the simulator's 10^5 workers as on a real agent).
  const long maxTries = std::clamp<long>(4'000'000L / world, 1, 100'000);
  std::vector<std::size_t> pick(count);
  for (std::size_t i = 0; i < count; ++i)
    pick[i] = i;
  for (long tries = 0; tries < maxTries; ++tries) {
    std::vector<bool> chosen(static_cast<std::size_t>(world), false);
    for (const auto i : pick) {
      const auto r = rankOf(survivors[i]);
      if (r < static_cast<std::size_t>(world))
        chosen[r] = true;
    }
    if (covers(chosen)) {
      std::vector<int> out;
      for (const auto i : pick)
        out.push_back(survivors[i]);
      return out;
    }
    // The next combination.
    std::size_t k = count;
    while (k > 0 && pick[k - 1] == survivors.size() - count + (k - 1))
      --k;
    if (k == 0)
      break;
    ++pick[k - 1];
    for (std::size_t j = k; j < count; ++j)
      pick[j] = pick[j - 1] + 1;
  }
  return first;
}

std::vector<int> interimDonors(const std::vector<int>& members, const std::vector<int>& survivors,
                               const std::vector<int>& chosen, int distance) {
  const int world = static_cast<int>(members.size());
  std::vector<int> everyone = survivors;
  everyone.insert(everyone.end(), chosen.begin(), chosen.end());
  const std::vector<std::size_t> position = positionsOf(members, everyone);
  const auto rankOf = [&](int id) {
    return static_cast<int>(position[static_cast<std::size_t>(id)]);
  };
  std::vector<int> sortedChosen = chosen;
  std::sort(sortedChosen.begin(), sortedChosen.end());
  const auto has = [](const std::vector<int>& ids, int id) {
    return std::binary_search(ids.begin(), ids.end(), id);
  };
  // Per rank: 0 dead (or not a member), 1 a survivor left out, 2 a member or donor.
  std::vector<int> held(static_cast<std::size_t>(world), 0);
  for (const int id : survivors) {
    if (const int r = rankOf(id); r < world)
      held[static_cast<std::size_t>(r)] = has(sortedChosen, id) ? 2 : 1;
  }
  const int d = live::liveBuddyDistance(distance, world);
  std::vector<int> donorRanks;
  for (int p = 0; p < world; ++p) {
    const auto owner = static_cast<std::size_t>(p);
    const auto buddy = static_cast<std::size_t>((p + d) % world);
    if (held[owner] == 2 || held[buddy] == 2)
      continue;
    const auto donor = held[owner] == 1 ? owner : held[buddy] == 1 ? buddy : held.size();
    if (donor == held.size())
      continue;  // lost with its copy: no survivor helps
    held[donor] = 2;
    donorRanks.push_back(static_cast<int>(donor));
  }
  std::sort(donorRanks.begin(), donorRanks.end());
  std::vector<int> out;
  for (const int r : donorRanks)
    out.push_back(members[static_cast<std::size_t>(r)]);
  return out;
}

}  // namespace stretch::agent
