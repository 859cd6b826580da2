#pragma once
// The nodes of one job simulation and where each one is: in the job, in the scheduler's spare
// pool, in repair, preempted, away (left; may join again), dead, or not joined yet. Besides the
// cluster's nodes it holds the spares of the spare replacement policy and every node a scale
// event or the fault script may add, so node indices never change during a run.
//
// Internal to sim/job_sim.cpp and sim/detail/. Not thread-safe: one per run.

#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/scenario.hpp"

namespace stretch::sim::detail {

enum class NodeStatus : std::uint8_t {
  Unused,     // not joined yet (scale-up capacity, scripted joins)
  InJob,      // joined to the agent (member, spare or waiting there)
  SparePool,  // the scheduler's spare, outside the job
  Repair,     // failed, back after its repair time
  Preempted,  // taken by the spot market, back after the return time
  Away,       // left by a scale event or the script; may join again
  Dead,       // failed for good
};

struct Node {
  std::string id;
  std::int64_t slots = 0;
  NodeStatus status = NodeStatus::Unused;
  std::uint64_t epoch = 0;  // bumped on every status change: stale NodeBack events are ignored
};

class NodePool {
 public:
  // Every node the run may see, all Unused but the spares (SparePool). Throws ConfigError for a
  // script leave naming no node.
  explicit NodePool(const Scenario& scenario);

  std::int64_t size() const noexcept { return static_cast<std::int64_t>(nodes_.size()); }
  Node& operator[](std::int64_t node) { return nodes_[static_cast<std::size_t>(node)]; }
  const Node& operator[](std::int64_t node) const { return nodes_[static_cast<std::size_t>(node)]; }
  // The index of a node id; -1 when none.
  std::int64_t indexOf(const std::string& id) const;
  // The node of trace failure `i`: its id, or its index as digits. Throws ConfigError naming
  // failures.events[i].node when it is neither.
  std::int64_t resolveTraceNode(const std::string& node, std::size_t i) const;

  // Sets the status and bumps the epoch. Returns true when the node entered or left the job.
  bool setStatus(std::int64_t node, NodeStatus status);
  // The nodes in the job, ascending.
  const std::set<std::int64_t>& inJob() const noexcept { return inJob_; }
  std::int64_t jobNodes() const noexcept { return static_cast<std::int64_t>(inJob_.size()); }

  // How many nodes the job should have (the cluster's, moved by scale events and the script).
  std::int64_t targetNodes() const noexcept { return targetNodes_; }
  void raiseTarget() noexcept { ++targetNodes_; }
  void lowerTarget() noexcept;

  // The first spare of the pool, taken out of it; nullopt when the pool is empty.
  std::optional<std::int64_t> takeSpare();
  void addSpare(std::int64_t node) { spares_.push_back(node); }
  // A node for a scale join: one that left first, else one not joined yet; nullopt when none.
  std::optional<std::int64_t> takeJoinable();
  void sendAway(std::int64_t node) { away_.insert(node); }
  // A node the script joins leaves the away set and the spare pool.
  void reclaim(std::int64_t node);

 private:
  std::int64_t addNode(std::string id, std::int64_t slots, NodeStatus status);
  std::string freshName(std::int64_t index) const;

  std::vector<Node> nodes_;
  std::unordered_map<std::string, std::int64_t> indexOf_;
  std::set<std::int64_t> inJob_;
  std::set<std::int64_t> away_;
  std::deque<std::int64_t> spares_;
  std::deque<std::int64_t> unused_;
  std::int64_t targetNodes_ = 0;
};

}  // namespace stretch::sim::detail
