#include "runtime/launcher/job_protocol.hpp"

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "runtime/comm/errors.hpp"

namespace stretch::launcher {

using namespace agent;

namespace {

using Fields = std::map<std::string, std::string>;

// "k=v" lines; values may not hold a newline (node ids, addresses and reasons are one line).
std::string line(std::string_view key, std::string_view value) {
  std::string v(value);
  for (char& c : v) {
    if (c == '\n' || c == '\r')
      c = ' ';
  }
  return fmt::format("{}={}\n", key, v);
}

Fields parse(const std::string& text, std::string_view what) {
  Fields fields;
  std::istringstream in(text);
  std::string l;
  while (std::getline(in, l)) {
    if (l.empty())
      continue;
    const auto eq = l.find('=');
    if (eq == std::string::npos || eq == 0)
      throw ProtocolError(fmt::format("{} record: line '{}': expected key=value", what, l));
    fields[l.substr(0, eq)] = l.substr(eq + 1);
  }
  return fields;
}

const std::string& field(const Fields& f, const std::string& key, std::string_view what) {
  const auto it = f.find(key);
  if (it == f.end())
    throw ProtocolError(fmt::format("{} record: no '{}' field", what, key));
  return it->second;
}

template <typename Int>
Int number(const Fields& f, const std::string& key, std::string_view what) {
  const std::string& text = field(f, key, what);
  Int value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    throw ProtocolError(fmt::format("{} record: {} = '{}': expected an integer", what, key, text));
  return value;
}

std::string optional(const Fields& f, const std::string& key) {
  const auto it = f.find(key);
  return it == f.end() ? std::string() : it->second;
}

std::string_view kindName(CommandKind kind) {
  switch (kind) {
    case CommandKind::Start:
      return "start";
    case CommandKind::Stop:
      return "stop";
    case CommandKind::Exit:
      return "exit";
    case CommandKind::Live:
      return "live";
    case CommandKind::Signal:
      return "signal";
  }
  return "stop";
}

}  // namespace

std::string encodeDevices(const std::vector<int>& devices) {
  std::string out;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (i > 0)
      out += ',';
    out += std::to_string(devices[i]);
  }
  return out;
}

std::vector<int> decodeDevices(const std::string& text) {
  std::vector<int> out;
  if (text.empty())
    return out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const auto comma = text.find(',', pos);
    const std::string part =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    int value = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size() || value < 0)
      throw ProtocolError(
          fmt::format("device list '{}': expected comma-separated indices >= 0", text));
    out.push_back(value);
    if (comma == std::string::npos)
      break;
    pos = comma + 1;
  }
  return out;
}

std::string encode(const NodeRecord& r) {
  return line("node", r.nodeId) + line("slots", std::to_string(r.slots)) +
         line("address", r.address) + line("devices", encodeDevices(r.devices));
}

NodeRecord decodeNodeRecord(const std::string& text) {
  const Fields f = parse(text, "node");
  NodeRecord r;
  r.nodeId = field(f, "node", "node");
  r.slots = number<std::int64_t>(f, "slots", "node");
  r.address = field(f, "address", "node");
  r.devices = decodeDevices(optional(f, "devices"));
  if (r.nodeId.empty() || r.slots < 1)
    throw ProtocolError(fmt::format("node record '{}': expected a node id and slots >= 1", text));
  return r;
}

std::string encode(const ExitRecord& r) {
  return line("generation", std::to_string(r.generation)) + line("node", r.nodeId) +
         line("local_rank", std::to_string(r.localRank)) +
         line("exit_code", std::to_string(r.exitCode)) + line("early", r.early ? "1" : "0");
}

ExitRecord decodeExitRecord(const std::string& text) {
  const Fields f = parse(text, "exit");
  ExitRecord r;
  r.generation = number<std::uint64_t>(f, "generation", "exit");
  r.nodeId = field(f, "node", "exit");
  r.localRank = number<std::int64_t>(f, "local_rank", "exit");
  r.exitCode = number<int>(f, "exit_code", "exit");
  r.early = f.contains("early") && field(f, "early", "exit") == "1";
  return r;
}

