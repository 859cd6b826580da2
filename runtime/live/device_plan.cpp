#include "runtime/live/device_plan.hpp"

#include <algorithm>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/comm/errors.hpp"
#include "runtime/common/error.hpp"
#include "runtime/live/detail/fields.hpp"

namespace stretch::live {

using comm::CommError;

std::string_view toString(DevicePath path) noexcept {
  switch (path) {
    case DevicePath::Init:
      return "init";
    case DevicePath::Shrink:
      return "shrink";
    case DevicePath::ShrinkGrow:
      return "shrink+grow";
  }
  return "unknown";
}

namespace {

constexpr std::string_view kInitEnding =
    ": every member builds a new communicator from a new unique id";

// "NCCL" for "nccl".
std::string libraryName(const comm::CommunicatorFeatures& features) {
  std::string name = features.library;
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return name;
}

// "NCCL 2.28.9", the prefix of every reason: the path follows from the version.
std::string libraryVersion(const comm::CommunicatorFeatures& features) {
  return fmt::format("{} {}", libraryName(features), features.version());
}

// A unique id travels as one field of the plan's first line.
bool idTravels(std::string_view id) {
  return id != "-" && std::all_of(id.begin(), id.end(), [](char c) {
           return std::isgraph(static_cast<unsigned char>(c));
         });
}

// "1 survivor", "3 survivors".
std::string counted(std::int64_t n, std::string_view noun) {
  return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s");
}

// "leaving out rank 1", "leaving out ranks 1, 5", "leaving out no rank".
std::string leavingOut(const std::vector<int>& excluded) {
  if (excluded.empty())
    return "leaving out no rank";
  return fmt::format("leaving out rank{} {}", excluded.size() == 1 ? "" : "s",
                     fmt::join(excluded, ", "));
}

// The inverse of LiveGeneration::rankOf: the worker (node id, local rank) behind each rank of
// `g`, nullopt for a rank no node entry gives (a malformed record: that rank survives nothing).
std::vector<std::optional<std::pair<std::string, std::int64_t>>> workersByRank(
    const LiveGeneration& g) {
  std::vector<std::optional<std::pair<std::string, std::int64_t>>> workers(
      static_cast<std::size_t>(g.worldSize));
  for (const auto& node : g.nodes) {
    for (std::size_t i = 0; i < node.localRanks.size(); ++i) {
      const auto rank = node.firstRank + static_cast<std::int64_t>(i);
      if (rank >= 0 && rank < g.worldSize)
        workers[static_cast<std::size_t>(rank)] = {node.nodeId, node.localRanks[i]};
    }
  }
  return workers;
}

DevicePlan initPlan(std::string reason) {
  DevicePlan plan;
  plan.reason = std::move(reason);
  return plan;
}

}  // namespace

std::string communicatorName(std::uint64_t generation) {
  if (generation >= kLaunchGroupBase)
    return fmt::format("the launch's communicator (start {})", generation - kLaunchGroupBase);
  return fmt::format("generation {}'s communicator", generation);
}

DevicePlan planDeviceGeneration(const comm::CommunicatorFeatures& features,
                                const std::optional<LiveGeneration>& parent,
                                const LiveGeneration& next, const std::vector<std::uint64_t>& held,
                                const std::vector<bool>& aborted) {
  if (next.worldSize < 1 || held.size() != static_cast<std::size_t>(next.worldSize)) {
    throw InternalError(fmt::format(
        "planDeviceGeneration: generation {}: {} held entries for a world of {}: expected one "
        "per rank (and at least one rank)",
        next.generation, held.size(), next.worldSize));
  }
  if (!aborted.empty() && aborted.size() != held.size()) {
    throw InternalError(fmt::format(
        "planDeviceGeneration: generation {}: {} aborted entries for a world of {}: expected one "
        "per rank, or none",
        next.generation, aborted.size(), next.worldSize));
  }
  const std::string library = libraryVersion(features);
  // Every rank of a node aborts together: a node one of whose ranks lost the parent's
  // communicator to an abort gives no survivor, for its other ranks would shrink the parent
  // beside an aborted intra-node peer and hang. They abort theirs and join anew.
  std::vector<bool> nodeHolds(held.size(), true);
  for (const LiveNode& node : next.nodes) {
    const auto first = static_cast<std::size_t>(node.firstRank);
    const auto end = std::min(held.size(), first + node.localRanks.size());
    bool whole = true;
    for (std::size_t r = first; r < end && !aborted.empty(); ++r)
      whole = whole && !aborted[r];
    for (std::size_t r = first; r < end; ++r)
      nodeHolds[r] = whole;
  }
  if (held[0] == 0) {
    // Rank 0 holds nothing to shrink (the first generation over the library, or its
    // communicator was aborted): any parent given is beside the point.
    return initPlan(
        fmt::format("{}: rank 0 of generation {} holds no communicator (the first "
                    "generation over {}, or its own was aborted){}",
                    library, next.generation, libraryName(features), kInitEnding));
  }
  if (!parent || parent->generation != held[0]) {
    throw InternalError(fmt::format(
        "planDeviceGeneration: rank 0 of generation {} holds generation {}'s communicator, but "
        "the parent record given is {}: expected generation {}'s record",
        next.generation, held[0],
        parent ? fmt::format("generation {}'s", parent->generation) : std::string("none"),
        held[0]));
  }
  if (!features.shrink) {
    return initPlan(fmt::format("{} has no ncclCommShrink (2.27){}", library, kInitEnding));
  }

  // The survivors: the longest prefix of ranks holding the parent's communicator whose workers
  // keep their order in the parent (a shrink keeps the parent's order: rank r of the shrunk
  // communicator must be rank r of this generation).
  const auto workers = workersByRank(next);
  std::vector<int> parentRanks;  // of survivors 0 .. k-1
  for (std::size_t r = 0; r < held.size(); ++r) {
    if (held[r] != held[0] || !workers[r] || !nodeHolds[r])
      break;
    const auto inParent = parent->rankOf(workers[r]->first, workers[r]->second);
    if (inParent < 0 || (!parentRanks.empty() && inParent <= parentRanks.back()))
      break;
    parentRanks.push_back(static_cast<int>(inParent));
  }
  const int survivors = static_cast<int>(parentRanks.size());
  if (survivors == 0) {
    if (!nodeHolds[0]) {
      return initPlan(fmt::format(
          "{}: another rank of rank 0's node lost {} to an abort, and a node's ranks abort "
          "together{}",
          library, communicatorName(held[0]), kInitEnding));
    }
    return initPlan(fmt::format(
        "{}: rank 0 of generation {} holds {} but has no rank in it, so no member keeps the "
        "parent's order{}",
        library, next.generation, communicatorName(held[0]), kInitEnding));
  }

  std::vector<int> excluded;
  for (int rank = 0, i = 0; rank < parent->worldSize; ++rank) {
    if (i < survivors && parentRanks[static_cast<std::size_t>(i)] == rank)
      ++i;
    else
      excluded.push_back(rank);
  }
  const auto joiners = next.worldSize - survivors;
  if (joiners > 0 && !features.grow) {
    return initPlan(fmt::format(
        "{}: {} cannot join {} once {} {} it: ncclCommGrow needs {} 2.29{}", library,
        counted(joiners, "joiner"), communicatorName(held[0]), counted(survivors, "survivor"),
        survivors == 1 ? "shrinks" : "shrink", libraryName(features), kInitEnding));
  }

  DevicePlan plan;
  plan.path = joiners > 0 ? DevicePath::ShrinkGrow : DevicePath::Shrink;
  plan.parent = held[0];
  plan.survivors = survivors;
  plan.excluded = std::move(excluded);
  plan.abortiveShrink = !features.revoke;
  plan.abortParent = plan.abortiveShrink && features.abortParentAfterAbortiveShrink;
  plan.reason = fmt::format("{}: {} {} {} (ncclCommShrink, {})", library,
                            counted(survivors, "survivor"), survivors == 1 ? "shrinks" : "shrink",
                            communicatorName(plan.parent), leavingOut(plan.excluded));
  if (plan.abortiveShrink) {
    plan.reason += ", abortively (NCCL_SHRINK_ABORT: no ncclCommRevoke before 2.28)";
    plan.reason += plan.abortParent ? ", then aborts the parent (destroying it hangs from 2.31)"
                                    : ", then destroys the parent";
  }
  if (joiners > 0) {
    const bool outOfOrder = std::any_of(held.begin() + survivors, held.end(),
                                        [&](std::uint64_t h) { return h == held[0]; });
    plan.reason += fmt::format("; {} {} it through ncclCommGrow{}", counted(joiners, "joiner"),
                               joiners == 1 ? "joins" : "join",
                               outOfOrder ? " (some held the parent out of its order)" : "");
  }
  return plan;
}

// The text: "PATH PARENT SURVIVORS ABORTIVE ABORT_PARENT EXCLUDED UNIQUE_ID\nREASON\n", fields
// separated by one space. The first line's newline is required; the reason is the rest of the
// text, less one final newline if there is one (so any reason, even an empty one or one holding
// newlines, comes back exactly, and a store value stripped of its last newline still reads).
std::string formatDevicePlan(const DevicePlan& plan) {
  if (!idTravels(plan.uniqueId)) {
    throw CommError(
        fmt::format("device plan: unique id '{}': expected printable text without "
                    "white space, other than '-'",
                    plan.uniqueId));
  }
  return fmt::format(
      "{} {} {} {:d} {:d} {} {}\n{}\n", toString(plan.path), plan.parent, plan.survivors,
      plan.abortiveShrink, plan.abortParent,
      plan.excluded.empty() ? std::string("-") : fmt::format("{}", fmt::join(plan.excluded, ",")),
      plan.uniqueId.empty() ? std::string("-") : plan.uniqueId, plan.reason);
}

DevicePlan parseDevicePlan(const std::string& text) {
  const auto bad = [&](std::string_view what) {
    return CommError(fmt::format("device plan '{}': expected {}", text, what));
  };
  const auto newline = text.find('\n');
  if (newline == std::string::npos)
    throw bad(
        "a first line \"PATH PARENT SURVIVORS ABORTIVE ABORT_PARENT EXCLUDED UNIQUE_ID\" "
        "ended by a newline, then the reason");
  const auto fields = detail::split(std::string_view(text).substr(0, newline), ' ');
  if (fields.size() != 7)
    throw bad(
        fmt::format("7 fields separated by single spaces on the first line (\"PATH PARENT "
                    "SURVIVORS ABORTIVE ABORT_PARENT EXCLUDED UNIQUE_ID\"), not {}",
                    fields.size()));
  DevicePlan plan;
  if (fields[0] == "init")
    plan.path = DevicePath::Init;
  else if (fields[0] == "shrink")
    plan.path = DevicePath::Shrink;
  else if (fields[0] == "shrink+grow")
    plan.path = DevicePath::ShrinkGrow;
  else
    throw bad(fmt::format("PATH init, shrink or shrink+grow, not '{}'", fields[0]));

  const auto parent = detail::number<std::uint64_t>(fields[1]);
  const auto survivors = detail::number<int>(fields[2]);
  if (!parent || !survivors)
    throw bad("PARENT and SURVIVORS non-negative numbers");
  plan.parent = *parent;
  plan.survivors = *survivors;
  const auto flag = [&](std::string_view field, std::string_view name) {
    if (field != "0" && field != "1")
      throw bad(fmt::format("{} 0 or 1, not '{}'", name, field));
    return field == "1";
  };
  plan.abortiveShrink = flag(fields[3], "ABORTIVE");
  plan.abortParent = flag(fields[4], "ABORT_PARENT");
  if (fields[5] != "-") {
    for (const auto item : detail::split(fields[5], ',')) {
      const auto rank = detail::number<int>(item);
      if (!rank || (!plan.excluded.empty() && *rank <= plan.excluded.back()))
        throw bad("EXCLUDED '-' or ascending non-negative ranks separated by commas");
      plan.excluded.push_back(*rank);
    }
  }
  if (fields[6] != "-") {
    if (fields[6].empty() || !idTravels(fields[6]))
      throw bad("UNIQUE_ID '-' or the id (printable, without white space)");
    plan.uniqueId = std::string(fields[6]);
  }

  // What planDeviceGeneration makes, so that a record damaged into another plan is refused.
  if (plan.path == DevicePath::Init &&
      (plan.parent != 0 || plan.survivors != 0 || !plan.excluded.empty() || plan.abortiveShrink ||
       plan.abortParent))
    throw bad("an init plan with PARENT 0, SURVIVORS 0, ABORTIVE 0, ABORT_PARENT 0, EXCLUDED -");
  if (plan.path != DevicePath::Init && (plan.parent == 0 || plan.survivors == 0))
    throw bad("a shrink plan with PARENT and SURVIVORS at least 1");
  if (plan.abortParent && !plan.abortiveShrink)
    throw bad("ABORT_PARENT 1 only with ABORTIVE 1 (the parent of an abortive shrink)");

  plan.reason = text.substr(newline + 1);
  if (plan.reason.ends_with('\n'))
    plan.reason.pop_back();
  return plan;
}

}  // namespace stretch::live
