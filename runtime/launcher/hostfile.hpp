#pragma once
// The launcher's resources: DeepSpeed's hostfile, the --include/--exclude/--num_nodes/--num_gpus
// filters and the world info handed to every node (deepspeed/launcher/runner.py and launch.py).
//
// Hostfile (parseHostfile): one host per line, "HOSTNAME slots=N"; '#' starts a comment (whole
// line or trailing); blank lines and surrounding whitespace are ignored. Hosts keep file order.
// Stricter than DeepSpeed, which matches only the start of a line (r'^(\S+)\s+slots=(\d+)'):
//  - slots must be a positive integer <= kMaxSlotsPerHost (DeepSpeed accepts slots=0 and reads
//    "slots=4abc" as 4);
//  - nothing but a comment may follow "slots=N" (DeepSpeed ignores any trailing text, e.g.
//    "max_slots=8");
//  - a host name is letters, digits, '.', '-' and '_', not starting with '-' or '.' (it ends up on
//    ssh/pdsh command lines and in the "host:slot@host" filter syntax, where ':', '@' and ',' are
//    separators). No "user@host" (put the user in ~/.ssh/config) and no IPv6 literals.
// Errors are LaunchError naming "FILE:LINE", the line and what was expected.
//
// Filters (applyFilters), DeepSpeed's documented semantics (pre-#6530 and PR #8239: a host named
// without slots means all of its slots), with every case DeepSpeed silently accepts or mangles
// turned into an error: --include with --exclude; --num_nodes/--num_gpus with either; an unknown
// host; a slot index outside the host's slots (DeepSpeed at HEAD accepts "-i w1:7" on a 4-slot
// host); a slot named twice (DeepSpeed merges "w0:1,1" and "w0:1@w0:0,1"; a host named both bare
// and with slots, "w0:1@w0", is a duplicate too); an empty spec; --num_nodes / --num_gpus < 1 or
// larger than what the pool has (DeepSpeed gives every host range(num_gpus) unchecked); an
// --exclude that leaves no slot at all. Result: hosts in pool order, slots ascending.
//
// World info: the active hosts and slots as JSON, in order, formatted like Python's json.dumps:
//   {"w0": [0, 1], "w1": [2, 3, 5]}
// encodeWorldInfoBase64 is exactly DeepSpeed's --world_info value (urlsafe base64 of that text);
// decodeWorldInfo accepts either form.
//
// Pure functions except loadHostfile (reads one file).

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace stretch::launcher {

// DeepSpeed's default hostfile (DLTS_HOSTFILE); runner.py proceeds with local resources only
// when it does not exist.
inline constexpr std::string_view kDefaultHostfile = "/job/hostfile";
// Largest slot count a hostfile line may give.
inline constexpr int kMaxSlotsPerHost = 4096;

struct Host {
  std::string name;
  int slots = 0;
  bool operator==(const Host&) const = default;
};
// Hosts in hostfile order.
using ResourcePool = std::vector<Host>;

// Parses hostfile text. sourceName is used in messages ("hosts.txt:3 = ..."). Throws LaunchError
// for a bad line, a bad host name, slots that are not a positive integer <= kMaxSlotsPerHost, a
// host listed twice, or no host at all.
ResourcePool parseHostfile(std::string_view text, const std::string& sourceName);

// Reads and parses a hostfile; IoError when it cannot be read (missing, a directory, no
// permission), LaunchError as parseHostfile. The caller decides what a missing default
// hostfile means (DeepSpeed: local resources only).
ResourcePool loadHostfile(const std::filesystem::path& path);

// The pool DeepSpeed uses without a hostfile: {"localhost", slots}. slots is what the caller
// counted (visible GPUs, --num_gpus, or 1 on CPU). Throws LaunchError when slots < 1 (DeepSpeed:
// "Unable to proceed, no GPU resources available") or > kMaxSlotsPerHost.
ResourcePool localResourcePool(int slots);

// True when `name` is a host name parseHostfile accepts (see above).
bool isValidHostName(std::string_view name) noexcept;

// The hosts and slot indices a job runs on, in node-rank order. Every host has at least one
// slot; slots are distinct and in [0, slots of the host); applyFilters lists them ascending
// (decodeWorldInfo keeps the order it is given: it is the CUDA_VISIBLE_DEVICES order).
struct ActiveResources {
  std::vector<std::pair<std::string, std::vector<int>>> hosts;
  bool operator==(const ActiveResources&) const = default;
};

// Every host with all of its slots.
ActiveResources allResources(const ResourcePool& pool);

// DeepSpeed's filters: include/exclude are "" when not given ("NAME[:SLOT[,SLOT...]]" specs
// separated by '@'); numNodes keeps the first N hosts, numGpus the first G slots of every kept
// host. Throws LaunchError naming the flag, its value and what was expected (see the header
// comment for the cases).
ActiveResources applyFilters(const ResourcePool& pool, std::string_view include,
                             std::string_view exclude, std::optional<int> numNodes,
                             std::optional<int> numGpus);

// Total slots = worker processes of the job.
std::int64_t worldSize(const ActiveResources& resources);
// Global rank of local rank `localRank` on node `nodeRank`: the slot counts of the earlier nodes
// plus localRank (launch.py's sequential assignment). InternalError when out of range.
std::int64_t globalRank(const ActiveResources& resources, std::size_t nodeRank,
                        std::int64_t localRank);

// {"w0": [0, 1], "w1": [2, 3, 5]} (Python json.dumps formatting, non-ASCII escaped).
std::string encodeWorldInfo(const ActiveResources& resources);
// DeepSpeed's --world_info: urlsafe base64 of encodeWorldInfo, with padding.
std::string encodeWorldInfoBase64(const ActiveResources& resources);
// Parses either form (text starting with '{' is JSON, anything else base64, standard or
// urlsafe alphabet). Throws LaunchError ("--world_info = ...: expected ...") unless the result
// is a non-empty object of valid host names, each listed once, mapping to non-empty arrays of
// distinct slot indices in [0, kMaxSlotsPerHost). Slot order is kept as given.
ActiveResources decodeWorldInfo(std::string_view text);

}  // namespace stretch::launcher