namespace {

// Sorted slots as ranges: {0, 1, 2, 5} -> "0-2,5".
std::string encodeSlots(const std::vector<std::int64_t>& slots) {
  std::string out;
  for (std::size_t i = 0; i < slots.size();) {
    std::size_t j = i;
    while (j + 1 < slots.size() && slots[j + 1] == slots[j] + 1)
      ++j;
    if (!out.empty())
      out += ',';
    out += j == i ? std::to_string(slots[i]) : fmt::format("{}-{}", slots[i], slots[j]);
    i = j + 1;
  }
  return out;
}

std::vector<std::int64_t> decodeSlots(const std::string& text) {
  std::vector<std::int64_t> out;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, ',');) {
    const auto dash = part.find('-');
    std::int64_t lo = 0;
    std::int64_t hi = 0;
    const auto parse = [&](std::string_view t, std::int64_t& v) {
      const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
      return !t.empty() && ec == std::errc() && end == t.data() + t.size() && v >= 0;
    };
    const std::string_view view(part);
    const bool ok = dash == std::string::npos
                        ? parse(view, lo) && (hi = lo, true)
                        : parse(view.substr(0, dash), lo) && parse(view.substr(dash + 1), hi);
    if (!ok || hi < lo || (!out.empty() && lo <= out.back()))
      throw ProtocolError(fmt::format(
          "command record: expect = '{}': expected ascending slots and ranges (0-3,5)", text));
    for (std::int64_t v = lo; v <= hi; ++v)
      out.push_back(v);
  }
  return out;
}

}  // namespace

Duration keepAliveIntervalFor(Duration timeout) {
  return std::clamp<Duration>(timeout / 4, std::chrono::milliseconds(100), std::chrono::seconds(5));
}

std::map<std::string, std::string> encodeAssignments(
    const StartWorkers& start, const std::function<std::int64_t(const std::string&)>& slotOf) {
  std::map<std::int64_t, std::string> groups;
  for (const NodeAssignment& n : start.nodes) {
    const std::int64_t slot = slotOf(n.nodeId);
    if (slot < 0)
      continue;
    std::string& value = groups[slot / kAssignmentGroup];
    if (value.empty())
      value = line("generation", std::to_string(start.generation));
    value += line(std::to_string(slot), fmt::format("{}\t{}\t{}\t{}\t{}", n.nodeRank, n.firstRank,
                                                    n.localWorldSize, n.slots, n.nodeId));
  }
  std::map<std::string, std::string> out;
  for (auto& [group, value] : groups)
    out.emplace(assignmentKey(group * kAssignmentGroup), std::move(value));
  return out;
}

Assignment decodeAssignment(const std::string& text, std::int64_t slot, const std::string& nodeId) {
  const Fields f = parse(text, "assignment");
  Assignment a;
  a.generation = number<std::uint64_t>(f, "generation", "assignment");
  const auto it = f.find(std::to_string(slot));
  if (it == f.end())
    return a;
  std::istringstream in(it->second);
  NodeAssignment n;
  if (!(in >> n.nodeRank >> n.firstRank >> n.localWorldSize >> n.slots) || in.get() != '\t' ||
      !std::getline(in, n.nodeId) || n.nodeRank < 0 || n.firstRank < 0 || n.localWorldSize < 0)
    throw ProtocolError(fmt::format(
        "assignment record: {} = '{}': expected node rank, first rank, local world size, slots "
        "and node id separated by tabs",
        slot, it->second));
  if (n.nodeId != nodeId)
    throw ProtocolError(fmt::format(
        "assignment record: {} = '{}': expected node {} (the agent registered at slot {})", slot,
        it->second, nodeId, slot));
  a.node = std::move(n);
  return a;
}

bool expects(const Command& command, std::int64_t slot) {
  return std::binary_search(command.expect.begin(), command.expect.end(), slot);
}

void acknowledge(comm::Store& store, const Command& command, const std::string& nodeId,
                 std::int64_t slot) {
  store.set("ack/" + nodeId, std::to_string(command.sequence));
  if (!expects(command, slot))
    return;
  const auto expected = static_cast<std::int64_t>(command.expect.size());
  if (store.add(ackCountKey(command.sequence), 1) == expected)
    store.set(acksDoneKey(command.sequence), "1");
}

