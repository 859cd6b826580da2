#include "runtime/agent/live_plan.hpp"

#include <algorithm>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "runtime/live/generation.hpp"

namespace stretch::agent {

namespace {

// The first places, for a log line: a plan at 10^4 workers may name thousands of donors.
std::string placesText(const std::vector<WorkerPlace>& places) {
  constexpr std::size_t kShown = 16;
  std::string out;
  for (std::size_t i = 0; i < places.size() && i < kShown; ++i) {
    if (!out.empty())
      out += ',';
    out += fmt::format("{}:{}", places[i].nodeId, places[i].localRank);
  }
  if (places.size() > kShown)
    out += fmt::format(" and {} more", places.size() - kShown);
  return out;
}

// Places as integers: a node's index (in the order nodes are first met) and the local rank, so
// that the decision sorts and looks up integers, not strings: O(workers log workers) with small
// constants, which the simulator needs at 10^5 workers.
using Key = std::uint64_t;

class Places {
 public:
  explicit Places(const StartWorkers& next) {
    for (auto it = next.nodes.begin(); it != next.nodes.end(); ++it) {
      const std::size_t node = nodeIndex(it.entry().nodeId);
      rankOfNode_[node] = nextNodes_++;
      slots_[node] = it.entry().used;
    }
  }
  // `node` must outlive this object when it is new (the caller's strings do).
  Key key(std::string_view node, std::int64_t localRank) {
    return (static_cast<Key>(nodeIndex(node)) << 32) | static_cast<Key>(localRank);
  }
  Key key(const WorkerPlace& p) { return key(p.nodeId, p.localRank); }
  std::vector<Key> keys(const std::vector<WorkerPlace>& list) {
    std::vector<Key> out;
    out.reserve(list.size());
    for (const auto& p : list)
      out.push_back(key(p));
    return out;
  }
  WorkerPlace place(Key k) const {
    return {std::string(ids_[static_cast<std::size_t>(k >> 32)]),
            static_cast<std::int64_t>(k & 0xffffffffU)};
  }
  std::vector<WorkerPlace> places(const std::vector<Key>& keys) const {
    std::vector<WorkerPlace> out;
    out.reserve(keys.size());
    for (const Key k : keys)
      out.push_back(place(k));
    return out;
  }
  // Whether the worker has a place in `next`.
  bool hasPlace(Key k) const {
    const auto node = static_cast<std::size_t>(k >> 32);
    return static_cast<std::int64_t>(k & 0xffffffffU) < slots_[node];
  }
  // `list` in the order of `next`'s nodes (local ranks ascending), then any on other nodes (by
  // node id). O(n) when it is in that order already (the usual case), else a sort of integers.
  std::vector<Key> inRankOrder(std::vector<Key> list) const {
    const auto order = [&](Key k) {
      const auto node = static_cast<std::size_t>(k >> 32);
      return std::tuple(rankOfNode_[node], rankOfNode_[node] == kNone ? ids_[node] : "",
                        k & 0xffffffffU);
    };
    const auto less = [&](Key x, Key y) {
      const auto nx = static_cast<std::size_t>(x >> 32);
      const auto ny = static_cast<std::size_t>(y >> 32);
      if (rankOfNode_[nx] != kNone && rankOfNode_[ny] != kNone) {
        return rankOfNode_[nx] != rankOfNode_[ny] ? rankOfNode_[nx] < rankOfNode_[ny]
                                                  : (x & 0xffffffffU) < (y & 0xffffffffU);
      }
      return order(x) < order(y);
    };
    if (!std::is_sorted(list.begin(), list.end(), less))
      std::sort(list.begin(), list.end(), less);
    return list;
  }
  std::size_t nodes() const noexcept { return ids_.size(); }

