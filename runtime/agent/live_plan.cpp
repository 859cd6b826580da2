#include "runtime/agent/live_plan.hpp"

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>

#include "runtime/common/check.hpp"
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

// Workers numbered densely for one decision, so that it indexes arrays, never strings: each node
// a block of ids [offset, offset + width) (width: one more than the largest local rank met on
// it), `next`'s nodes first in its order, then the other nodes by id. Ascending ids are then rank
// order in `next`, followed by the workers of other nodes (by node id, then local rank). A list's
// node ids are looked up once per run of equal ids (places come node by node): O(workers) with
// small constants, which the simulator needs at 10^5 workers.
using Id = std::uint32_t;

class Places {
 public:
  Places(const StartWorkers& next, const LiveSituation& s) {
    for (auto it = next.nodes.begin(); it != next.nodes.end(); ++it) {
      const NodeEntry& e = it.entry();
      const std::size_t node = addNode(e.nodeId);
      slots_[node] = e.used;
      widen(node, e.used - 1);
      nextNodes_.push_back(node);
    }
    // Lists come node by node, mostly in `next`'s order: the node after the last one met is
    // tried before the index.
    const auto resolve = [&](const auto& list, const auto& placeOf) {
      std::vector<std::pair<std::size_t, std::int64_t>> out;
      out.reserve(list.size());
      const std::string* previous = nullptr;
      std::size_t node = 0;
      for (const auto& item : list) {
        const WorkerPlace& p = placeOf(item);
        if (previous == nullptr || *previous != p.nodeId) {
          const std::size_t guess = previous == nullptr ? 0 : node + 1;
          node = guess < nextNodes_.size() && ids_[guess] == p.nodeId ? guess : nodeOf(p.nodeId);
        }
        previous = &p.nodeId;
        widen(node, p.localRank);
        out.emplace_back(node, p.localRank);
      }
      return out;
    };
    const auto groupAt =
        resolve(s.group, [](const WorkerPlace& p) -> const WorkerPlace& { return p; });
    const auto runningAt =
        resolve(s.running, [](const RunningWorker& w) -> const WorkerPlace& { return w.place; });
    // Offsets: next's nodes in its order, then the others by id.
    std::vector<std::size_t> order(nextNodes_);
    std::vector<std::size_t> others;
    std::vector<bool> inNext(ids_.size(), false);
    for (const std::size_t node : nextNodes_)
      inNext[node] = true;
    for (std::size_t node = 0; node < ids_.size(); ++node) {
      if (!inNext[node])
        others.push_back(node);
    }
    std::sort(others.begin(), others.end(),
              [&](std::size_t a, std::size_t b) { return ids_[a] < ids_[b]; });
    order.insert(order.end(), others.begin(), others.end());
    offset_.assign(ids_.size(), 0);
    std::uint64_t total = 0;
    for (const std::size_t node : order) {
      offset_[node] = static_cast<Id>(total);
      total += static_cast<std::uint64_t>(width_[node]);
    }
    STRETCH_CHECK(total < (std::uint64_t{1} << 31), "a live decision over {} worker places", total);
    nodeOfId_.resize(total);
    for (const std::size_t node : order) {
      std::fill_n(nodeOfId_.begin() + offset_[node], width_[node], static_cast<Id>(node));
    }
    const auto idsOf = [&](const std::vector<std::pair<std::size_t, std::int64_t>>& at) {
      std::vector<Id> out;
      out.reserve(at.size());
      for (const auto& [node, local] : at)
        out.push_back(offset_[node] + static_cast<Id>(local));
      return out;
    };
    group_ = idsOf(groupAt);
    running_ = idsOf(runningAt);
  }

  std::size_t size() const noexcept { return nodeOfId_.size(); }
  // The ids of the situation's group (rank order) and running workers (their order).
  const std::vector<Id>& group() const noexcept { return group_; }
  const std::vector<Id>& running() const noexcept { return running_; }
  // The k-th node of `next` and the id of its local rank 0.
  std::size_t nextNode(std::size_t k) const { return nextNodes_[k]; }
  Id first(std::size_t node) const { return offset_[node]; }

  std::int64_t local(Id id) const { return id - offset_[nodeOfId_[id]]; }
  // Whether the worker has a place in `next`.
  bool hasPlace(Id id) const { return local(id) < slots_[nodeOfId_[id]]; }
  WorkerPlace place(Id id) const { return {std::string(ids_[nodeOfId_[id]]), local(id)}; }
  std::vector<WorkerPlace> places(const std::vector<Id>& list) const {
    std::vector<WorkerPlace> out;
    out.reserve(list.size());
    for (const Id id : list)
      out.push_back(place(id));
    return out;
  }

