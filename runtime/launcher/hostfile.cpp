#include "runtime/launcher/hostfile.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/common/check.hpp"
#include "runtime/common/file_io.hpp"
#include "runtime/common/strings.hpp"
#include "runtime/launcher/launch_error.hpp"

namespace stretch::launcher {

namespace {

constexpr std::string_view kWhitespace = " \t\r\v\f";
constexpr std::string_view kSpecSyntax = "NAME[:SLOT[,SLOT...]] specs separated by '@'";

std::string_view trim(std::string_view s) {
  const std::size_t first = s.find_first_not_of(kWhitespace);
  if (first == std::string_view::npos) {
    return {};
  }
  const std::size_t last = s.find_last_not_of(kWhitespace);
  return s.substr(first, last - first + 1);
}

std::vector<std::string_view> splitWhitespace(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t pos = 0;
  while (true) {
    const std::size_t begin = s.find_first_not_of(kWhitespace, pos);
    if (begin == std::string_view::npos) {
      break;
    }
    std::size_t end = s.find_first_of(kWhitespace, begin);
    if (end == std::string_view::npos) {
      end = s.size();
    }
    out.push_back(s.substr(begin, end - begin));
    pos = end;
  }
  return out;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t pos = 0;
  while (true) {
    const std::size_t next = s.find(sep, pos);
    if (next == std::string_view::npos) {
      out.push_back(s.substr(pos));
      return out;
    }
    out.push_back(s.substr(pos, next - pos));
    pos = next + 1;
  }
}

// "text" with quotes, backslashes and control characters escaped, for messages.
std::string quotedText(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(u));
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

// A non-negative decimal integer made of digits only (no sign, no spaces); nullopt otherwise or
// when it does not fit in an int.
std::optional<int> parseIndex(std::string_view s) {
  if (s.empty() || s.size() > 9 ||
      !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  int value = 0;
  for (const char c : s) {
    value = value * 10 + (c - '0');
  }
  return value;
}

bool isDigitsOnly(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

const char* kHostNameRule =
    "a host name of letters, digits, '.', '-' and '_' that does not start with '-' or '.'";

// "w0, w1, w2" or "w0, w1, ... (1000 hosts)".
std::string hostList(const ResourcePool& pool) {
  constexpr std::size_t kShown = 8;
  std::string out;
  for (std::size_t i = 0; i < pool.size() && i < kShown; ++i) {
    out += i ? ", " : "";
    out += pool[i].name;
  }
  if (pool.size() > kShown) {
    out += fmt::format(", ... ({} hosts)", pool.size());
  }
  return out;
}

[[noreturn]] void fail(std::string_view flag, std::string_view value, std::string expected) {
  throw LaunchError(ErrorDetail{std::string(flag), std::string(value), std::move(expected)});
}

// The slots one --include/--exclude string names, per pool index (slots ascending).
std::map<std::size_t, std::set<int>> parseFilter(const ResourcePool& pool, std::string_view flag,
                                                 std::string_view value) {
  std::map<std::string_view, std::size_t> index;
  for (std::size_t i = 0; i < pool.size(); ++i) {
    index.emplace(pool[i].name, i);
  }
  std::map<std::size_t, std::set<int>> named;
  for (const std::string_view spec : split(value, '@')) {
    if (spec.empty()) {
      fail(flag, value, fmt::format("{}, found an empty spec", kSpecSyntax));
    }
    const std::vector<std::string_view> parts = split(spec, ':');
    if (parts.size() > 2) {
      fail(flag, value,
           fmt::format("{}, found {} with more than one ':'", kSpecSyntax, quotedText(spec)));
    }
    const std::string_view host = parts[0];
    if (host.empty()) {
      fail(flag, value,
           fmt::format("{}, found {} without a host name", kSpecSyntax, quotedText(spec)));
    }
    const auto found = index.find(host);
    if (found == index.end()) {
      std::vector<std::string_view> names;
      for (const Host& h : pool) {
        names.push_back(h.name);
      }
      std::string expected = fmt::format("host names of the resource pool ({}), found {}",
                                         hostList(pool), quotedText(host));
      if (const auto suggestion = closestMatch(host, names)) {
        expected += fmt::format(" (did you mean \"{}\"?)", *suggestion);
      }
      fail(flag, value, std::move(expected));
    }
    const Host& h = pool[found->second];
    std::vector<int> slots;
    if (parts.size() == 1) {
      for (int s = 0; s < h.slots; ++s) {
        slots.push_back(s);
      }
    } else {
      for (const std::string_view item : split(parts[1], ',')) {
        const std::optional<int> slot = parseIndex(item);
        if (!slot && !isDigitsOnly(item)) {
          fail(flag, value,
               fmt::format("slot indices (non-negative integers) after \"{}:\", found {}", h.name,
                           quotedText(item)));
        }
        if (!slot || *slot >= h.slots) {
          fail(flag, value,
               fmt::format("slot indices of {} in 0..{} (it has {} slot{}), found {}", h.name,
                           h.slots - 1, h.slots, h.slots == 1 ? "" : "s", item));
        }
        slots.push_back(*slot);
      }
    }
    std::set<int>& chosen = named[found->second];
    for (const int s : slots) {
      if (!chosen.insert(s).second) {
        fail(flag, value,
             fmt::format("every slot named once (a host without slots names all of them), found "
                         "{}:{} twice",
                         h.name, s));
      }
    }
  }
  return named;
}

std::string pythonJsonString(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', /*ensure_ascii=*/true);
}

constexpr std::string_view kBase64Url =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::string base64UrlEncode(std::string_view bytes) {
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const std::uint32_t v = (std::uint32_t{static_cast<unsigned char>(bytes[i])} << 16) |
                            (std::uint32_t{static_cast<unsigned char>(bytes[i + 1])} << 8) |
                            std::uint32_t{static_cast<unsigned char>(bytes[i + 2])};
    out += kBase64Url[(v >> 18) & 63];
    out += kBase64Url[(v >> 12) & 63];
    out += kBase64Url[(v >> 6) & 63];
    out += kBase64Url[v & 63];
  }
  const std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    std::uint32_t v = std::uint32_t{static_cast<unsigned char>(bytes[i])} << 16;
    if (rest == 2) {
      v |= std::uint32_t{static_cast<unsigned char>(bytes[i + 1])} << 8;
    }
    out += kBase64Url[(v >> 18) & 63];
    out += kBase64Url[(v >> 12) & 63];
    out += rest == 2 ? kBase64Url[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// Standard or urlsafe alphabet, padding optional; nullopt on any other character.
std::optional<std::string> base64Decode(std::string_view text) {
  while (!text.empty() && text.back() == '=') {
    text.remove_suffix(1);
  }
  if (text.size() % 4 == 1) {
    return std::nullopt;
  }
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (const char c : text) {
    int v = -1;
    if (c >= 'A' && c <= 'Z') {
      v = c - 'A';
    } else if (c >= 'a' && c <= 'z') {
      v = c - 'a' + 26;
    } else if (c >= '0' && c <= '9') {
      v = c - '0' + 52;
    } else if (c == '-' || c == '+') {
      v = 62;
    } else if (c == '_' || c == '/') {
      v = 63;
    } else {
      return std::nullopt;
    }
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

}  // namespace

bool isValidHostName(std::string_view name) noexcept {
  if (name.empty() || name.front() == '-' || name.front() == '.') {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '-' || c == '_';
  });
}

ResourcePool parseHostfile(std::string_view text, const std::string& sourceName) {
  ResourcePool pool;
  std::map<std::string, int, std::less<>> lineOf;
  int lineNo = 0;
  for (std::string_view raw : split(text, '\n')) {
    ++lineNo;
    const std::string where = fmt::format("{}:{}", sourceName, lineNo);
    if (const std::size_t hash = raw.find('#'); hash != std::string_view::npos) {
      raw = raw.substr(0, hash);
    }
    const std::string_view line = trim(raw);
    if (line.empty()) {
      continue;
    }
    const std::vector<std::string_view> tokens = splitWhitespace(line);
    if (tokens.size() != 2 || tokens[1].rfind("slots=", 0) != 0) {
      fail(where, quotedText(line),
           "a line \"HOSTNAME slots=N\" (a host name, whitespace, slots=N and nothing else but a "
           "# comment), a # comment or a blank line");
    }
    const std::string_view name = tokens[0];
    if (!isValidHostName(name)) {
      fail(where, quotedText(name), kHostNameRule);
    }
    const std::optional<int> slots = parseIndex(tokens[1].substr(6));
    if (!slots || *slots < 1 || *slots > kMaxSlotsPerHost) {
      fail(where, std::string(tokens[1]),
           fmt::format("slots to be a positive integer (at most {})", kMaxSlotsPerHost));
    }
    if (const auto seen = lineOf.find(name); seen != lineOf.end()) {
      fail(where, std::string(name),
           fmt::format("each host listed once ({} is already on line {})", name, seen->second));
    }
    lineOf.emplace(std::string(name), lineNo);
    pool.push_back(Host{std::string(name), *slots});
  }
  if (pool.empty()) {
    fail(sourceName, "no hosts", "at least one line \"HOSTNAME slots=N\"");
  }
  return pool;
}

ResourcePool loadHostfile(const std::filesystem::path& path) {
  return parseHostfile(readFile(path, "hostfile"), path.string());
}

ResourcePool localResourcePool(int slots) {
  if (slots < 1) {
    fail("local slots", std::to_string(slots),
         "at least one GPU (or --num_gpus on a machine without GPUs): no resources to run on");
  }
  if (slots > kMaxSlotsPerHost) {
    fail("local slots", std::to_string(slots), fmt::format("at most {}", kMaxSlotsPerHost));
  }
  return {Host{"localhost", slots}};
}

ActiveResources allResources(const ResourcePool& pool) {
  ActiveResources out;
  for (const Host& h : pool) {
    std::vector<int> slots(static_cast<std::size_t>(std::max(h.slots, 0)));
    for (std::size_t s = 0; s < slots.size(); ++s) {
      slots[s] = static_cast<int>(s);
    }
    if (!slots.empty()) {
      out.hosts.emplace_back(h.name, std::move(slots));
    }
  }
  return out;
}

ActiveResources applyFilters(const ResourcePool& pool, std::string_view include,
                             std::string_view exclude, std::optional<int> numNodes,
                             std::optional<int> numGpus) {
  STRETCH_CHECK(!pool.empty(), "an empty resource pool (parseHostfile never returns one)");
  // DeepSpeed's order (runner.py main): the flag conflict first, then the filter itself.
  if ((numNodes || numGpus) && (!include.empty() || !exclude.empty())) {
    const bool nodes = numNodes.has_value();
    fail(nodes ? "--num_nodes" : "--num_gpus", std::to_string(nodes ? *numNodes : *numGpus),
         fmt::format("no --num_nodes/--num_gpus together with {} (it already chooses the hosts "
                     "and slots)",
                     include.empty() ? "--exclude" : "--include"));
  }
  if (!include.empty() && !exclude.empty()) {
    fail("--exclude", exclude,
         fmt::format("no --exclude together with --include = {} (they are mutually exclusive)",
                     include));
  }

  ActiveResources out;
  if (!include.empty()) {
    const auto named = parseFilter(pool, "--include", include);
    for (const auto& [i, slots] : named) {  // pool order
      out.hosts.emplace_back(pool[i].name, std::vector<int>(slots.begin(), slots.end()));
    }
    return out;
  }
  if (!exclude.empty()) {
    const auto named = parseFilter(pool, "--exclude", exclude);
    for (std::size_t i = 0; i < pool.size(); ++i) {
      std::vector<int> slots;
      const auto removed = named.find(i);
      for (int s = 0; s < pool[i].slots; ++s) {
        if (removed == named.end() || removed->second.count(s) == 0) {
          slots.push_back(s);
        }
      }
      if (!slots.empty()) {
        out.hosts.emplace_back(pool[i].name, std::move(slots));
      }
    }
    if (out.hosts.empty()) {
      fail("--exclude", exclude, "at least one slot left to run on, but it excludes every slot");
    }
    return out;
  }

  out = allResources(pool);
  if (numNodes) {
    if (*numNodes < 1) {
      fail("--num_nodes", std::to_string(*numNodes), "a positive integer");
    }
    if (static_cast<std::size_t>(*numNodes) > out.hosts.size()) {
      fail("--num_nodes", std::to_string(*numNodes),
           fmt::format("at most {}, the number of hosts in the resource pool ({})",
                       out.hosts.size(), hostList(pool)));
    }
    out.hosts.resize(static_cast<std::size_t>(*numNodes));
  }
  if (numGpus) {
    if (*numGpus < 1) {
      fail("--num_gpus", std::to_string(*numGpus), "a positive integer");
    }
    for (auto& [host, slots] : out.hosts) {
      if (static_cast<std::size_t>(*numGpus) > slots.size()) {
        fail("--num_gpus", std::to_string(*numGpus),
             fmt::format("at most {}: host {} has {} slot{}", slots.size(), host, slots.size(),
                         slots.size() == 1 ? "" : "s"));
      }
      slots.resize(static_cast<std::size_t>(*numGpus));
    }
  }
  return out;
}

std::int64_t worldSize(const ActiveResources& resources) {
  std::int64_t total = 0;
  for (const auto& [host, slots] : resources.hosts) {
    total += static_cast<std::int64_t>(slots.size());
  }
  return total;
}

std::int64_t globalRank(const ActiveResources& resources, std::size_t nodeRank,
                        std::int64_t localRank) {
  STRETCH_CHECK_LT(nodeRank, resources.hosts.size(), "node rank");
  STRETCH_CHECK_GE(localRank, 0, "local rank");
  STRETCH_CHECK_LT(localRank, static_cast<std::int64_t>(resources.hosts[nodeRank].second.size()),
                   "local rank on {}", resources.hosts[nodeRank].first);
  std::int64_t rank = localRank;
  for (std::size_t n = 0; n < nodeRank; ++n) {
    rank += static_cast<std::int64_t>(resources.hosts[n].second.size());
  }
  return rank;
}

std::string encodeWorldInfo(const ActiveResources& resources) {
  std::string out = "{";
  bool firstHost = true;
  for (const auto& [host, slots] : resources.hosts) {
    out += firstHost ? "" : ", ";
    firstHost = false;
    out += pythonJsonString(host);
    out += ": [";
    for (std::size_t i = 0; i < slots.size(); ++i) {
      out += i ? ", " : "";
      out += std::to_string(slots[i]);
    }
    out += "]";
  }
  out += "}";
  return out;
}

std::string encodeWorldInfoBase64(const ActiveResources& resources) {
  return base64UrlEncode(encodeWorldInfo(resources));
}

ActiveResources decodeWorldInfo(std::string_view text) {
  const std::string shown =
      text.size() > 200 ? std::string(text.substr(0, 200)) + "..." : std::string(text);
  const std::string_view trimmed = trim(text);
  std::string json;
  if (!trimmed.empty() && trimmed.front() == '{') {
    json = std::string(trimmed);
  } else {
    const auto decoded = base64Decode(trimmed);
    if (!decoded || decoded->empty()) {
      fail("--world_info", shown,
           "a JSON object {\"host\": [slots]} or its base64 encoding (DeepSpeed's form)");
    }
    json = *decoded;
  }

  using OrderedJson = nlohmann::ordered_json;
  std::optional<std::string> duplicate;
  std::set<std::string> keys;
  const OrderedJson::parser_callback_t noteKeys = [&](int depth, OrderedJson::parse_event_t event,
                                                      OrderedJson& parsed) {
    if (event == OrderedJson::parse_event_t::key && depth == 1 && parsed.is_string()) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!keys.insert(key).second && !duplicate) {
        duplicate = key;
      }
    }
    return true;
  };
  OrderedJson doc;
  try {
    doc = OrderedJson::parse(json, noteKeys);
  } catch (const nlohmann::json::exception& e) {
    fail("--world_info", shown, fmt::format("valid JSON ({})", e.what()));
  }
  if (!doc.is_object() || doc.empty()) {
    fail("--world_info", shown, "a non-empty JSON object {\"host\": [slots], ...}");
  }
  if (duplicate) {
    fail("--world_info", shown,
         fmt::format("each host once, found {} twice", quotedText(*duplicate)));
  }
  ActiveResources out;
  for (const auto& [host, value] : doc.items()) {
    if (!isValidHostName(host)) {
      fail("--world_info", shown, fmt::format("{}, found {}", kHostNameRule, quotedText(host)));
    }
    if (!value.is_array() || value.empty()) {
      fail("--world_info", shown,
           fmt::format("a non-empty array of slot indices for {}, found {}", host, value.dump()));
    }
    std::vector<int> slots;
    std::set<int> seen;
    for (const OrderedJson& slot : value) {
      if (!slot.is_number_integer() || slot.get<std::int64_t>() < 0 ||
          slot.get<std::int64_t>() >= kMaxSlotsPerHost) {
        fail("--world_info", shown,
             fmt::format("slot indices of {} in 0..{}, found {}", host, kMaxSlotsPerHost - 1,
                         slot.dump()));
      }
      const int s = slot.get<int>();
      if (!seen.insert(s).second) {
        fail("--world_info", shown, fmt::format("each slot of {} once, found {} twice", host, s));
      }
      slots.push_back(s);
    }
    out.hosts.emplace_back(host, std::move(slots));
  }
  return out;
}

}  // namespace stretch::launcher