std::string encode(const Command& c) {
  std::string out = line("sequence", std::to_string(c.sequence)) + line("kind", kindName(c.kind));
  if (!c.reason.empty())
    out += line("reason", c.reason);
  if (!c.expect.empty())
    out += line("expect", encodeSlots(c.expect));
  const auto ranksOf = [&](std::string_view name,
                           const std::map<std::string, std::vector<int>>& m) {
    out += line(fmt::format("{}.count", name), std::to_string(m.size()));
    std::size_t i = 0;
    for (const auto& [node, locals] : m)
      out += line(fmt::format("{}.{}", name, i++), node + "\t" + encodeDevices(locals));
  };
  switch (c.kind) {
    case CommandKind::Signal:
      ranksOf("keep", c.keep);
      break;
    case CommandKind::Live:
      ranksOf("keep", c.keep);
      ranksOf("join", c.join);
      out += line("signal", c.signal ? "1" : "0");
      [[fallthrough]];
    case CommandKind::Start: {
      if (!c.start)
        throw InternalError("encode(Command): a start command without its generation");
      out += line("live_generation", std::to_string(c.liveGeneration));
      const StartWorkers& s = *c.start;
      out += line("generation", std::to_string(s.generation)) +
             line("world_size", std::to_string(s.worldSize)) +
             line("data_parallel_size", std::to_string(s.dataParallelSize)) +
             line("train_batch_size", std::to_string(s.batch.trainBatchSize)) +
             line("micro_batch", std::to_string(s.batch.microBatchPerGpu)) +
             line("accumulation", std::to_string(s.batch.gradientAccumulation)) +
             line("restart_count", std::to_string(s.restartCount)) +
             line("resume", s.resumeFromLatest ? "1" : "0") + line("master_addr", c.masterAddr) +
             line("nodes", std::to_string(s.nodes.size()));
      if (c.kind == CommandKind::Start)
        break;  // the nodes' parts: encodeAssignments
      for (const NodeAssignment& n : s.nodes) {
        out += line(fmt::format("node.{}", n.nodeRank),
                    fmt::format("{}\t{}\t{}\t{}\t{}", n.nodeId, n.nodeRank, n.firstRank,
                                n.localWorldSize, n.slots));
      }
      break;
    }
    case CommandKind::Stop:
      out += line("generation", std::to_string(c.generation));
      break;
    case CommandKind::Exit:
      out += line("exit_code", std::to_string(c.exitCode));
      break;
  }
  return out;
}