 private:
  std::size_t addNode(std::string_view id) {
    ids_.push_back(id);
    slots_.push_back(0);
    width_.push_back(0);
    return ids_.size() - 1;
  }
  // The node's index, added when new. The index of ids is built at the first lookup.
  std::size_t nodeOf(std::string_view id) {
    if (index_.empty()) {
      index_.reserve(ids_.size() * 2 + 16);
      for (std::size_t node = 0; node < ids_.size(); ++node)
        index_.emplace(ids_[node], node);
    }
    const auto [at, added] = index_.emplace(id, ids_.size());
    if (added)
      addNode(id);
    return at->second;
  }
  void widen(std::size_t node, std::int64_t local) {
    STRETCH_CHECK(local >= -1 && local < (std::int64_t{1} << 30), "local rank {} of node {}", local,
                  ids_[node]);
    width_[node] = std::max(width_[node], local + 1);
  }
  std::unordered_map<std::string_view, std::size_t> index_;
  std::vector<std::string_view> ids_;  // views of the caller's strings (they outlive this)
  std::vector<std::int64_t> slots_;    // workers the node runs in `next`
  std::vector<std::int64_t> width_;
  std::vector<std::size_t> nextNodes_;
  std::vector<Id> offset_;
  std::vector<Id> nodeOfId_;
  std::vector<Id> group_;
  std::vector<Id> running_;
};

// Unique ids in ascending (rank) order, O(list) when they are already (the usual case), else
// O(places) through a mark per place.
void ascending(std::vector<Id>& list, std::size_t places) {
  if (std::is_sorted(list.begin(), list.end()))
    return;
  std::vector<char> mark(places, 0);
  for (const Id id : list)
    mark[id] = 1;
  list.clear();
  for (std::size_t id = 0; id < places; ++id) {
    if (mark[id] != 0)
      list.push_back(static_cast<Id>(id));
  }
}