 private:
  static constexpr std::size_t kNone = ~std::size_t{0};
  std::size_t nodeIndex(std::string_view id) {
    // Places come node by node: the node met last is the likeliest.
    if (!ids_.empty() && ids_[last_] == id)
      return last_;
    const auto [at, added] = index_.emplace(id, ids_.size());
    last_ = at->second;
    if (added) {
      ids_.push_back(id);
      rankOfNode_.push_back(kNone);
      slots_.push_back(0);
    }
    return at->second;
  }
  std::unordered_map<std::string_view, std::size_t> index_;
  std::vector<std::string_view> ids_;  // views of the caller's strings (they outlive this)
  std::vector<std::size_t> rankOfNode_;
  std::vector<std::int64_t> slots_;  // workers the node runs in `next`
  std::size_t nextNodes_ = 0;
  std::size_t last_ = 0;
};

// A value per place, O(1) to read and write: a row per node index, grown as local ranks come.
template <typename T>
class PlaceTable {
 public:
  explicit PlaceTable(T none) : none_(none) {}
  T get(Key k) const {
    const auto node = static_cast<std::size_t>(k >> 32);
    const auto local = static_cast<std::size_t>(k & 0xffffffffU);
    return node < rows_.size() && local < rows_[node].size() ? rows_[node][local] : none_;
  }
  void set(Key k, T value) {
    const auto node = static_cast<std::size_t>(k >> 32);
    const auto local = static_cast<std::size_t>(k & 0xffffffffU);
    if (node >= rows_.size())
      rows_.resize(node + 1);
    if (local >= rows_[node].size())
      rows_[node].resize(local + 1, none_);
    rows_[node][local] = value;
  }

 private:
  T none_;
  std::vector<std::vector<T>> rows_;
};

// Ids for interimMembers / interimDonors: positions in the group, then the places it does not
// hold, in the order met.
struct Ids {
  std::vector<Key> known;
  PlaceTable<int> index{-1};
  std::vector<int> group;
  explicit Ids(const std::vector<Key>& g) : known(g) {
    for (std::size_t i = 0; i < g.size(); ++i) {
      group.push_back(static_cast<int>(i));
      index.set(g[i], static_cast<int>(i));
    }
  }
  int of(Key k) {
    int id = index.get(k);
    if (id < 0) {
      id = static_cast<int>(known.size());
      index.set(k, id);
      known.push_back(k);
    }
    return id;
  }
  std::vector<int> of(const std::vector<Key>& list) {
    std::vector<int> out;
    out.reserve(list.size());
    for (const Key k : list)
      out.push_back(of(k));
    return out;
  }
  std::vector<Key> keys(const std::vector<int>& ids) const {
    std::vector<Key> out;
    out.reserve(ids.size());
    for (const int id : ids)
      out.push_back(known[static_cast<std::size_t>(id)]);
    return out;
  }
};

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
  Places places(next);
  std::vector<Key> kept;     // capable, with a place in `next`
  std::vector<Key> leftOut;  // capable, without one
  for (const RunningWorker& w : s.running) {
    if (!w.capable && !w.joiner) {
      plan.reason = fmt::format("worker {} of node {} (pid {}) cannot continue live",
                                w.place.localRank, w.place.nodeId, w.pid);
      return plan;
    }
    if (w.capable) {
      const Key k = places.key(w.place);
      (places.hasPlace(k) ? kept : leftOut).push_back(k);
    }
  }
  if (kept.empty()) {
    plan.reason = fmt::format(
        "no running worker that can continue live has a place in generation {}", next.generation);
    return plan;
  }
  const std::vector<Key> group = places.keys(s.group);
  // What each place is: 1 kept, 2 capable but left out, 4 staying (kept, or a donor).
  enum : std::uint8_t { kKept = 1, kLeftOut = 2, kStaying = 4 };
  PlaceTable<std::uint8_t> marks(0);
  for (const Key k : kept)
    marks.set(k, kKept | kStaying);
  for (const Key k : leftOut)
    marks.set(k, kLeftOut);
  // The state: the group's ranks without a capable running worker are gone.
  if (!group.empty()) {
    GroupLoss loss{static_cast<std::int64_t>(group.size()), {}, s.copyDistance, s.partitionCopies};
    for (std::size_t r = 0; r < group.size(); ++r) {
      if ((marks.get(group[r]) & (kKept | kLeftOut)) == 0)
        loss.lost.push_back(static_cast<std::int64_t>(r));
    }
    if (auto why = whyStateIsLost(loss)) {
      plan.reason = std::move(*why);
      return plan;
    }
  }

