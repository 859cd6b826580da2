#include "runtime/agent/node_sequence.hpp"

#include <algorithm>

#include "runtime/common/check.hpp"

namespace stretch::agent {

// A treap node: ordered by entry.key, a max-heap on (priority, key). Never changed once shared.
struct NodeSequence::Node {
  NodeEntry entry;
  std::uint64_t priority = 0;
  Ptr left;
  Ptr right;
  std::size_t count = 1;
  std::int64_t used = 0;
  std::int64_t slots = 0;
  std::int64_t minSlots = 0;
  std::int64_t maxSlots = 0;
};

namespace {

using Node = NodeSequence::Node;  // NOLINT: the anonymous helpers below work on it
using Ptr = std::shared_ptr<const Node>;

thread_local std::uint64_t treeNodesMade = 0;

std::uint64_t priorityOf(std::uint64_t key) {
  // splitmix64's finaliser: a fixed hash, so equal keys always build the same tree.
  std::uint64_t z = key + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::size_t countOf(const Ptr& t) {
  return t ? t->count : 0;
}
std::int64_t usedOf(const Ptr& t) {
  return t ? t->used : 0;
}
std::int64_t slotsOf(const Ptr& t) {
  return t ? t->slots : 0;
}

void aggregate(Node& n) {
  n.count = 1 + countOf(n.left) + countOf(n.right);
  n.used = n.entry.used + usedOf(n.left) + usedOf(n.right);
  n.slots = n.entry.slots + slotsOf(n.left) + slotsOf(n.right);
  n.minSlots = n.entry.slots;
  n.maxSlots = n.entry.slots;
  for (const Ptr* child : {&n.left, &n.right}) {
    if (*child) {
      n.minSlots = std::min(n.minSlots, (*child)->minSlots);
      n.maxSlots = std::max(n.maxSlots, (*child)->maxSlots);
    }
  }
}

Ptr make(NodeEntry entry, std::uint64_t priority, Ptr left, Ptr right) {
  ++treeNodesMade;
  auto n = std::make_shared<Node>();
  n->entry = std::move(entry);
  n->priority = priority;
  n->left = std::move(left);
  n->right = std::move(right);
  aggregate(*n);
  return n;
}

Ptr withChildren(const Node& n, Ptr left, Ptr right) {
  return make(n.entry, n.priority, std::move(left), std::move(right));
}

bool above(const Node& a, const Node& b) {
  return a.priority != b.priority ? a.priority > b.priority : a.entry.key < b.entry.key;
}

// Every key of a is smaller than every key of b.
Ptr merge(const Ptr& a, const Ptr& b) {
  if (!a) {
    return b;
  }
  if (!b) {
    return a;
  }
  if (above(*a, *b)) {
    return withChildren(*a, a->left, merge(a->right, b));
  }
  return withChildren(*b, merge(a, b->left), b->right);
}

// (the first k entries, the rest)
std::pair<Ptr, Ptr> splitCount(const Ptr& t, std::size_t k) {
  if (!t) {
    return {};
  }
  if (k == 0) {
    return {nullptr, t};
  }
  if (k >= t->count) {
    return {t, nullptr};
  }
  const std::size_t left = countOf(t->left);
  if (k <= left) {
    auto [a, b] = splitCount(t->left, k);
    return {std::move(a), withChildren(*t, std::move(b), t->right)};
  }
  auto [a, b] = splitCount(t->right, k - left - 1);
  return {withChildren(*t, t->left, std::move(a)), std::move(b)};
}

// (keys < key, keys >= key)
std::pair<Ptr, Ptr> splitKey(const Ptr& t, std::uint64_t key) {
  if (!t) {
    return {};
  }
  if (t->entry.key < key) {
    auto [a, b] = splitKey(t->right, key);
    return {withChildren(*t, t->left, std::move(a)), std::move(b)};
  }
  auto [a, b] = splitKey(t->left, key);
  return {std::move(a), withChildren(*t, std::move(b), t->right)};
}

const Node& at(const Ptr& root, std::size_t index) {
  const Node* n = root.get();
  while (true) {
    const std::size_t left = countOf(n->left);
    if (index < left) {
      n = n->left.get();
    } else if (index == left) {
      return *n;
    } else {
      index -= left + 1;
      n = n->right.get();
    }
  }
}

// Position of the entry whose share of a weight (own: an entry's, total: a subtree's) covers
// `offset`, counting from 0 over the entries in order; nullopt outside [0, total(root)).
template <class Own, class Total>
std::optional<std::size_t> entryCovering(const Ptr& root, std::int64_t offset, Own own,
                                         Total total) {
  if (offset < 0 || offset >= total(root)) {
    return std::nullopt;
  }
  std::size_t before = 0;
  const Node* n = root.get();
  while (n != nullptr) {
    const std::int64_t left = total(n->left);
    if (offset < left) {
      n = n->left.get();
    } else if (offset < left + own(*n)) {
      return before + countOf(n->left);
    } else {
      offset -= left + own(*n);
      before += countOf(n->left) + 1;
      n = n->right.get();
    }
  }
  return std::nullopt;
}

Ptr build(std::vector<NodeEntry> entries) {
  // A Cartesian tree by priority over the key order, with the right spine on a stack: O(n).
  std::vector<std::shared_ptr<Node>> spine;
  treeNodesMade += entries.size();
  for (NodeEntry& e : entries) {
    auto n = std::make_shared<Node>();
    n->priority = priorityOf(e.key);
    n->entry = std::move(e);
    std::shared_ptr<Node> last;
    while (!spine.empty() && above(*n, *spine.back())) {
      last = std::move(spine.back());
      spine.pop_back();
    }
    n->left = last;
    if (!spine.empty()) {
      spine.back()->right = n;
    }
    spine.push_back(std::move(n));
  }
  if (spine.empty()) {
    return nullptr;
  }
  // Aggregates bottom-up (post-order, iterative: the depth is O(log n) expected anyway).
  std::vector<std::pair<Node*, bool>> todo{{spine.front().get(), false}};
  while (!todo.empty()) {
    auto [n, childrenDone] = todo.back();
    todo.pop_back();
    if (childrenDone) {
      aggregate(*n);
      continue;
    }
    todo.emplace_back(n, true);
    for (const Ptr* child : {&n->left, &n->right}) {
      if (*child) {
        todo.emplace_back(const_cast<Node*>(child->get()), false);
      }
    }
  }
  return spine.front();
}

}  // namespace

NodeSequence::NodeSequence(std::initializer_list<NodeAssignment> nodes)
    : NodeSequence(fromAssignments(std::vector<NodeAssignment>(nodes))) {}

NodeSequence NodeSequence::fromAssignments(const std::vector<NodeAssignment>& nodes) {
  std::vector<NodeEntry> entries;
  entries.reserve(nodes.size());
  std::int64_t rank = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const NodeAssignment& a = nodes[i];
    STRETCH_CHECK(a.nodeRank == static_cast<std::int64_t>(i) && a.firstRank == rank,
                  "node {} at position {} with node rank {} and first rank {}: expected {} and {}",
                  a.nodeId, i, a.nodeRank, a.firstRank, i, rank);
    entries.push_back(NodeEntry{a.nodeId, a.slots, a.localWorldSize, i});
    rank += a.localWorldSize;
  }
  return fromSorted(std::move(entries));
}

NodeSequence NodeSequence::fromSorted(std::vector<NodeEntry> entries) {
  for (std::size_t i = 1; i < entries.size(); ++i) {
    STRETCH_CHECK_LT(entries[i - 1].key, entries[i].key, "node sequence keys at {}", i);
  }
  return NodeSequence(build(std::move(entries)));
}

std::size_t NodeSequence::size() const noexcept {
  return countOf(root_);
}
std::int64_t NodeSequence::usedSum() const noexcept {
  return usedOf(root_);
}
std::int64_t NodeSequence::slotSum() const noexcept {
  return slotsOf(root_);
}
std::int64_t NodeSequence::minSlots() const noexcept {
  return root_ ? root_->minSlots : 0;
}
std::int64_t NodeSequence::maxSlots() const noexcept {
  return root_ ? root_->maxSlots : 0;
}

const NodeEntry& NodeSequence::entry(std::size_t index) const {
  STRETCH_CHECK_LT(index, size(), "node sequence index");
  return at(root_, index).entry;
}

NodeAssignment NodeSequence::operator[](std::size_t index) const {
  const NodeEntry& e = entry(index);
  return NodeAssignment{e.nodeId, static_cast<std::int64_t>(index), firstRank(index), e.used,
                        e.slots};
}

std::int64_t NodeSequence::firstRank(std::size_t index) const {
  STRETCH_CHECK_LE(index, size(), "node sequence index");
  std::int64_t rank = 0;
  const Node* n = root_.get();
  while (n != nullptr) {
    const std::size_t left = countOf(n->left);
    if (index <= left) {
      n = n->left.get();
    } else {
      rank += usedOf(n->left) + n->entry.used;
      index -= left + 1;
      n = n->right.get();
    }
  }
  return rank;
}

std::optional<std::size_t> NodeSequence::indexOfKey(std::uint64_t key) const {
  std::size_t before = 0;
  const Node* n = root_.get();
  while (n != nullptr) {
    if (key < n->entry.key) {
      n = n->left.get();
    } else if (key > n->entry.key) {
      before += countOf(n->left) + 1;
      n = n->right.get();
    } else {
      return before + countOf(n->left);
    }
  }
  return std::nullopt;
}

std::optional<std::size_t> NodeSequence::indexOfRank(std::int64_t rank) const {
  return entryCovering(
      root_, rank, [](const Node& n) { return n.entry.used; }, usedOf);
}

std::size_t NodeSequence::prefixWithSlots(std::int64_t slots) const {
  if (slots <= 0) {
    return 0;
  }
  if (slots > slotSum()) {
    return size();
  }
  return *entryCovering(
             root_, slots - 1, [](const Node& n) { return n.entry.slots; }, slotsOf) +
         1;
}

NodeSequence NodeSequence::inserted(NodeEntry entry) const {
  STRETCH_CHECK(!indexOfKey(entry.key), "node {}: key {} is already in the sequence", entry.nodeId,
                entry.key);
  auto [less, rest] = splitKey(root_, entry.key);
  const std::uint64_t priority = priorityOf(entry.key);
  Ptr single = make(std::move(entry), priority, nullptr, nullptr);
  return NodeSequence(merge(merge(less, single), rest));
}

NodeSequence NodeSequence::erased(std::uint64_t key) const {
  const auto index = indexOfKey(key);
  if (!index) {
    return *this;
  }
  auto [before, rest] = splitCount(root_, *index);
  return NodeSequence(merge(before, splitCount(rest, 1).second));
}

NodeSequence NodeSequence::replaced(std::size_t index, NodeEntry entry) const {
  STRETCH_CHECK_EQ(this->entry(index).key, entry.key, "replaced entry's key");
  auto [before, rest] = splitCount(root_, index);
  const std::uint64_t priority = priorityOf(entry.key);
  Ptr single = make(std::move(entry), priority, nullptr, nullptr);
  return NodeSequence(merge(merge(before, single), splitCount(rest, 1).second));
}

std::pair<NodeSequence, NodeSequence> NodeSequence::split(std::size_t count) const {
  auto [a, b] = splitCount(root_, count);
  return {NodeSequence(std::move(a)), NodeSequence(std::move(b))};
}

NodeSequence NodeSequence::concatenated(const NodeSequence& tail) const {
  if (!empty() && !tail.empty()) {
    STRETCH_CHECK_LT(entry(size() - 1).key, tail.entry(0).key, "concatenated sequences' keys");
  }
  return NodeSequence(merge(root_, tail.root_));
}

// ---- iteration ----------------------------------------------------------------------------

void NodeSequence::const_iterator::descend(const Node* node) {
  for (; node != nullptr; node = node->left.get()) {
    stack_.push_back(node);
  }
}

NodeSequence::const_iterator NodeSequence::begin() const {
  const_iterator it;
  it.descend(root_.get());
  return it;
}

const NodeEntry& NodeSequence::const_iterator::entry() const {
  STRETCH_CHECK(!stack_.empty(), "dereferencing the end of a node sequence");
  return stack_.back()->entry;
}

NodeAssignment NodeSequence::const_iterator::operator*() const {
  const NodeEntry& e = entry();
  return NodeAssignment{e.nodeId, index_, rank_, e.used, e.slots};
}

NodeSequence::const_iterator& NodeSequence::const_iterator::operator++() {
  STRETCH_CHECK(!stack_.empty(), "advancing past the end of a node sequence");
  const Node* n = stack_.back();
  stack_.pop_back();
  ++index_;
  rank_ += n->entry.used;
  descend(n->right.get());
  return *this;
}

std::vector<NodeEntry> NodeSequence::entries() const {
  std::vector<NodeEntry> out;
  out.reserve(size());
  for (auto it = begin(); it != end(); ++it) {
    out.push_back(it.entry());
  }
  return out;
}

std::vector<NodeAssignment> NodeSequence::assignments() const {
  return {begin(), end()};
}

std::vector<std::string> NodeSequence::ids() const {
  std::vector<std::string> out;
  out.reserve(size());
  for (auto it = begin(); it != end(); ++it) {
    out.push_back(it.entry().nodeId);
  }
  return out;
}

std::uint64_t NodeSequence::treeNodesMadeOnThisThread() noexcept {
  return treeNodesMade;
}

bool NodeSequence::operator==(const NodeSequence& other) const {
  if (root_ == other.root_) {
    return true;
  }
  if (size() != other.size() || usedSum() != other.usedSum()) {
    return false;
  }
  for (auto a = begin(), b = other.begin(); a != end(); ++a, ++b) {
    const NodeEntry& x = a.entry();
    const NodeEntry& y = b.entry();
    if (x.nodeId != y.nodeId || x.slots != y.slots || x.used != y.used) {
      return false;
    }
  }
  return true;
}

}  // namespace stretch::agent
