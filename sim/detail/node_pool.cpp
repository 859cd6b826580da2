#include "sim/detail/node_pool.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "runtime/common/error.hpp"

namespace stretch::sim::detail {

NodePool::NodePool(const Scenario& s) {
  const std::int64_t g = s.cluster.gpusPerNode;
  for (std::int64_t i = 0; i < s.cluster.nodes; ++i) {
    addNode(s.nodeNames.empty() ? fmt::format("n{}", i) : s.nodeNames[static_cast<std::size_t>(i)],
            g, NodeStatus::Unused);
  }
  if (s.failures.replacement == ReplacementKind::Spares) {
    for (std::int64_t i = 0; i < s.failures.spares; ++i) {
      const auto n = addNode(freshName(size()), g, NodeStatus::SparePool);
      spares_.push_back(n);
    }
  }
  for (const ScaleEvent& e : s.scaleEvents) {
    if (e.kind != ScaleKind::Join) {
      continue;
    }
    for (std::int64_t i = 0; i < e.nodes; ++i) {
      unused_.push_back(addNode(freshName(size()), g, NodeStatus::Unused));
    }
  }
  for (std::size_t i = 0; i < s.script.size(); ++i) {
    const ScriptEvent& e = s.script[i];
    if (e.kind == ScriptKind::Join && !indexOf_.contains(e.node)) {
      addNode(e.node, e.slots > 0 ? e.slots : g, NodeStatus::Unused);
    } else if (e.kind == ScriptKind::Leave && !indexOf_.contains(e.node)) {
      throw ConfigError(ErrorDetail{fmt::format("script[{}].node", i), e.node,
                                    "a node of the cluster or one a script join adds"});
    }
  }
  targetNodes_ = s.cluster.nodes;
}

std::int64_t NodePool::addNode(std::string id, std::int64_t slots, NodeStatus status) {
  const auto index = size();
  indexOf_.emplace(id, index);
  nodes_.push_back(Node{std::move(id), slots, status, 0});
  return index;
}

std::string NodePool::freshName(std::int64_t index) const {
  std::string name = fmt::format("n{}", index);
  while (indexOf_.contains(name)) {
    name += "_";
  }
  return name;
}

std::int64_t NodePool::indexOf(const std::string& id) const {
  const auto it = indexOf_.find(id);
  return it == indexOf_.end() ? -1 : it->second;
}

std::int64_t NodePool::resolveTraceNode(const std::string& node, std::size_t i) const {
  if (const auto it = indexOf_.find(node); it != indexOf_.end()) {
    return it->second;
  }
  const bool digits =
      !node.empty() && node.size() < 12 &&
      std::all_of(node.begin(), node.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (digits) {
    const auto index = std::stoll(node);
    if (index < size()) {
      return index;
    }
  }
  throw ConfigError(ErrorDetail{fmt::format("failures.events[{}].node", i), node,
                                fmt::format("a node id of the run ({} ... {}) or an index below {}",
                                            nodes_.front().id, nodes_.back().id, nodes_.size())});
}

bool NodePool::setStatus(std::int64_t node, NodeStatus status) {
  Node& n = (*this)[node];
  const bool wasUp = n.status == NodeStatus::InJob;
  const bool up = status == NodeStatus::InJob;
  n.status = status;
  ++n.epoch;
  if (wasUp == up) {
    return false;
  }
  if (up) {
    inJob_.insert(node);
  } else {
    inJob_.erase(node);
  }
  return true;
}

void NodePool::lowerTarget() noexcept {
  targetNodes_ = std::max<std::int64_t>(0, targetNodes_ - 1);
}

std::optional<std::int64_t> NodePool::takeSpare() {
  if (spares_.empty()) {
    return std::nullopt;
  }
  const std::int64_t spare = spares_.front();
  spares_.pop_front();
  return spare;
}

std::optional<std::int64_t> NodePool::takeJoinable() {
  if (!away_.empty()) {
    const std::int64_t node = *away_.begin();
    away_.erase(away_.begin());
    return node;
  }
  if (!unused_.empty()) {
    const std::int64_t node = unused_.front();
    unused_.pop_front();
    return node;
  }
  return std::nullopt;
}

void NodePool::reclaim(std::int64_t node) {
  away_.erase(node);
  if ((*this)[node].status == NodeStatus::SparePool) {
    spares_.erase(std::find(spares_.begin(), spares_.end(), node));
  }
}

}  // namespace stretch::sim::detail
