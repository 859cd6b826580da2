#include "runtime/launcher/node_tracker.hpp"

#include <algorithm>
#include <cstddef>
#include <utility>

#include <spdlog/spdlog.h>

namespace stretch::launcher {

using namespace agent;

NodeTracker::NodeTracker(comm::Store& store, Duration heartbeatTimeout,
                         std::vector<std::string> launchHosts, Duration window,
                         Duration checkInterval)
    : store_(store),
      heartbeatTimeout_(heartbeatTimeout),
      launchHosts_(std::move(launchHosts)),
      window_(window),
      checkInterval_(std::min(checkInterval, heartbeatTimeout / 5)),
      holding_(!launchHosts_.empty()) {}

std::vector<Event> NodeTracker::poll(Time now, bool withHeartbeats) {
  noticeStall(now);
  std::vector<Event> out;
  for (const auto& text : readRecords(store_, "nodes", nextRecord_)) {
    ++nextRecord_;
    const NodeRecord record = decodeNodeRecord(text);
    auto& node = nodes_[record.nodeId];
    if (node.alive)
      out.emplace_back(NodeLeft{record.nodeId, "its agent registered again"});
    node.record = record;
    node.alive = true;
    node.counter = -1;
    node.lastChange = now;
    node.lastRead.reset();
    spdlog::info("controller: node {} registered ({} slot(s), address {})", record.nodeId,
                 record.slots, record.address);
    if (holding_) {
      held_.push_back(record.nodeId);
      holdSince_ = holdSince_.value_or(now);
    } else {
      out.emplace_back(NodeJoined{record.nodeId, record.slots});
    }
  }
  for (auto& id : pendingLost_) {
    auto it = nodes_.find(id);
    if (it != nodes_.end() && it->second.alive) {
      it->second.alive = false;
      out.emplace_back(HeartbeatLost{id});
    }
  }
  pendingLost_.clear();
  for (const auto& text : readRecords(store_, "leaves", nextLeave_)) {
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
  if (!withHeartbeats)
    return out;
  for (auto& [id, node] : nodes_) {
    if (!node.alive)
      continue;
    if (silent(id, node, now)) {
      node.alive = false;
      spdlog::warn("controller: node {} sent no keep-alive for {}", id,
                   formatDuration(heartbeatTimeout_));
      if (!isHeld(id))
        out.emplace_back(HeartbeatLost{id});
    }
  }
  return out;
}

bool NodeTracker::silent(const std::string& id, Time now) {
  noticeStall(now);
  auto it = nodes_.find(id);
  return it == nodes_.end() || !it->second.alive || silent(id, it->second, now);
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

bool NodeTracker::silent(const std::string& id, Node& node, Time now) {
  if (node.lastRead && now - *node.lastRead < checkInterval_)
    return now - node.lastChange > heartbeatTimeout_;
  node.lastRead = now;
  const std::int64_t counter = store_.add("hb/" + id, 0);
  if (counter != node.counter) {
    node.counter = counter;
    node.lastChange = now;
    return false;
  }
  return now - node.lastChange > heartbeatTimeout_;
}

void NodeTracker::noticeStall(Time now) {
  if (lastLook_ && now - *lastLook_ > heartbeatTimeout_ / 2) {
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
