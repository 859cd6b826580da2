// Properties of the launcher's filters and world info, checked with rapidcheck. The seed is
// printed by rapidcheck ("Using configuration: seed=...") and can be replayed with
// RC_PARAMS="seed=N".

#include <algorithm>
#include <map>
#include <ostream>
#include <rapidcheck.h>
#include <set>
#include <string>

#include <fmt/format.h>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "runtime/launcher/hostfile.hpp"
#include "runtime/launcher/launch_error.hpp"

namespace stretch::launcher {
// How rapidcheck prints a counterexample.
void showValue(const Host& h, std::ostream& os) {
  os << h.name << " slots=" << h.slots;
}
void showValue(const ActiveResources& r, std::ostream& os) {
  os << encodeWorldInfo(r);
}
}  // namespace stretch::launcher

namespace stretch::launcher {
namespace {

using Selection = std::map<std::string, std::set<int>>;

rc::Gen<std::string> genHostName() {
  const std::string first = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_";
  const std::string rest = first + ".-";
  return rc::gen::exec([first, rest] {
    std::string name(1, *rc::gen::elementOf(first));
    const auto more = *rc::gen::inRange<std::size_t>(0, 12);
    for (std::size_t i = 0; i < more; ++i) {
      name += *rc::gen::elementOf(rest);
    }
    return name;
  });
}

rc::Gen<ResourcePool> genPool() {
  return rc::gen::exec([] {
    const auto n = *rc::gen::inRange<std::size_t>(1, 7);
    const auto names = *rc::gen::unique<std::vector<std::string>>(n, genHostName());
    ResourcePool pool;
    for (const std::string& name : names) {
      pool.push_back(Host{name, *rc::gen::inRange(1, 9)});
    }
    return pool;
  });
}

// Fisher-Yates with rapidcheck's choices (so counterexamples shrink).
template <typename T>
std::vector<T> shuffle(std::vector<T> v) {
  for (std::size_t i = v.size(); i > 1; --i) {
    std::swap(v[i - 1], v[*rc::gen::inRange<std::size_t>(0, i)]);
  }
  return v;
}

std::optional<int> maybeInt(int lo, int hi) {
  if (!*rc::gen::arbitrary<bool>()) {
    return std::nullopt;
  }
  return *rc::gen::inRange(lo, hi);
}

// A valid --include/--exclude string over `pool` naming a random set of slots, each once: some
// hosts bare, some with slot lists in any order, a host's slots possibly split over several
// specs; specs shuffled.
struct FilterCase {
  std::string text;
  Selection named;
};

FilterCase genFilter(const ResourcePool& pool) {
  std::vector<std::string> specs;
  Selection named;
  for (const Host& h : pool) {
    if (!*rc::gen::arbitrary<bool>()) {
      continue;
    }
    if (*rc::gen::arbitrary<bool>()) {
      specs.push_back(h.name);
      for (int s = 0; s < h.slots; ++s) {
        named[h.name].insert(s);
      }
      continue;
    }
    std::vector<int> slots;
    for (int s = 0; s < h.slots; ++s) {
      if (*rc::gen::arbitrary<bool>()) {
        slots.push_back(s);
      }
    }
    if (slots.empty()) {
      slots.push_back(*rc::gen::inRange(0, h.slots));
    }
    const std::vector<int> shuffled = shuffle(slots);
    // Split into 1..3 specs for the same host.
    const auto parts = std::min<std::size_t>(shuffled.size(), *rc::gen::inRange<std::size_t>(1, 4));
    for (std::size_t p = 0; p < parts; ++p) {
      std::string spec = h.name + ":";
      bool first = true;
      for (std::size_t i = p; i < shuffled.size(); i += parts) {
        spec += first ? "" : ",";
        spec += std::to_string(shuffled[i]);
        first = false;
      }
      specs.push_back(spec);
    }
    for (const int s : slots) {
      named[h.name].insert(s);
    }
  }
  if (specs.empty()) {
    const Host& h = *rc::gen::elementOf(pool);
    specs.push_back(h.name);
    for (int s = 0; s < h.slots; ++s) {
      named[h.name].insert(s);
    }
  }
  specs = shuffle(specs);
  std::string text;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    text += i ? "@" : "";
    text += specs[i];
  }
  return {text, named};
}

// The invariants of every ActiveResources applyFilters returns.
void checkWellFormed(const ResourcePool& pool, const ActiveResources& r) {
  RC_ASSERT(!r.hosts.empty());
  std::size_t next = 0;  // hosts appear in pool order
  for (const auto& [host, slots] : r.hosts) {
    while (next < pool.size() && pool[next].name != host) {
      ++next;
    }
    RC_ASSERT(next < pool.size());
    RC_ASSERT(!slots.empty());
    RC_ASSERT(std::is_sorted(slots.begin(), slots.end()));
    RC_ASSERT(std::adjacent_find(slots.begin(), slots.end()) == slots.end());
    RC_ASSERT(slots.front() >= 0);
    RC_ASSERT(slots.back() < pool[next].slots);
    ++next;
  }
}

Selection asSelection(const ActiveResources& r) {
  Selection out;
  for (const auto& [host, slots] : r.hosts) {
    out[host].insert(slots.begin(), slots.end());
  }
  return out;
}

RC_GTEST_PROP(LauncherFilters, IncludeSelectsExactlyTheNamedSlots, ()) {
  const ResourcePool pool = *genPool();
  const FilterCase c = genFilter(pool);
  const ActiveResources r = applyFilters(pool, c.text, "", std::nullopt, std::nullopt);
  checkWellFormed(pool, r);
  RC_ASSERT(asSelection(r) == c.named);
}

RC_GTEST_PROP(LauncherFilters, ExcludeSelectsTheComplement, ()) {
  const ResourcePool pool = *genPool();
  const FilterCase c = genFilter(pool);
  Selection complement;
  for (const Host& h : pool) {
    for (int s = 0; s < h.slots; ++s) {
      if (c.named.count(h.name) == 0 || c.named.at(h.name).count(s) == 0) {
        complement[h.name].insert(s);
      }
    }
  }
  if (complement.empty()) {
    RC_ASSERT_THROWS_AS(applyFilters(pool, "", c.text, std::nullopt, std::nullopt), LaunchError);
    return;
  }
  const ActiveResources r = applyFilters(pool, "", c.text, std::nullopt, std::nullopt);
  checkWellFormed(pool, r);
  RC_ASSERT(asSelection(r) == complement);
}

// Garbage made of the filter syntax's own pieces: either a LaunchError or a well-formed result.
RC_GTEST_PROP(LauncherFilters, ArbitraryFilterStringsNeverLeaveThePool, ()) {
  const ResourcePool pool = *genPool();
  std::vector<std::string> pieces = {":", ",",  "@", "0", "1",          "3",
                                     "9", "-1", "x", "",  "12345678901"};
  for (const Host& h : pool) {
    pieces.push_back(h.name);
  }
  const auto n = *rc::gen::inRange<std::size_t>(1, 10);
  std::string text;
  for (std::size_t i = 0; i < n; ++i) {
    text += *rc::gen::elementOf(pieces);
  }
  const bool exclude = *rc::gen::arbitrary<bool>();
  RC_TAG(exclude ? "exclude" : "include");
  try {
    const ActiveResources r = exclude ? applyFilters(pool, "", text, std::nullopt, std::nullopt)
                                      : applyFilters(pool, text, "", std::nullopt, std::nullopt);
    if (!text.empty()) {
      checkWellFormed(pool, r);
    }
  } catch (const LaunchError& e) {
    RC_ASSERT(std::string(e.what()).rfind(exclude ? "--exclude = " : "--include = ", 0) == 0);
  }
}

RC_GTEST_PROP(LauncherFilters, NumNodesAndNumGpusTakePrefixesOrFail, ()) {
  const ResourcePool pool = *genPool();
  const std::optional<int> nodes = maybeInt(-1, 9);
  const std::optional<int> gpus = maybeInt(-1, 10);
  const std::size_t keptHosts = nodes ? static_cast<std::size_t>(std::max(*nodes, 0)) : pool.size();
  int fewestSlots = 1 << 20;
  for (std::size_t i = 0; i < std::min(keptHosts, pool.size()); ++i) {
    fewestSlots = std::min(fewestSlots, pool[i].slots);
  }
  const bool valid = (!nodes || (*nodes >= 1 && static_cast<std::size_t>(*nodes) <= pool.size())) &&
                     (!gpus || (*gpus >= 1 && *gpus <= fewestSlots));
  if (!valid) {
    RC_ASSERT_THROWS_AS(applyFilters(pool, "", "", nodes, gpus), LaunchError);
    return;
  }
  const ActiveResources r = applyFilters(pool, "", "", nodes, gpus);
  checkWellFormed(pool, r);
  RC_ASSERT(r.hosts.size() == keptHosts);
  for (std::size_t i = 0; i < r.hosts.size(); ++i) {
    RC_ASSERT(r.hosts[i].first == pool[i].name);
    const int expected = gpus ? *gpus : pool[i].slots;
    RC_ASSERT(r.hosts[i].second.size() == static_cast<std::size_t>(expected));
    RC_ASSERT(r.hosts[i].second.back() == expected - 1);
  }
}

rc::Gen<ActiveResources> genResources() {
  return rc::gen::exec([] {
    const auto n = *rc::gen::inRange<std::size_t>(1, 8);
    const auto names = *rc::gen::unique<std::vector<std::string>>(n, genHostName());
    ActiveResources r;
    for (const std::string& name : names) {
      auto slots = *rc::gen::unique<std::vector<int>>(*rc::gen::inRange<std::size_t>(1, 10),
                                                      rc::gen::inRange(0, kMaxSlotsPerHost));
      r.hosts.emplace_back(name, std::move(slots));
    }
    return r;
  });
}

RC_GTEST_PROP(LauncherWorldInfo, JsonAndBase64RoundTrip, ()) {
  const ActiveResources r = *genResources();
  RC_ASSERT(decodeWorldInfo(encodeWorldInfo(r)) == r);
  RC_ASSERT(decodeWorldInfo(encodeWorldInfoBase64(r)) == r);
  const std::string b64 = encodeWorldInfoBase64(r);
  RC_ASSERT(
      b64.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=") ==
      std::string::npos);
  RC_ASSERT(b64.size() % 4 == 0);
}

RC_GTEST_PROP(LauncherWorldInfo, GlobalRanksAreAPermutationInNodeOrder, ()) {
  const ActiveResources r = *genResources();
  std::int64_t expected = 0;
  for (std::size_t node = 0; node < r.hosts.size(); ++node) {
    for (std::size_t local = 0; local < r.hosts[node].second.size(); ++local) {
      RC_ASSERT(globalRank(r, node, static_cast<std::int64_t>(local)) == expected);
      ++expected;
    }
  }
  RC_ASSERT(worldSize(r) == expected);
}

}  // namespace
}  // namespace stretch::launcher
