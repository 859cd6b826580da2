#include "runtime/agent/rendezvous.hpp"

#include <algorithm>
#include <charconv>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/comm/errors.hpp"

namespace stretch::agent {

namespace {

constexpr std::string_view kLeft = "left";

void require(bool ok, const char* path, const std::string& value, const char* expected) {
  if (!ok) {
    throw ConfigError(ErrorDetail{path, value, expected});
  }
}

bool validNodeId(std::string_view id) {
  return !id.empty() && std::none_of(id.begin(), id.end(), [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
  });
}

std::optional<std::int64_t> parseInt(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

std::string encodeNode(const RendezvousNode& node) {
  return fmt::format("{}\t{}", node.nodeId, node.slots);
}

RendezvousNode decodeNode(std::string_view text, std::string_view key) {
  const std::size_t tab = text.find('\t');
  const auto slots = tab == std::string_view::npos ? std::nullopt : parseInt(text.substr(tab + 1));
  if (!slots || !validNodeId(text.substr(0, tab)) || *slots < 1) {
    throw RendezvousError(ErrorDetail{std::string(key), fmt::format("\"{}\"", text),
                                      "\"<node id>\\t<slots>\" written by a Stretch agent"});
  }
  return RendezvousNode{std::string(text.substr(0, tab)), *slots};
}

}  // namespace

void validate(const RendezvousOptions& o) {
  require(o.minNodes >= 1, "rendezvous.min_nodes", std::to_string(o.minNodes),
          "a positive integer");
  require(o.maxNodes >= o.minNodes, "rendezvous.max_nodes", std::to_string(o.maxNodes),
          "an integer >= rendezvous.min_nodes");
  require(o.lastCall >= Duration{0}, "rendezvous.last_call", formatDuration(o.lastCall),
          "a non-negative duration");
  require(o.joinTimeout > Duration{0}, "rendezvous.join_timeout", formatDuration(o.joinTimeout),
          "a positive duration");
  if (o.orphanTimeout) {
    require(*o.orphanTimeout > Duration{0}, "rendezvous.orphan_timeout",
            formatDuration(*o.orphanTimeout), "a positive duration");
  }
  require(o.pollInterval.count() > 0, "rendezvous.poll_interval", formatDuration(o.pollInterval),
          "a positive duration");
  require(!o.prefix.empty(), "rendezvous.prefix", "\"\"", "a non-empty key prefix");
}

const MemberNode* Membership::find(std::string_view nodeId) const {
  const auto it = std::find_if(nodes.begin(), nodes.end(),
                               [&](const MemberNode& n) { return n.nodeId == nodeId; });
  return it == nodes.end() ? nullptr : &*it;
}

std::int64_t Membership::totalSlots() const {
  std::int64_t total = 0;
  for (const MemberNode& n : nodes) {
    total += n.slots;
  }
  return total;
}

StoreRendezvous::StoreRendezvous(std::shared_ptr<comm::Store> store, RendezvousOptions options,
                                 Clock clock)
    : store_(std::move(store)), options_(std::move(options)), clock_(std::move(clock)) {
  validate(options_);
  if (!store_) {
    throw ConfigError(ErrorDetail{"rendezvous store", "null", "a Store"});
  }
  if (!clock_) {
    clock_ = systemClock();
  }
}

std::string StoreRendezvous::key(std::uint64_t generation, std::string_view leaf) const {
  return fmt::format("{}/g/{}/{}", options_.prefix, generation, leaf);
}

std::optional<std::string> StoreRendezvous::read(const std::string& key) {
  if (!store_->check({key})) {
    return std::nullopt;
  }
  return store_->get(key);  // present: returns at once (keys are never deleted)
}

std::optional<Membership> StoreRendezvous::membership(std::uint64_t generation) {
  const std::string k = key(generation, "members");
  const std::optional<std::string> text = read(k);
  if (!text) {
    return std::nullopt;
  }
  Membership m;
  m.generation = generation;
  std::size_t pos = 0;
  while (pos < text->size()) {
    std::size_t end = text->find('\n', pos);
    if (end == std::string::npos) {
      end = text->size();
    }
    const RendezvousNode node = decodeNode(std::string_view(*text).substr(pos, end - pos), k);
    m.nodes.push_back({node.nodeId, static_cast<std::int64_t>(m.nodes.size()), node.slots});
    pos = end + 1;
  }
  return m;
}

std::uint64_t StoreRendezvous::latestGeneration() {
  const std::string hintKey = options_.prefix + "/latest";
  const std::optional<std::string> hintText = read(hintKey);
  std::uint64_t latest = 0;
  if (hintText) {
    const auto value = parseInt(*hintText);
    if (!value || *value < 0) {
      throw RendezvousError(ErrorDetail{hintKey, fmt::format("\"{}\"", *hintText),
                                        "a generation number written by a Stretch agent"});
    }
    latest = static_cast<std::uint64_t>(*value);
  }
  // The hint may lag (an agent closes a round, then updates it): the truth is the first round
  // without a membership.
  const std::uint64_t hinted = latest;
  while (store_->check({key(latest + 1, "members")})) {
    ++latest;
  }
  if (latest != hinted) {
    store_->compareSet(hintKey, hintText.value_or(""), std::to_string(latest));
  }
  return latest;
}

std::vector<RendezvousNode> StoreRendezvous::records(std::uint64_t generation,
                                                     std::string_view list, std::int64_t count) {
  std::vector<RendezvousNode> out;
  std::set<std::string> seen;
  for (std::int64_t i = 0; i < count; ++i) {
    const std::string k = key(generation, fmt::format("{}/{}", list, i));
    // Registered (counted) but not written yet, or its writer died in between: skipped.
    if (const std::optional<std::string> text = read(k)) {
      RendezvousNode node = decodeNode(*text, k);
      if (seen.insert(node.nodeId).second) {
        out.push_back(std::move(node));
      }
    }
  }
  return out;
}

bool StoreRendezvous::mayOpen(std::uint64_t generation, Time now) {
  if (generation <= 1) {
    return true;
  }
  const std::optional<Membership> previous = membership(generation - 1);
  if (!previous) {
    return false;
  }
  if (previous->find(nodeId_) != nullptr) {
    return true;
  }
  return options_.orphanTimeout &&
         deadNodes(now, *options_.orphanTimeout).size() == previous->nodes.size();
}

void StoreRendezvous::close(std::uint64_t generation, std::int64_t registered) {
  // Wait briefly for registrations counted but not written yet.
  std::vector<std::string> keys;
  for (std::int64_t i = 0; i < registered; ++i) {
    keys.push_back(key(generation, fmt::format("node/{}", i)));
  }
  try {
    store_->wait(keys, std::chrono::duration_cast<comm::Duration>(
                           std::min<Duration>(options_.joinTimeout, std::chrono::seconds(5))));
  } catch (const comm::StoreTimeoutError&) {
    // A registrant died between counting and writing; the others still form the round.
  }
  std::vector<RendezvousNode> nodes = records(generation, "node", registered);
  if (static_cast<std::int64_t>(nodes.size()) > options_.maxNodes) {
    nodes.resize(static_cast<std::size_t>(options_.maxNodes));
  }
  std::string text;
  for (const RendezvousNode& node : nodes) {
    text += encodeNode(node);
    text += '\n';
  }
  if (!text.empty()) {
    text.pop_back();
  }
  // The first closer wins; everyone reads the winner's membership.
  store_->compareSet(key(generation, "members"), "", text);
  latestGeneration();  // moves the hint forward
}

Membership StoreRendezvous::join(const std::string& nodeId, std::int64_t slots) {
  if (!validNodeId(nodeId)) {
    throw RendezvousError(
        ErrorDetail{"node id", fmt::format("\"{}\"", nodeId), "a non-empty id without whitespace"});
  }
  if (slots < 1) {
    throw RendezvousError(ErrorDetail{fmt::format("slots of node {}", nodeId),
                                      std::to_string(slots), "a positive number of GPUs"});
  }
  nodeId_ = nodeId;
  slots_ = slots;
  const std::string record = encodeNode({nodeId, slots});
  const Time began = clock_();
  heartbeat(began);

  std::uint64_t g = latestGeneration() + 1;
  bool registered = false;
  bool waitlisted = false;
  for (;;) {
    const Time now = clock_();
    if (std::optional<Membership> closed = membership(g)) {
      if (closed->find(nodeId) != nullptr) {
        return *closed;
      }
      // Closed without this node (full, or it came too late): on to the next round.
      ++g;
      registered = false;
      waitlisted = false;
      continue;
    }
    if (!registered) {
      if (now - began > options_.joinTimeout) {
        timeout(g, registered, began);
      }
      if (g > 1 && !store_->check({key(g, "open")})) {
        if (mayOpen(g, now)) {
          store_->set(key(g, "open"), "1");
          continue;
        }
        if (!waitlisted) {
          const std::int64_t i = store_->add(key(g, "wait/count"), 1) - 1;
          store_->set(key(g, fmt::format("wait/{}", i)), record);
          waitlisted = true;
        }
        std::this_thread::sleep_for(options_.pollInterval);
        continue;
      }
      const std::int64_t i = store_->add(key(g, "count"), 1) - 1;
      store_->set(key(g, fmt::format("node/{}", i)), record);
      registered = true;
      continue;
    }
    const std::int64_t count = store_->add(key(g, "count"), 0);
    if (count >= options_.minNodes) {
      const std::string stamp =
          store_->compareSet(key(g, "min_at"), "", std::to_string(now.count()));
      const std::optional<std::int64_t> minAt = parseInt(stamp);
      if (!minAt) {
        throw RendezvousError(ErrorDetail{key(g, "min_at"), fmt::format("\"{}\"", stamp),
                                          "a time in nanoseconds written by a Stretch agent"});
      }
      if (count >= options_.maxNodes || now >= Time{*minAt} + options_.lastCall) {
        close(g, count);
        continue;
      }
    }
    // A round that may close is closed first, even when this agent's time is up.
    if (now - began > options_.joinTimeout) {
      timeout(g, registered, began);
    }
    std::this_thread::sleep_for(options_.pollInterval);
  }
}

void StoreRendezvous::timeout(std::uint64_t g, bool registered, Time began) {
  std::string state;
  if (registered || g == 1 || store_->check({key(g, "open")})) {
    const std::int64_t count = store_->add(key(g, "count"), 0);
    std::vector<std::string> ids;
    for (const RendezvousNode& n : records(g, "node", count)) {
      ids.push_back(n.nodeId);
    }
    state = fmt::format("{} of min_nodes {} node(s) registered ({})", ids.size(), options_.minNodes,
                        ids.empty() ? "none" : fmt::format("{}", fmt::join(ids, ", ")));
  } else {
    std::vector<std::string> ids;
    if (const std::optional<Membership> previous = membership(g - 1)) {
      for (const MemberNode& n : previous->nodes) {
        ids.push_back(n.nodeId);
      }
    }
    state = fmt::format("the round was not opened: no member of generation {} ({}) joined again",
                        g - 1, fmt::join(ids, ", "));
  }
  throw RendezvousTimeoutError(
      fmt::format("rendezvous {} round {}: node {} gave up after join timeout {}: {}",
                  options_.prefix, g, nodeId_, formatDuration(clock_() - began), state));
}

void StoreRendezvous::heartbeat(Time now) {
  if (nodeId_.empty()) {
    throw RendezvousError("heartbeat before join(): the node has no id yet");
  }
  store_->set(fmt::format("{}/hb/{}", options_.prefix, nodeId_), std::to_string(now.count()));
}

void StoreRendezvous::leave() {
  if (nodeId_.empty()) {
    throw RendezvousError("leave before join(): the node has no id yet");
  }
  store_->set(fmt::format("{}/hb/{}", options_.prefix, nodeId_), std::string(kLeft));
}

std::vector<std::string> StoreRendezvous::deadNodes(Time now, Duration timeout) {
  std::vector<std::string> dead;
  const std::uint64_t g = latestGeneration();
  if (g == 0) {
    return dead;
  }
  const std::optional<Membership> members = membership(g);
  for (const MemberNode& node : members->nodes) {
    const std::string k = fmt::format("{}/hb/{}", options_.prefix, node.nodeId);
    const std::optional<std::string> text = read(k);
    const std::optional<std::int64_t> stamp =
        text && *text != kLeft ? parseInt(*text) : std::nullopt;
    if (!stamp || now - Time{*stamp} > timeout) {
      dead.push_back(node.nodeId);
    }
  }
  return dead;
}

std::vector<RendezvousNode> StoreRendezvous::waitingNodes() {
  const std::uint64_t g = latestGeneration() + 1;
  std::vector<RendezvousNode> out = records(
      g, "wait", store_->check({key(g, "wait/count")}) ? store_->add(key(g, "wait/count"), 0) : 0);
  const std::int64_t registered =
      store_->check({key(g, "count")}) ? store_->add(key(g, "count"), 0) : 0;
  for (RendezvousNode& node : records(g, "node", registered)) {
    const bool known = std::any_of(
        out.begin(), out.end(), [&](const RendezvousNode& n) { return n.nodeId == node.nodeId; });
    if (!known) {
      out.push_back(std::move(node));
    }
  }
  return out;
}

}  // namespace stretch::agent