Command decodeCommand(const std::string& text) {
  const Fields f = parse(text, "command");
  Command c;
  c.sequence = number<std::uint64_t>(f, "sequence", "command");
  c.reason = optional(f, "reason");
  c.expect = decodeSlots(optional(f, "expect"));
  const std::string& kind = field(f, "kind", "command");
  const auto ranksOf = [&](std::string_view name) {
    std::map<std::string, std::vector<int>> m;
    const auto count = number<std::int64_t>(f, fmt::format("{}.count", name), "command");
    for (std::int64_t i = 0; i < count; ++i) {
      const std::string& v = field(f, fmt::format("{}.{}", name, i), "command");
      const auto tab = v.find('\t');
      if (tab == std::string::npos || tab == 0)
        throw ProtocolError(fmt::format(
            "command record: {}.{} = '{}': expected a node id, a tab and local ranks", name, i, v));
      m[v.substr(0, tab)] = decodeDevices(v.substr(tab + 1));
    }
    return m;
  };
  if (kind == "live" || kind == "signal")
    c.keep = ranksOf("keep");
  if (kind == "signal") {
    c.kind = CommandKind::Signal;
  } else if (kind == "start" || kind == "live") {
    c.kind = kind == "live" ? CommandKind::Live : CommandKind::Start;
    if (c.kind == CommandKind::Live) {
      c.join = ranksOf("join");
      c.signal = field(f, "signal", "command") == "1";
    }
    c.liveGeneration = number<std::uint64_t>(f, "live_generation", "command");
    StartWorkers s;
    s.generation = number<std::uint64_t>(f, "generation", "command");
    s.worldSize = number<std::int64_t>(f, "world_size", "command");
    s.dataParallelSize = number<std::int64_t>(f, "data_parallel_size", "command");
    s.batch.trainBatchSize = number<std::int64_t>(f, "train_batch_size", "command");
    s.batch.microBatchPerGpu = number<std::int64_t>(f, "micro_batch", "command");
    s.batch.gradientAccumulation = number<std::int64_t>(f, "accumulation", "command");
    s.restartCount = number<std::int64_t>(f, "restart_count", "command");
    s.resumeFromLatest = field(f, "resume", "command") == "1";
    s.reason = c.reason;
    c.masterAddr = field(f, "master_addr", "command");
    const auto count = number<std::int64_t>(f, "nodes", "command");
    if (count < 0)
      throw ProtocolError(
          fmt::format("command record: nodes = {}: expected a node count >= 0", count));
    c.nodeCount = count;
    if (c.kind == CommandKind::Start) {
      c.start = std::move(s);
      return c;  // the nodes' parts are in assign/<group> (decodeAssignment)
    }
    std::vector<NodeAssignment> nodes;
    std::int64_t nextRank = 0;
    for (std::int64_t i = 0; i < count; ++i) {
      const std::string& v = field(f, fmt::format("node.{}", i), "command");
      std::istringstream in(v);
      NodeAssignment n;
      if (!std::getline(in, n.nodeId, '\t') ||
          !(in >> n.nodeRank >> n.firstRank >> n.localWorldSize >> n.slots))
        throw ProtocolError(fmt::format(
            "command record: node.{} = '{}': expected id, node rank, first rank, local world "
            "size and slots separated by tabs",
            i, v));
      if (n.nodeRank != i || n.firstRank != nextRank || n.localWorldSize < 0)
        throw ProtocolError(fmt::format(
            "command record: node.{} = '{}': expected node rank {} and first rank {} (ranks "
            "follow the nodes in order)",
            i, v, i, nextRank));
      nextRank += n.localWorldSize;
      nodes.push_back(std::move(n));
    }
    s.nodes = NodeSequence::fromAssignments(nodes);
    c.start = std::move(s);
  } else if (kind == "stop") {
    c.kind = CommandKind::Stop;
    c.generation = number<std::uint64_t>(f, "generation", "command");
  } else if (kind == "exit") {
    c.kind = CommandKind::Exit;
    c.exitCode = number<int>(f, "exit_code", "command");
  } else {
    throw ProtocolError(fmt::format(
        "command record: kind = '{}': expected start, stop, exit, live or signal", kind));
  }
  return c;
}

std::string encode(const NodeWorkersRecord& r) {
  std::string workers;
  for (const auto& [local, pid] : r.workers)
    workers += fmt::format("{}{}:{}", workers.empty() ? "" : ",", local, pid);
  std::string joiners;
  for (const auto pid : r.joiners)
    joiners += fmt::format("{}{}", joiners.empty() ? "" : ",", pid);
  return line("generation", std::to_string(r.generation)) + line("workers", workers) +
         line("joiners", joiners);
}

NodeWorkersRecord decodeNodeWorkersRecord(const std::string& text) {
  const Fields f = parse(text, "workers");
  NodeWorkersRecord r;
  r.generation = number<std::uint64_t>(f, "generation", "workers");
  const auto bad = [&] {
    return ProtocolError(fmt::format(
        "workers record '{}': expected workers LOCAL:PID,... and joiners PID,...", text));
  };
  std::istringstream workers(optional(f, "workers"));
  for (std::string item; std::getline(workers, item, ',');) {
    const auto colon = item.find(':');
    if (colon == std::string::npos)
      throw bad();
    try {
      r.workers.emplace_back(std::stoi(item.substr(0, colon)), std::stoll(item.substr(colon + 1)));
    } catch (const std::exception&) {
      throw bad();
    }
  }
  std::istringstream joiners(optional(f, "joiners"));
  for (std::string item; std::getline(joiners, item, ',');) {
    try {
      r.joiners.push_back(std::stoll(item));
    } catch (const std::exception&) {
      throw bad();
    }
  }
  return r;
}

std::int64_t appendRecord(comm::Store& store, const std::string& name, const std::string& value) {
  const std::int64_t index = store.add(name + "/count", 1) - 1;
  store.set(fmt::format("{}/{}", name, index), value);
  return index;
}

std::vector<std::string> readRecords(comm::Store& store, const std::string& name,
                                     std::int64_t from) {
  const std::int64_t count = store.add(name + "/count", 0);
  std::vector<std::string> out;
  for (std::int64_t i = from; i < count; ++i)
    out.push_back(store.get(fmt::format("{}/{}", name, i)));  // get() waits for the set()
  return out;
}

