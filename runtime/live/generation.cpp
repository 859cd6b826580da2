#include "runtime/live/generation.hpp"

#include <algorithm>
#include <sstream>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/comm/errors.hpp"

namespace stretch::live {

using comm::CommError;

namespace {
// The rank of `localRank` on `nodeId` among `nodes` (their first ranks and local ranks); -1 when
// it is not there.
std::int64_t rankAmong(const std::vector<LiveNode>& nodes, const std::string& nodeId,
                       std::int64_t localRank) {
  for (const auto& node : nodes) {
    if (node.nodeId != nodeId)
      continue;
    const auto it = std::find(node.localRanks.begin(), node.localRanks.end(), localRank);
    if (it != node.localRanks.end())
      return node.firstRank + (it - node.localRanks.begin());
  }
  return -1;
}
}  // namespace

std::int64_t LiveGeneration::rankOf(const std::string& nodeId, std::int64_t localRank) const {
  return rankAmong(nodes, nodeId, localRank);
}

std::int64_t LiveGeneration::transferRankOf(const std::string& nodeId,
                                            std::int64_t localRank) const {
  const auto rank = rankOf(nodeId, localRank);
  return rank >= 0 ? rank : rankAmong(donors, nodeId, localRank);
}

std::int64_t LiveGeneration::transferSize() const {
  std::int64_t size = worldSize;
  for (const auto& node : donors)
    size += static_cast<std::int64_t>(node.localRanks.size());
  return size;
}

std::string formatLiveGeneration(const LiveGeneration& g) {
  std::string out = fmt::format("{} {} {} {} {} {}\n", g.generation, g.agentGeneration, g.worldSize,
                                g.trainBatchSize, g.microBatch, g.gradientAccumulation);
  for (const auto* list : {&g.nodes, &g.donors}) {
    for (const auto& node : *list) {
      if (node.nodeId.empty() || node.nodeId.find_first_of(" \t\n") != std::string::npos) {
        throw CommError(
            fmt::format("live generation {}: node id '{}' is empty or holds white space",
                        g.generation, node.nodeId));
      }
      out += fmt::format("{}{} {} {}\n", list == &g.donors ? "donor " : "", node.nodeId,
                         node.firstRank, fmt::join(node.localRanks, ","));
    }
  }
  return out;
}

LiveGeneration parseLiveGeneration(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  LiveGeneration g;
  auto bad = [&](const std::string& what) {
    return CommError(fmt::format("live generation record: line '{}': expected {}", line, what));
  };
  std::getline(in, line);
  {
    std::istringstream header(line);
    std::string rest;
    if (!(header >> g.generation >> g.agentGeneration >> g.worldSize >> g.trainBatchSize >>
          g.microBatch >> g.gradientAccumulation) ||
        (header >> rest) || g.worldSize < 1)
      throw bad("\"N AGENT_GENERATION WORLD TRAIN MICRO GAS\" with WORLD >= 1");
    const bool none = g.trainBatchSize == 0 && g.microBatch == 0 && g.gradientAccumulation == 0;
    const bool all = g.trainBatchSize > 0 && g.microBatch > 0 && g.gradientAccumulation > 0;
    if (!none && !all)
      throw bad("TRAIN MICRO GAS all positive (a batch) or all 0 (none)");
  }
  std::int64_t ranks = 0;
  std::int64_t donorRanks = 0;
  while (std::getline(in, line)) {
    if (line.empty())
      continue;
    std::istringstream fields(line);
    LiveNode node;
    std::string list;
    std::string rest;
    const bool donor = line.starts_with("donor ");
    if (donor) {
      fields >> rest;
      if (ranks != g.worldSize) {
        throw CommError(
            fmt::format("live generation {}: donors after {} member(s); the world size is {}",
                        g.generation, ranks, g.worldSize));
      }
    } else if (!g.donors.empty()) {
      throw bad("\"donor NODE FIRST L0,L1,...\" (members come before donors)");
    }
    const std::string expected =
        fmt::format("\"{}NODE FIRST L0,L1,...\" with FIRST = {} and ascending local ranks",
                    donor ? "donor " : "", ranks + (donor ? donorRanks : 0));
    if (!(fields >> node.nodeId >> node.firstRank >> list) || (fields >> rest) ||
        node.firstRank != ranks + (donor ? donorRanks : 0))
      throw bad(expected);
    std::istringstream items(list);
    for (std::string item; std::getline(items, item, ',');) {
      try {
        std::size_t used = 0;
        const auto local = std::stoll(item, &used);
        if (used != item.size() || local < 0 ||
            (!node.localRanks.empty() && local <= node.localRanks.back()))
          throw bad(expected);
        node.localRanks.push_back(local);
      } catch (const std::logic_error&) {
        throw bad(expected);
      }
    }
    if (node.localRanks.empty())
      throw bad(expected);
    if (donor) {
      donorRanks += static_cast<std::int64_t>(node.localRanks.size());
      g.donors.push_back(std::move(node));
    } else {
      ranks += static_cast<std::int64_t>(node.localRanks.size());
      g.nodes.push_back(std::move(node));
    }
  }
  if (ranks != g.worldSize) {
    throw CommError(
        fmt::format("live generation {}: the nodes run {} workers, the world size is {}",
                    g.generation, ranks, g.worldSize));
  }
  return g;
}

std::int64_t workerProcessId() {
  return static_cast<std::int64_t>(::getpgrp());
}

namespace live_keys {
std::string generation(std::uint64_t n) {
  return fmt::format("live/generation/{}", n);
}
std::string capable(const std::string& nodeId, std::int64_t pid) {
  return fmt::format("live/capable/{}/{}", nodeId, pid);
}
std::string ready(std::uint64_t n) {
  return fmt::format("live/ready/{}", n);
}
std::string groupPrefix(std::uint64_t n) {
  return fmt::format("live/pg/{}", n);
}
std::string transferPrefix(std::uint64_t n) {
  return fmt::format("live/xfer/{}", n);
}
std::string donated(std::uint64_t n) {
  return fmt::format("live/donated/{}", n);
}
}  // namespace live_keys

LiveGeneration makeLiveGeneration(std::uint64_t generation, std::uint64_t agentGeneration,
                                  const std::vector<std::pair<std::string, std::int64_t>>& members,
                                  std::int64_t trainBatchSize, std::int64_t microBatch,
                                  std::int64_t gradientAccumulation,
                                  const std::vector<std::pair<std::string, std::int64_t>>& donors) {
  LiveGeneration record;
  record.generation = generation;
  record.agentGeneration = agentGeneration;
  record.worldSize = static_cast<std::int64_t>(members.size());
  record.trainBatchSize = trainBatchSize;
  record.microBatch = microBatch;
  record.gradientAccumulation = gradientAccumulation;
  std::int64_t rank = 0;
  for (const auto& [node, local] : members) {
    if (record.nodes.empty() || record.nodes.back().nodeId != node)
      record.nodes.push_back({node, rank, {}});
    record.nodes.back().localRanks.push_back(local);
    ++rank;
  }
  for (const auto& [node, local] : donors) {
    if (record.donors.empty() || record.donors.back().nodeId != node)
      record.donors.push_back({node, rank, {}});
    record.donors.back().localRanks.push_back(local);
    ++rank;
  }
  return record;
}

int liveBuddyDistance(int distance, int world) {
  return world > 1 && distance > 0 && distance % world != 0 ? distance % world : 1;
}

void publishLiveGeneration(comm::Store& store, const LiveGeneration& generation) {
  store.set(live_keys::generation(generation.generation), formatLiveGeneration(generation));
  store.set(live_keys::kLatest, std::to_string(generation.generation));
}

LiveCapability liveCapability(comm::Store& store, const std::string& nodeId, std::int64_t pid) {
  const auto key = live_keys::capable(nodeId, pid);
  if (!store.check({key}))
    return LiveCapability::None;
  return store.get(key) == live_keys::kCapableWithCopies ? LiveCapability::CapableWithCopies
                                                         : LiveCapability::Capable;
}

std::uint64_t latestLiveGeneration(comm::Store& store) {
  if (!store.check({live_keys::kLatest}))
    return 0;
  return std::stoull(store.get(live_keys::kLatest));
}

}  // namespace stretch::live