  plan.live = true;
  // Every worker of the group goes on (places are unique in both lists).
  const bool groupIntact =
      kept.size() == group.size() &&
      std::all_of(group.begin(), group.end(), [&](Key k) { return (marks.get(k) & kKept) != 0; });
  std::int64_t joining = 0;
  for (auto it = next.nodes.begin(); it != next.nodes.end(); ++it) {
    const NodeEntry& n = it.entry();
    std::vector<std::int64_t> keep;
    std::vector<std::int64_t> join;
    for (std::int64_t local = 0; local < n.used; ++local)
      ((marks.get(places.key(n.nodeId, local)) & kKept) != 0 ? keep : join).push_back(local);
    joining += static_cast<std::int64_t>(join.size());
    if (!keep.empty())
      plan.keep.emplace(n.nodeId, std::move(keep));
    if (!join.empty())
      plan.join.emplace(n.nodeId, std::move(join));
  }
  kept = places.inRankOrder(kept);
  // Donors only where the workers keep ZeRO 1/2 copies: a ZeRO 0 rank holds the whole state.
  std::vector<Key> everyone;
  if (s.partitionCopies) {
    everyone = kept;
    everyone.insert(everyone.end(), leftOut.begin(), leftOut.end());
  }
  const int distance = static_cast<int>(s.copyDistance);
  Ids ids(group);
  const auto donorsOf = [&](const std::vector<Key>& chosen) {
    if (everyone.empty())
      return std::vector<WorkerPlace>{};
    const auto survivorIds = ids.of(everyone);
    const auto chosenIds = ids.of(chosen);
    return places.places(
        places.inRankOrder(ids.keys(interimDonors(ids.group, survivorIds, chosenIds, distance))));
  };
  if (joining == 0) {
    const auto members = placesOf(next);
    plan.publish = LiveMembers{members, next.batch, donorsOf(places.keys(members))};
    plan.reason =
        fmt::format("{} running worker(s) go on in generation {}", members.size(), next.generation);
  } else {
    if (!groupIntact) {
      // Workers were lost: the survivors go on alone while the joiners start, as many of them as
      // make a valid world size, chosen to keep every ZeRO partition.
      const std::int64_t n = rules.largestValidAtMost(static_cast<std::int64_t>(kept.size()));
      if (const auto batch = n >= 1 ? rules.batchFor(n) : std::nullopt) {
        const auto keptIds = ids.of(kept);
        const auto interim = places.inRankOrder(
            ids.keys(interimMembers(ids.group, keptIds, distance, static_cast<std::size_t>(n))));
        plan.publish = LiveMembers{places.places(interim), *batch, donorsOf(interim)};
      }
    }
    plan.awaitJoiners = true;
    plan.reason = fmt::format("{} running worker(s) go on{}; {} join generation {}", kept.size(),
                              plan.publish ? fmt::format(" ({} of them in an interim world)",
                                                         plan.publish->members.size())
                                           : std::string(" once the joiners are ready"),
                              joining, next.generation);
  }
  if (plan.publish) {
    for (const WorkerPlace& d : plan.publish->donors) {
      const Key k = places.key(d);
      marks.set(k, static_cast<std::uint8_t>(marks.get(k) | kStaying));
      if (!places.hasPlace(k))
        plan.releaseAfterDonating.push_back(d);
    }
    if (!plan.publish->donors.empty())
      plan.reason += fmt::format("; donors {}", placesText(plan.publish->donors));
  }
  for (const RunningWorker& w : s.running) {
    if ((marks.get(places.key(w.place)) & kStaying) == 0)
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
  // search stops after a bounded number of choices (then the first `count` stay): at most
  // 100,000 and about 200,000 rank checks in all, so that a choice costs well under a
  // millisecond even at the simulator's 10^5 workers (small groups, a node's or a few nodes',
  // are searched through).
  const long maxTries = std::clamp<long>(200'000L / world, 1, 100'000);
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