std::optional<std::string> tryGet(comm::Store& store, const std::string& key) {
  if (!store.check({key}))
    return std::nullopt;
  return store.get(key);
}

struct RecordWatch::State {
  std::mutex mutex;
  std::condition_variable changed;
  std::int64_t next = 0;  // the reader's position
  bool fresh = false;
  bool stop = false;
};

RecordWatch::RecordWatch(std::shared_ptr<comm::Store> store, std::string name, std::int64_t next,
                         Duration period)
    : state_(std::make_shared<State>()) {
  state_->next = next;
  std::thread(run, state_, std::move(store), std::move(name), period).detach();
}

RecordWatch::~RecordWatch() {
  {
    std::lock_guard lock(state_->mutex);
    state_->stop = true;
  }
  state_->changed.notify_all();
}

bool RecordWatch::take() {
  std::lock_guard lock(state_->mutex);
  return std::exchange(state_->fresh, false);
}

void RecordWatch::readUpTo(std::int64_t next) {
  {
    std::lock_guard lock(state_->mutex);
    if (next <= state_->next)
      return;
    state_->next = next;
  }
  state_->changed.notify_all();
}

void RecordWatch::run(std::shared_ptr<State> state, std::shared_ptr<comm::Store> store,
                      std::string name, Duration period) {
  std::unique_lock lock(state->mutex);
  while (!state->stop) {
    const std::int64_t next = state->next;
    lock.unlock();
    bool found = false;
    bool failed = false;
    try {
      store->wait({fmt::format("{}/{}", name, next)}, period);
      found = true;
    } catch (const comm::StoreTimeoutError&) {
      // a period without a record: the reader looks once anyway (one request)
    } catch (const std::exception&) {
      failed = true;
    }
    lock.lock();
    state->fresh = true;
    if (found) {
      // Until the reader has read past it (or a period, should it never).
      state->changed.wait_for(lock, period, [&] { return state->stop || state->next > next; });
    } else if (failed) {
      state->changed.wait_for(lock, std::chrono::milliseconds(200), [&] { return state->stop; });
    }
  }
}

// ---- The job description ------------------------------------------------------------------------

namespace {

// The job description also goes out as one value (job/packed: "<key bytes> <value bytes>\n" then
// the key and the value, for each key), so that an agent reads it with one request instead of
// about 25 (51,000 fewer requests while 2,048 agents start).
constexpr const char* kPackedJob = "job/packed";

std::map<std::string, std::string> unpack(const std::string& text) {
  std::map<std::string, std::string> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto eol = text.find('\n', pos);
    std::size_t keyBytes = 0;
    std::size_t valueBytes = 0;
    const char* first = text.data() + pos;
    const char* last = text.data() + (eol == std::string::npos ? text.size() : eol);
    const auto [mid, ec] = std::from_chars(first, last, keyBytes);
    const bool ok = ec == std::errc() && mid < last && *mid == ' ' &&
                    std::from_chars(mid + 1, last, valueBytes).ptr == last;
    if (eol == std::string::npos || !ok || text.size() - (eol + 1) < keyBytes + valueBytes)
      throw ProtocolError(fmt::format("{}: malformed at byte {}", kPackedJob, pos));
    out.emplace(text.substr(eol + 1, keyBytes), text.substr(eol + 1 + keyBytes, valueBytes));
    pos = eol + 1 + keyBytes + valueBytes;
  }
  return out;
}

}  // namespace

