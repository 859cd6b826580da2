#pragma once
// Which nodes run a world: the part of the elastic agent that turns "these nodes with these slots
// are available" into "start this many workers on these nodes". Used by AgentStateMachine and
// the simulator.
//
// Contract:
//  - The valid sizes and their batch come from elasticity::WorldSizeRules
//    (runtime/elasticity/world_size_rules.hpp), which the simulator and planner ask too.
//  - planWorld chooses the largest valid size the candidate nodes can hold and the nodes that
//    run it (see NodeSelection). Nodes left out are spare: alive, in the job, idle.
// Pure: no I/O, no clock, no global state.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/agent/node_sequence.hpp"
#include "runtime/elasticity/world_size_rules.hpp"

namespace stretch::agent {

using elasticity::WorldSizeRules;

// How a world is laid out on nodes.
//  WholeNodes  : a node runs a worker on every one of its slots or none. The world size is the
//                slot sum of a subset of the candidates: the largest valid sum, using the
//                earliest candidates possible (the subset whose last node comes first).
//                O(candidates) with equal slot counts, O(candidates x total slots) otherwise.
//  PartialNodes: any size up to the total: the largest valid size <= total slots, filling the
//                candidates in order; the last node used may leave slots idle.
enum class NodeSelection { WholeNodes, PartialNodes };

std::string_view toString(NodeSelection selection) noexcept;  // "whole-nodes", "partial-nodes"

struct CandidateNode {
  std::string nodeId;
  std::int64_t slots = 0;
  std::uint64_t key = 0;  // the caller's handle for the node, copied to its NodeShare
};

struct NodeShare {
  std::string nodeId;
  std::int64_t slots = 0;  // the node's slots
  std::int64_t used = 0;   // workers it runs, 1..slots
  std::uint64_t key = 0;   // the candidate's key
  bool operator==(const NodeShare&) const = default;
};

struct WorldPlan {
  std::int64_t worldSize = 0;
  std::vector<NodeShare> used;     // in candidate order; node rank = index
  std::vector<std::string> spare;  // candidates that run nothing, in candidate order
  bool operator==(const WorldPlan&) const = default;
};

// The largest valid world the candidates (in preference order; slots >= 1 each) can run, or
// nullopt when no valid size fits. Takes the candidates by value: pass an rvalue and their ids
// move into the plan.
std::optional<WorldPlan> planWorld(std::vector<CandidateNode> candidates,
                                   const WorldSizeRules& rules, NodeSelection selection);

// planWorld on a NodeSequence (the agent's pool): the same world on the same nodes.
struct MemberPlan {
  std::int64_t worldSize = 0;
  NodeSequence used;   // `used` = workers per node; node rank = position
  NodeSequence spare;  // the candidates that run nothing (their entries as given)
  bool operator==(const MemberPlan&) const = default;
};
// Each candidate's `used` must be its slots (as in the agent's pool; the sums are checked). O(log
// n) for PartialNodes and for WholeNodes when every candidate has the same slot count (a restart of
// a large job: no work per node); whole nodes of mixed sizes go through planWorld's subset sums
// (O(candidates x total slots)).
std::optional<MemberPlan> planMembers(const NodeSequence& candidates, const WorldSizeRules& rules,
                                      NodeSelection selection);

}  // namespace stretch::agent