// Ids for interimMembers / interimDonors: positions in the group, then the places it does not
// hold, in the order met.
struct Ids {
  std::vector<Id> known;
  std::vector<int> index;  // by place id; -1 when not known yet
  std::vector<int> group;
  Ids(const std::vector<Id>& g, std::size_t places) : known(g), index(places, -1) {
    group.reserve(g.size());
    for (std::size_t i = 0; i < g.size(); ++i) {
      group.push_back(static_cast<int>(i));
      index[g[i]] = static_cast<int>(i);
    }
  }
  std::vector<int> of(const std::vector<Id>& list) {
    std::vector<int> out;
    out.reserve(list.size());
    for (const Id place : list) {
      int& id = index[place];
      if (id < 0) {
        id = static_cast<int>(known.size());
        known.push_back(place);
      }
      out.push_back(id);
    }
    return out;
  }
  // The places of `ids`, ascending (rank order).
  std::vector<Id> sortedPlaces(const std::vector<int>& ids) const {
    std::vector<Id> out;
    out.reserve(ids.size());
    for (const int id : ids)
      out.push_back(known[static_cast<std::size_t>(id)]);
    ascending(out, index.size());
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
  for (const RunningWorker& w : s.running) {
    if (!w.capable && !w.joiner) {
      plan.reason = fmt::format("worker {} of node {} (pid {}) cannot continue live",
                                w.place.localRank, w.place.nodeId, w.pid);
      return plan;
    }
  }
  const Places places(next, s);
  const std::vector<Id>& running = places.running();
  const std::vector<Id>& group = places.group();
  // What each place is: 1 kept, 2 capable but left out, 4 staying (kept, or a donor).
  enum : std::uint8_t { kKept = 1, kLeftOut = 2, kStaying = 4 };
  std::vector<std::uint8_t> marks(places.size(), 0);
  std::vector<Id> kept;     // capable, with a place in `next`
  std::vector<Id> leftOut;  // capable, without one
  for (std::size_t i = 0; i < running.size(); ++i) {
    if (!s.running[i].capable)
      continue;
    const Id id = running[i];
    if (places.hasPlace(id)) {
      kept.push_back(id);
      marks[id] = kKept | kStaying;
    } else {
      leftOut.push_back(id);
      marks[id] = kLeftOut;
    }
  }
  if (kept.empty()) {
    plan.reason = fmt::format(
        "no running worker that can continue live has a place in generation {}", next.generation);
    return plan;
  }
  // The state: the group's ranks without a capable running worker are gone.
  if (!group.empty()) {
    GroupLoss loss{static_cast<std::int64_t>(group.size()), {}, s.copyDistance, s.partitionCopies};
    for (std::size_t r = 0; r < group.size(); ++r) {
      if ((marks[group[r]] & (kKept | kLeftOut)) == 0)
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
      std::all_of(group.begin(), group.end(), [&](Id id) { return (marks[id] & kKept) != 0; });
  std::int64_t joining = 0;
  std::size_t k = 0;
  for (auto it = next.nodes.begin(); it != next.nodes.end(); ++it, ++k) {
    const NodeEntry& n = it.entry();
    const Id first = places.first(places.nextNode(k));
    std::vector<std::int64_t> keep;
    std::vector<std::int64_t> join;
    for (std::int64_t local = 0; local < n.used; ++local)
      ((marks[first + static_cast<Id>(local)] & kKept) != 0 ? keep : join).push_back(local);
    joining += static_cast<std::int64_t>(join.size());
    if (!keep.empty())
      plan.keep.emplace(n.nodeId, std::move(keep));
    if (!join.empty())
      plan.join.emplace(n.nodeId, std::move(join));
  }
  ascending(kept, places.size());
  // Donors only where the workers keep ZeRO 1/2 copies: a ZeRO 0 rank holds the whole state.
  std::vector<Id> everyone;
  if (s.partitionCopies) {
    everyone = kept;
    everyone.insert(everyone.end(), leftOut.begin(), leftOut.end());
  }
  const int distance = static_cast<int>(s.copyDistance);
  Ids ids(group, places.size());
  std::vector<Id> donors;
  const auto donorsOf = [&](const std::vector<Id>& chosen) {
    if (everyone.empty())
      return std::vector<Id>{};
    const auto survivorIds = ids.of(everyone);
    const auto chosenIds = ids.of(chosen);
    return ids.sortedPlaces(interimDonors(ids.group, survivorIds, chosenIds, distance));
  };
  if (joining == 0) {
    std::vector<Id> members;
    members.reserve(static_cast<std::size_t>(next.nodes.usedSum()));
    k = 0;
    for (auto it = next.nodes.begin(); it != next.nodes.end(); ++it, ++k) {
      const Id first = places.first(places.nextNode(k));
      for (std::int64_t local = 0; local < it.entry().used; ++local)
        members.push_back(first + static_cast<Id>(local));
    }
    donors = donorsOf(members);
    plan.publish = LiveMembers{places.places(members), next.batch, places.places(donors)};
    plan.reason =
        fmt::format("{} running worker(s) go on in generation {}", members.size(), next.generation);
  } else {
    if (!groupIntact) {
      // Workers were lost: the survivors go on alone while the joiners start, as many of them as
      // make a valid world size, chosen to keep every ZeRO partition.
      const std::int64_t n = rules.largestValidAtMost(static_cast<std::int64_t>(kept.size()));
      if (const auto batch = n >= 1 ? rules.batchFor(n) : std::nullopt) {
        const auto keptIds = ids.of(kept);
        const auto interim = ids.sortedPlaces(
            interimMembers(ids.group, keptIds, distance, static_cast<std::size_t>(n)));
        donors = donorsOf(interim);
        plan.publish = LiveMembers{places.places(interim), *batch, places.places(donors)};
      }
    }
    plan.awaitJoiners = true;
    plan.groupTrainsOn = groupIntact;
    plan.reason = fmt::format("{} running worker(s) go on{}; {} join generation {}", kept.size(),
                              plan.publish ? fmt::format(" ({} of them in an interim world)",
                                                         plan.publish->members.size())
                                           : std::string(" once the joiners are ready"),
                              joining, next.generation);
  }
  if (plan.publish) {
    for (const Id d : donors) {
      marks[d] = static_cast<std::uint8_t>(marks[d] | kStaying);
      if (!places.hasPlace(d))
        plan.releaseAfterDonating.push_back(places.place(d));
    }
    if (!plan.publish->donors.empty())
      plan.reason += fmt::format("; donors {}", placesText(plan.publish->donors));
  }
  for (std::size_t i = 0; i < running.size(); ++i) {
    if ((marks[running[i]] & kStaying) == 0)
      plan.stop.push_back(s.running[i].place);
  }
  std::sort(plan.stop.begin(), plan.stop.end());
  return plan;
}

std::vector<int> interimMembers(const std::vector<int>& members, std::vector<int> survivors,
                                int distance, std::size_t count) {
  // Survivors in rank order (their position in `members`; those not members last, in the order
  // given): a counting sort, O(members + survivors).
  const std::vector<std::size_t> position = positionsOf(members, survivors);
  const auto rankOf = [&](int id) { return position[static_cast<std::size_t>(id)]; };
  {
    std::vector<std::uint32_t> atRank(members.size(), 0);
    std::vector<int> outside;
    for (const int id : survivors) {
      const std::size_t r = rankOf(id);
      if (r < members.size())
        ++atRank[r];
      else
        outside.push_back(id);
    }
    survivors.clear();
    for (std::size_t r = 0; r < members.size(); ++r)
      survivors.insert(survivors.end(), atRank[r], members[r]);
    survivors.insert(survivors.end(), outside.begin(), outside.end());
  }
  count = std::min(count, survivors.size());
  const std::vector<int> first(survivors.begin(),
                               survivors.begin() + static_cast<std::ptrdiff_t>(count));
  const int world = static_cast<int>(members.size());
  if (world < 2 || count == 0 || count == survivors.size())
    return first;
  const int d = live::liveBuddyDistance(distance, world);
  // What the current choice holds, kept up to date as picks change: how many picks each rank has,
  // how many chosen ranks hold each partition (its owner and the rank holding its copy), and
  // how many partitions nobody chosen holds.
  std::vector<std::uint32_t> picked(static_cast<std::size_t>(world), 0);
  std::vector<std::uint8_t> holders(static_cast<std::size_t>(world), 0);
  std::size_t uncovered = static_cast<std::size_t>(world);
  const auto update = [&](std::size_t i, bool add) {
    const auto r = rankOf(survivors[i]);
    if (r >= static_cast<std::size_t>(world))
      return;
    if (add ? picked[r]++ != 0 : --picked[r] != 0)
      return;
    // Rank r holds partition r and the copy of partition (r - d) mod world.
    for (const std::size_t p :
         {r, (r + static_cast<std::size_t>(world - d)) % static_cast<std::size_t>(world)}) {
      if (add ? holders[p]++ == 0 : --holders[p] == 0)
        add ? --uncovered : ++uncovered;
    }
  };
  // Choices in lexicographic order of survivor positions; a node has few workers, and the
  // search stops after a bounded number of choices (then the first `count` stay): at most
  // 100,000, so that a choice costs well under a millisecond even at the simulator's 10^5
  // workers (small groups, a node's or a few nodes', are searched through). A choice after the
  // first costs what it changes.
  const long maxTries = std::clamp<long>(200'000L / world, 1, 100'000);
  std::vector<std::size_t> pick(count);
  for (std::size_t i = 0; i < count; ++i) {
    pick[i] = i;
    update(i, true);
  }
  for (long tries = 0; tries < maxTries; ++tries) {
    if (uncovered == 0) {
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
    for (std::size_t j = k - 1; j < count; ++j)
      update(pick[j], false);
    ++pick[k - 1];
    for (std::size_t j = k; j < count; ++j)
      pick[j] = pick[j - 1] + 1;
    for (std::size_t j = k - 1; j < count; ++j)
      update(pick[j], true);
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
  std::vector<char> isChosen(position.size(), 0);
  for (const int id : chosen)
    isChosen[static_cast<std::size_t>(id)] = 1;
  // Per rank: 0 dead (or not a member), 1 a survivor left out, 2 a member or donor.
  std::vector<int> held(static_cast<std::size_t>(world), 0);
  for (const int id : survivors) {
    if (const int r = rankOf(id); r < world)
      held[static_cast<std::size_t>(r)] = isChosen[static_cast<std::size_t>(id)] != 0 ? 2 : 1;
  }
  const int d = live::liveBuddyDistance(distance, world);
  std::vector<char> donor(static_cast<std::size_t>(world), 0);
  for (int p = 0; p < world; ++p) {
    const auto owner = static_cast<std::size_t>(p);
    const auto buddy = static_cast<std::size_t>((p + d) % world);
    if (held[owner] == 2 || held[buddy] == 2)
      continue;
    const auto giver = held[owner] == 1 ? owner : held[buddy] == 1 ? buddy : held.size();
    if (giver == held.size())
      continue;  // lost with its copy: no survivor helps
    held[giver] = 2;
    donor[giver] = 1;
  }
  std::vector<int> out;
  for (std::size_t r = 0; r < donor.size(); ++r) {
    if (donor[r] != 0)
      out.push_back(members[r]);
  }
  return out;
}

}  // namespace stretch::agent