void publishJob(comm::Store& store, const JobSettings& job, const std::vector<LaunchHost>& hosts) {
  std::string packed;
  const auto set = [&](const std::string& key, const std::string& value) {
    store.set(key, value);
    packed += fmt::format("{} {}\n", key.size(), value.size()) + key + value;
  };
  set("job/argv/count", std::to_string(job.command.argv.size()));
  for (std::size_t i = 0; i < job.command.argv.size(); ++i)
    set(fmt::format("job/argv/{}", i), job.command.argv[i]);
  set("job/argv/program_at", std::to_string(job.command.programAt));
  if (job.command.localRankAt)
    set("job/argv/local_rank_at", std::to_string(*job.command.localRankAt));
  if (job.command.bindCores)
    set("job/argv/bind_cores", job.command.coreList.empty() ? "all" : job.command.coreList);
  for (std::size_t r = 0; r < hosts.size(); ++r) {
    store.set(fmt::format("job/host/{}", r), hosts[r].id + "\t" + encodeDevices(hosts[r].slots));
  }
  set("job/env/MASTER_PORT", std::to_string(job.masterPort));
  set("job/env/STRETCH_MAX_RESTARTS", std::to_string(job.maxRestarts));
  if (job.elasticJson)
    set("job/env/DEEPSPEED_ELASTICITY_CONFIG", *job.elasticJson);
  if (job.configJson)
    set("job/ds_config", *job.configJson);
  set("job/env/STRETCH_BATCH_FROM_CONFIG", job.batchFromConfig ? "1" : "0");
  set("job/live", job.liveRecovery ? "1" : "0");
  set("job/hang_timeout", fmt::format("{}", job.hangTimeout));
  set("job/hang_timeout_fixed", job.hangTimeoutFixed ? "1" : "0");
  if (job.keepAliveInterval)
    set("job/keepalive_interval", fmt::format("{}", toSeconds(*job.keepAliveInterval)));
  store.set(kPackedJob, packed);
  store.set("job/ready", "1");
}

JobSettings readJob(comm::Store& store) {
  store.wait({"job/ready"});
  // One request for the whole description when the launcher packed it, else one per key.
  std::optional<std::map<std::string, std::string>> packed;
  if (auto text = tryGet(store, kPackedJob))
    packed = unpack(*text);
  const auto find = [&](const std::string& key) -> std::optional<std::string> {
    if (!packed)
      return tryGet(store, key);
    const auto it = packed->find(key);
    return it == packed->end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  const auto get = [&](const std::string& key) {
    if (!packed)
      return store.get(key);
    auto value = find(key);
    if (!value)
      throw ProtocolError(fmt::format("{}: no {}", kPackedJob, key));
    return *value;
  };
  JobSettings job;
  const auto count = std::stoll(get("job/argv/count"));
  for (long long i = 0; i < count; ++i)
    job.command.argv.push_back(get(fmt::format("job/argv/{}", i)));
  if (const auto at = find("job/argv/program_at"))
    job.command.programAt = static_cast<std::size_t>(std::stoull(*at));
  if (const auto at = find("job/argv/local_rank_at"))
    job.command.localRankAt = static_cast<std::size_t>(std::stoull(*at));
  if (const auto cores = find("job/argv/bind_cores")) {
    job.command.bindCores = true;
    job.command.coreList = *cores == "all" ? std::string() : *cores;
  }
  job.masterPort = std::stoi(get("job/env/MASTER_PORT"));
  job.maxRestarts = std::stoll(get("job/env/STRETCH_MAX_RESTARTS"));
  job.elasticJson = find("job/env/DEEPSPEED_ELASTICITY_CONFIG");
  job.batchFromConfig = find("job/env/STRETCH_BATCH_FROM_CONFIG") == "1";
  job.configJson = find("job/ds_config");
  job.liveRecovery = find("job/live") == "1";
  if (const auto hang = find("job/hang_timeout")) {
    try {
      job.hangTimeout = std::stod(*hang);
    } catch (const std::exception&) {
      throw ProtocolError(fmt::format("job/hang_timeout = \"{}\": expected seconds", *hang));
    }
  }
  job.hangTimeoutFixed = find("job/hang_timeout_fixed") == "1";
  if (const auto interval = find("job/keepalive_interval")) {
    double seconds = 0;
    try {
      seconds = std::stod(*interval);
    } catch (const std::exception&) {
      seconds = -1;
    }
    if (!(seconds > 0))
      throw ProtocolError(
          fmt::format("job/keepalive_interval = \"{}\": expected seconds > 0", *interval));
    job.keepAliveInterval = fromSeconds(seconds);
  }
  return job;
}

LaunchHost readLaunchHost(comm::Store& store, std::int64_t nodeRank) {
  const auto text = tryGet(store, fmt::format("job/host/{}", nodeRank));
  if (!text) {
    throw ConfigError(
        ErrorDetail{"--node_rank", std::to_string(nodeRank), "the rank of a host of this launch"});
  }
  const auto tab = text->find('\t');
  LaunchHost host;
  host.id = text->substr(0, tab);
  if (tab != std::string::npos)
    host.slots = decodeDevices(text->substr(tab + 1));
  return host;
}

}  // namespace stretch::launcher
