#include "runtime/launcher/node_tracker.hpp"

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace stretch::launcher {

using namespace agent;

NodeTracker::NodeTracker(comm::Store& store, Duration keepAliveTimeout,
                         std::vector<std::string> launchHosts, Duration window,
                         Duration checkInterval)
    : store_(store),
      keepAliveTimeout_(keepAliveTimeout),
      launchHosts_(std::move(launchHosts)),
      window_(window),
      checkInterval_(std::min(checkInterval, keepAliveTimeout / 4)),
      holding_(!launchHosts_.empty()) {}

std::vector<Event> NodeTracker::poll(Time now, bool withKeepAlives, bool readLists) {
  noticeStall(now);
  std::vector<Event> out;
  const std::vector<std::string> registrations =
      readLists ? readRecords(store_, "nodes", nextRecord_) : std::vector<std::string>();
  for (const auto& text : registrations) {
    const std::int64_t slot = nextRecord_++;
    const NodeRecord record = decodeNodeRecord(text);
    auto& node = nodes_[record.nodeId];
    if (node.alive)
      out.emplace_back(NodeLeft{record.nodeId, "its agent registered again"});
    if (node.slot >= 0)
      slots_.erase(node.slot);
    node.record = record;
    node.alive = true;
    node.slot = slot;
    node.lastChange = now;
    slots_[slot] = record.nodeId;
    spdlog::info("controller: node {} registered ({} slot(s), address {})", record.nodeId,
                 record.slots, record.address);
    if (holding_) {
      held_.push_back(record.nodeId);
      holdSince_ = holdSince_.value_or(now);
    } else {
      out.emplace_back(NodeJoined{record.nodeId, record.slots});
    }
  }
  // Every node lost in this poll (marked by the caller, or silent) goes in one event: one restart
  // however many went silent together (a loaded host starves many agents' keep-alives at once).
  KeepAliveLost lost;
  for (auto& id : pendingLost_) {
    auto it = nodes_.find(id);
    if (it != nodes_.end() && it->second.alive) {
      it->second.alive = false;
      lost.nodeIds.push_back(id);
    }
  }
  pendingLost_.clear();
  const std::vector<std::string> departures =
      readLists ? readRecords(store_, "leaves", nextLeave_) : std::vector<std::string>();
  for (const auto& text : departures) {
    ++nextLeave_;
    const auto tab = text.find('\t');
    const std::string id = text.substr(0, tab);
    const std::string why = tab == std::string::npos ? "its agent left" : text.substr(tab + 1);
    auto it = nodes_.find(id);
    if (it != nodes_.end() && it->second.alive) {
      it->second.alive = false;
      if (!isHeld(id))
        out.emplace_back(NodeLeft{id, why});
    } else if (holding_) {
      gone_.insert(id);  // its agent never registered (a runner that failed)
    }
  }
  if (holding_)
    maybeRelease(now, out);
  for (auto& [id, node] : nodes_) {
    if (!withKeepAlives)
      break;
    if (!node.alive)
      continue;
    if (silent(node, now)) {
      node.alive = false;
      spdlog::warn("controller: node {} sent no keep-alive for {}", id,
                   formatDuration(keepAliveTimeout_));
      if (!isHeld(id))
        lost.nodeIds.push_back(id);
    }
  }
  if (!lost.nodeIds.empty())
    out.emplace_back(std::move(lost));
  return out;
}

bool NodeTracker::silent(const std::string& id, Time now) {
  noticeStall(now);
  auto it = nodes_.find(id);
  return it == nodes_.end() || !it->second.alive || silent(it->second, now);
}

std::int64_t NodeTracker::slot(const std::string& id) const {
  const auto it = nodes_.find(id);
  return it == nodes_.end() ? -1 : it->second.slot;
}

void NodeTracker::markLost(const std::string& id) {
  pendingLost_.insert(id);
}

std::vector<std::string> NodeTracker::alive() const {
  std::vector<std::string> out;
  for (const auto& [id, node] : nodes_) {
    if (node.alive && !pendingLost_.count(id))
      out.push_back(id);
  }
  return out;
}

const NodeRecord* NodeTracker::record(const std::string& id) const {
  auto it = nodes_.find(id);
  return it == nodes_.end() ? nullptr : &it->second.record;
}

bool NodeTracker::silent(Node& node, Time now) {
  readGroups(now);
  return now - node.lastChange > keepAliveTimeout_;
}

void NodeTracker::readGroups(Time now) {
  if (lastRead_ && now - *lastRead_ < checkInterval_)
    return;
  lastRead_ = now;
  // The groups of the nodes alive now, all in one request (slots_ is sorted, so a group's slots
  // are adjacent).
  std::vector<std::int64_t> due;
  std::vector<std::string> keys;
  for (const auto& [slot, id] : slots_) {
    const std::int64_t group = slot / kKeepAliveGroup;
    if (!due.empty() && due.back() == group)
      continue;
    const auto n = nodes_.find(id);
    if (n == nodes_.end() || !n->second.alive)
      continue;
    due.push_back(group);
    keys.push_back(keepAliveKey(slot));
  }
  if (keys.empty())
    return;
  const std::vector<std::optional<std::string>> values = store_.tryMultiGet(keys);
  for (std::size_t i = 0; i < due.size(); ++i) {
    // No key yet: none of the group's nodes has beaten (an add() would read it as 0 too).
    std::int64_t value = 0;
    if (const auto& text = values[i]) {
      const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
      if (ec != std::errc() || end != text->data() + text->size())
        throw ProtocolError(
            fmt::format("keep-alive counter {} = \"{}\": expected an integer", keys[i], *text));
    }
    applyGroup(due[i], value, now);
  }
}

void NodeTracker::applyGroup(std::int64_t group, std::int64_t value, Time now) {
  Group& g = groups_[group];
  if (g.value && value >= *g.value) {
    // Each field of the change is how often that node beat since the last read (at most 15 at
    // the agents' interval; more only after a stall, which noticeStall forgives anyway).
    const std::int64_t change = value - *g.value;
    constexpr std::int64_t kMask = (std::int64_t{1} << kKeepAliveFieldBits) - 1;
    for (std::int64_t field = 0; field < kKeepAliveGroup; ++field) {
      if (((change >> (kKeepAliveFieldBits * field)) & kMask) == 0)
        continue;
      const auto it = slots_.find(group * kKeepAliveGroup + field);
      if (it == slots_.end())
        continue;
      if (auto n = nodes_.find(it->second); n != nodes_.end() && n->second.alive)
        n->second.lastChange = now;
    }
  }
  g.value = value;
  // Room for hours of beats at any interval (the last field adds 2^44 a beat); a node's beat
  // that overflowed the counter would fail.
  if (value > (std::int64_t{1} << 60)) {
    store_.add(keepAliveKey(group * kKeepAliveGroup), -value);
    g.value = 0;
  }
}

void NodeTracker::noticeStall(Time now) {
  if (lastLook_ && now - *lastLook_ > keepAliveTimeout_ / 2) {
    spdlog::warn(
        "controller: no look at the nodes for {} (was this process stopped?): every node's "
        "keep-alive timeout starts again now",
        formatDuration(now - *lastLook_));
    for (auto& [id, node] : nodes_)
      node.lastChange = std::max(node.lastChange, now);
  }
  lastLook_ = now;
}

bool NodeTracker::isHeld(const std::string& id) const {
  return holding_ && std::find(held_.begin(), held_.end(), id) != held_.end();
}

void NodeTracker::maybeRelease(Time now, std::vector<Event>& out) {
  const bool allIn = std::all_of(launchHosts_.begin(), launchHosts_.end(), [&](const auto& h) {
    return gone_.contains(h) || std::find(held_.begin(), held_.end(), h) != held_.end();
  });
  if (!allIn && !(holdSince_ && now - *holdSince_ >= window_))
    return;
  auto rank = [&](const std::string& id) {
    const auto it = std::find(launchHosts_.begin(), launchHosts_.end(), id);
    return static_cast<std::size_t>(it - launchHosts_.begin());  // others after, in arrival order
  };
  std::stable_sort(held_.begin(), held_.end(),
                   [&](const auto& a, const auto& b) { return rank(a) < rank(b); });
  holding_ = false;
  for (const auto& id : held_) {
    const auto it = nodes_.find(id);
    if (it != nodes_.end() && it->second.alive)
      out.emplace_back(NodeJoined{id, it->second.record.slots});
  }
  held_.clear();
}

}  // namespace stretch::launcher
