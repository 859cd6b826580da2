#pragma once
// NodeSequence: the nodes of a generation (or of the agent's pool) in rank order, as an
// immutable, persistent sequence. It is how a StartWorkers carries its membership: a restart of
// a 16,384-node world after one failure shares all but O(log n) of its entries with the previous
// generation's, so neither the agent nor the simulator does work per node on a restart.
//
// Contract:
//  - Entries are ordered by their key, strictly ascending (the agent's join order; positions
//    for a sequence built from a list).
//  - A node's place in the world is computed, never stored: node rank = position; first global
//    rank = the sum of `used` over the entries before it (NodeAssignment, operator[]).
//  - Immutable: every operation that "changes" a sequence returns a new one that shares its
//    unchanged parts with the old; copying a sequence copies one shared pointer. Sequences may
//    be read from any thread.
//  - Two sequences are equal when they list the same nodes (id, slots, used) in the same order;
//    keys are the builder's handles and are not compared.
//  - Costs: size and sums O(1); lookups, insert, erase, replace, split and concatenation
//    O(log n) expected (a treap whose priorities hash the key, so the shape is deterministic);
//    iteration O(1) amortised per entry; built from n entries in O(n).

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace stretch::agent {

// One node's part of a generation: global ranks firstRank .. firstRank + localWorldSize - 1,
// local ranks 0 .. localWorldSize - 1 (the node's first localWorldSize slots).
struct NodeAssignment {
  std::string nodeId;
  std::int64_t nodeRank = 0;  // GROUP_RANK: position among the nodes of this generation
  std::int64_t firstRank = 0;
  std::int64_t localWorldSize = 0;
  std::int64_t slots = 0;  // the node's slots (>= localWorldSize)
  bool operator==(const NodeAssignment&) const = default;
};

struct NodeEntry {
  std::string nodeId;
  std::int64_t slots = 0;
  std::int64_t used = 0;  // workers it runs (in a pool: its slots)
  std::uint64_t key = 0;
  bool operator==(const NodeEntry&) const = default;
};

class NodeSequence {
 public:
  struct Node;  // a tree node, defined in node_sequence.cpp

  NodeSequence() = default;
  // From assignments listed in node-rank order: keys are the positions; each nodeRank and
  // firstRank must be the computed one (checked).
  NodeSequence(std::initializer_list<NodeAssignment> nodes);
  static NodeSequence fromAssignments(const std::vector<NodeAssignment>& nodes);
  // From entries with strictly ascending keys (checked), in O(n).
  static NodeSequence fromSorted(std::vector<NodeEntry> entries);

  std::size_t size() const noexcept;
  bool empty() const noexcept { return root_ == nullptr; }
  std::int64_t usedSum() const noexcept;  // workers of the whole sequence
  std::int64_t slotSum() const noexcept;
  // Smallest and largest slot count of its nodes (0 when empty).
  std::int64_t minSlots() const noexcept;
  std::int64_t maxSlots() const noexcept;

  // Entry and assignment at a position (checked: index < size()).
  const NodeEntry& entry(std::size_t index) const;
  NodeAssignment operator[](std::size_t index) const;
  NodeAssignment front() const { return (*this)[0]; }
  NodeAssignment back() const { return (*this)[size() - 1]; }
  // The sum of `used` over the entries before `index` (index <= size()).
  std::int64_t firstRank(std::size_t index) const;
  // Position of the entry with this key; nullopt when absent.
  std::optional<std::size_t> indexOfKey(std::uint64_t key) const;
  // Position of the entry whose workers include global rank `rank`; nullopt when out of range.
  std::optional<std::size_t> indexOfRank(std::int64_t rank) const;
  // The fewest leading entries whose slots add up to at least `slots` (size() when all of them
  // do not).
  std::size_t prefixWithSlots(std::int64_t slots) const;

  // With the entry added at its key's place (the key must be absent: checked).
  NodeSequence inserted(NodeEntry entry) const;
  // Without the entry of this key (unchanged when absent).
  NodeSequence erased(std::uint64_t key) const;
  // With the entry at `index` replaced by one of the same key (checked).
  NodeSequence replaced(std::size_t index, NodeEntry entry) const;
  // The first `count` entries and the rest.
  std::pair<NodeSequence, NodeSequence> split(std::size_t count) const;
  // This sequence followed by `tail`, whose keys must all be larger (checked).
  NodeSequence concatenated(const NodeSequence& tail) const;

  // Forward iteration in rank order; dereferencing gives a NodeAssignment by value.
  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = NodeAssignment;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = NodeAssignment;

    const_iterator() = default;
    NodeAssignment operator*() const;
    const_iterator& operator++();
    const_iterator operator++(int) {
      const_iterator old = *this;
      ++*this;
      return old;
    }
    bool operator==(const const_iterator& other) const noexcept {
      return stack_.empty() ? other.stack_.empty()
                            : (!other.stack_.empty() && stack_.back() == other.stack_.back());
    }
    const NodeEntry& entry() const;

   private:
    friend class NodeSequence;
    void descend(const Node* node);
    std::vector<const Node*> stack_;  // the path of nodes whose entry is still to come
    std::int64_t index_ = 0;
    std::int64_t rank_ = 0;
  };
  const_iterator begin() const;
  const_iterator end() const { return {}; }

  std::vector<NodeEntry> entries() const;
  std::vector<NodeAssignment> assignments() const;
  std::vector<std::string> ids() const;

  bool operator==(const NodeSequence& other) const;

  // Tree nodes this thread has created so far, for tests that check an operation's cost.
  static std::uint64_t treeNodesMadeOnThisThread() noexcept;

 private:
  using Ptr = std::shared_ptr<const Node>;
  explicit NodeSequence(Ptr root) : root_(std::move(root)) {}
  Ptr root_;
};

}  // namespace stretch::agent
