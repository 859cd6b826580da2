#pragma once
// How the job controller (in `stretch launch`) and the node agents (`stretch agent`, one per node)
// of a multi-node job talk: through keys of one comm::Store (a TcpStore the launcher serves on
// the rendezvous port). The controller runs the job's single AgentStateMachine with the
// job-wide view; node agents register, send keep-alives, carry out the controller's commands
// with their NodeWorkers and report their workers' exits. Everything that reads or writes these
// keys is in this file's .cpp; the controller (job_controller.hpp) and the node agents
// (node_agent.hpp) use only the functions below.
//
// Keys (all under the job prefix, "stretch/job" by default):
//   job/argv/count, job/argv/<i>   the worker program and its arguments (controller, once)
//   job/argv/local_rank_at         where workers get "--local_rank=N" (worker_command.hpp)
//   job/argv/bind_cores            "all" or a core list: bind workers to cores
//   job/ds_config                  the job's DeepSpeed config, as JSON text (with --config)
//   job/host/<rank>                "<host id>\t<slot indices, comma-separated>" for node rank
//                                  <rank> of the launch (agents started with --node_rank)
//   job/env/<NAME>                 job-wide worker settings: MASTER_PORT, STRETCH_MAX_RESTARTS,
//                                  DEEPSPEED_ELASTICITY_CONFIG, STRETCH_BATCH_FROM_CONFIG
//   job/packed                     every job/... key above but job/host/<rank>, in one value
//                                  (an agent reads the description with one request)
//   job/ready                      set last: the job description above is complete
//   nodes/count, nodes/<i>         registrations, appended with add(): a NodeRecord each
//   job/keepalive_interval         seconds between an agent's keep-alives (keepAliveIntervalFor
//                                  the launch's --keepalive_timeout); the controller reads the
//                                  keep-alives as often
//   hb/<group>                     keep-alives of 12 nodes (keepAliveKey): a node's slot is the
//                                  index of its registration record (nodes/<slot>), its field the
//                                  4 bits at 4 * (slot % 12) of group slot / 12. The agent add()s
//                                  keepAliveBit(slot) every interval; the controller reads every
//                                  group once per interval (one tryMultiGet for all) and sees
//                                  which fields moved (the base-16 digits of the change since its
//                                  last read), on its own clock, so hosts need no synchronised
//                                  clocks. It subtracts what it read when the value grows large.
//   leaves/count, leaves/<i>       departures, appended with add(): "<node>\t<why>" (the agent
//                                  leaving on purpose, or the launcher seeing its process end)
//   cmd                            the latest Command (the controller overwrites it)
//   assign/<group>                 the assignments of a Start command's nodes whose registration
//                                  slots are in group slot / 64 (assignmentKey): the generation,
//                                  then per member slot its node rank, first rank, local world
//                                  size, slots and id. Written before the command; each agent
//                                  reads its own group (64 nodes' lines at most), so a start
//                                  round serves O(nodes) bytes, not every node's assignment to
//                                  every node (2,048 x 60 KB before)
//   cmd/<sequence>                 set once that command is in `cmd`: an idle agent blocks on a
//                                  wait for the next one's key instead of polling `cmd`. The
//                                  controller deletes cmd/<s - 2> when it publishes command s:
//                                  an agent that waits on a deleted key (it missed commands) reads
//                                  `cmd` when its wait ends (kCommandWaitPeriod) and catches up
//   ack/<node>                     the sequence number of the last command the agent finished
//   acks/<sequence>                how many of the agents the command expects (Command::expect)
//                                  finished it: each add()s 1, and the one that makes it complete
//                                  sets acks/<sequence>/all, which the controller waits on (it
//                                  reads ack/<node> only for a command some expected node was lost
//                                  during); both deleted with cmd/<sequence>
//   exits/count, exits/<i>         worker exits, appended with add(): an ExitRecord each
//   workers/<node>                 the node's running workers (NodeWorkersRecord; live jobs)
//   job/live                       "1": live recovery (Command's Live and Signal; the workers'
//                                  live/... keys share the store, outside the job prefix)
//
// Order: an agent that leaves appends its departure BEFORE it stops its workers, and the
// controller reads the exits first and the departures second in each poll, then applies the
// departures first: the other nodes' workers, failing because the leaver's died, are then stale
// exits of the stopped generation, so one departure makes exactly one restart.
//
// Values are "key=value" lines; decode* throw ProtocolError naming the record and the bad line.
// Pure apart from the Store calls in the helpers at the bottom.
//
// What a worker learns of its generation travels one path: the controller's StartWorkers goes
// out as the `cmd` key (world size, batch triple, node count) and the assign/<group> keys (each
// node's assignment); each node agent reads its own (readAssignment) and hands it to NodeWorkers,
// which asks jobWorkerEnvironment (worker_env.hpp) for each worker's variables and passes them to
// spawnProcess (process.hpp).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/agent/state_machine.hpp"
#include "runtime/comm/store.hpp"
#include "runtime/common/error.hpp"
#include "runtime/launcher/launch_defaults.hpp"
#include "runtime/launcher/worker_command.hpp"

namespace stretch::launcher {

// A malformed value in the job's store (a bug or a foreign writer).
STRETCH_DECLARE_ERROR(ProtocolError, Error);

inline constexpr const char* kJobPrefix = "stretch/job";

// The key set once command `sequence` is published (agents wait on it).
inline std::string commandKey(std::uint64_t sequence) {
  return "cmd/" + std::to_string(sequence);
}
// How many expected agents finished command `sequence`, and the key set when all of them have.
inline std::string ackCountKey(std::uint64_t sequence) {
  return "acks/" + std::to_string(sequence);
}
inline std::string acksDoneKey(std::uint64_t sequence) {
  return ackCountKey(sequence) + "/all";
}

// How long an agent's wait for its next command lasts before it is renewed; each renewal also
// reads `cmd`, so an agent that missed a command (a deleted key, a lost notification) catches up
// within this. An idle agent's requests besides its keep-alives: a wait, its cancel and a read
// of `cmd` (check and get) per period.
inline constexpr agent::Duration kCommandWaitPeriod = std::chrono::seconds(60);

// Start commands' assignments (assign/<group>): the nodes of 64 registration slots share a key.
inline constexpr std::int64_t kAssignmentGroup = 64;
inline std::string assignmentKey(std::int64_t slot) {
  return "assign/" + std::to_string(slot / kAssignmentGroup);
}

// Keep-alives (hb/<group>): 12 nodes share one counter, 4 bits each, so the controller's one
// request per interval (Store::tryMultiGet) carries a value per 12 nodes (171 for 2,048). A field
// holds up to 15 beats between two reads.
inline constexpr std::int64_t kKeepAliveGroup = 12;
inline constexpr int kKeepAliveFieldBits = 4;
inline std::string keepAliveKey(std::int64_t slot) {
  return "hb/" + std::to_string(slot / kKeepAliveGroup);
}
inline std::int64_t keepAliveBit(std::int64_t slot) {
  return std::int64_t{1} << (kKeepAliveFieldBits * (slot % kKeepAliveGroup));
}

// The keep-alive interval of a job whose nodes count as lost after `timeout` without one: a
// quarter of it (a node is lost after four missed beats), between 100 ms and 5 s. The agents
// the launcher starts beat this often (stretch agent --keepalive_interval), and the controller
// reads the keep-alives as often: 0.8 + 1/15, about 0.87 store requests per node per second at
// the default 5 s timeout (its beats, its command wait), and the controller's one read of every
// node's keep-alives per interval (0.8 a second for the whole job).
agent::Duration keepAliveIntervalFor(agent::Duration timeout);

struct NodeRecord {
  std::string nodeId;
  std::int64_t slots = 0;
  std::string address;       // where this node's workers listen (MASTER_ADDR for rank 0)
  std::vector<int> devices;  // slot indices (CUDA_VISIBLE_DEVICES on GPU hosts)
  bool operator==(const NodeRecord&) const = default;
};

struct ExitRecord {
  std::uint64_t generation = 0;
  std::string nodeId;
  std::int64_t localRank = 0;
  int exitCode = 0;    // as WorkerExited: < 0 killed by signal -code
  bool early = false;  // as WorkerExited
  bool operator==(const ExitRecord&) const = default;
};

// Live recovery across nodes (job/live set; runtime/live/generation.hpp has the workers'
// side): Live keeps the running workers that `keep` lists on each node (every other worker of
// the node is stopped), starts the `join` local ranks as workers joining the running job (for
// live generation `liveGeneration`), adopts `start` as the node's generation, then sends SIGUSR1
// to the kept workers when `signal` is set; Signal sends SIGUSR1 to the `keep` workers (a
// generation they belong to was published).
enum class CommandKind { Start, Stop, Exit, Live, Signal };

struct Command {
  std::uint64_t sequence = 0;  // 1, 2, ...: agents carry out each sequence number once
  CommandKind kind = CommandKind::Stop;
  // Start, Live: the generation. Live carries every node's part; a Start's parts go to the
  // assign/<group> keys (encodeAssignments), so a decoded Start has no nodes, only nodeCount.
  std::optional<agent::StartWorkers> start;
  std::int64_t nodeCount = 0;    // Start, Live: the generation's nodes (decoded)
  std::string masterAddr;        // Start, Live: rank 0's host
  std::uint64_t generation = 0;  // Stop: the generation to stop
  int exitCode = 0;              // Exit: the job's result
  // Start: the newest live generation (workers wait for a later one); Live: the one the joiners
  // are for.
  std::uint64_t liveGeneration = 0;
  std::map<std::string, std::vector<int>> keep;  // Live, Signal: node -> local ranks
  std::map<std::string, std::vector<int>> join;  // Live: node -> local ranks to start
  bool signal = false;                           // Live
  std::string reason;
  // The registration slots (nodes/<slot>) of the agents the controller waits for: only they count
  // themselves in acks/<sequence>, so an agent the controller gave up on cannot stand in for one
  // it waits for. Sorted; encoded as ranges ("0-2047").
  std::vector<std::int64_t> expect;
  bool operator==(const Command&) const = default;
};

// The assign/<group> values of a Start command's generation: key -> value for every group that
// holds a member; slotOf gives a member's registration slot (members without one, < 0, are left
// out: their agents are gone).
std::map<std::string, std::string> encodeAssignments(
    const agent::StartWorkers& start,
    const std::function<std::int64_t(const std::string&)>& slotOf);
// A node's part of a Start command, from its assign/<group> value.
struct Assignment {
  std::uint64_t generation = 0;               // the generation the value was written for
  std::optional<agent::NodeAssignment> node;  // nullopt: the slot runs nothing in it
};
// Throws ProtocolError naming the record and line for a malformed value, and when the slot's
// line names another node than `nodeId`.
Assignment decodeAssignment(const std::string& text, std::int64_t slot, const std::string& nodeId);

// True when `slot` is among the command's expected agents.
bool expects(const Command& command, std::int64_t slot);

// An agent finished `command`: ack/<node>, and acks/<sequence> when it is expected (setting
// acks/<sequence>/all when it is the last).
void acknowledge(comm::Store& store, const Command& command, const std::string& nodeId,
                 std::int64_t slot);

// What a node agent runs now (key workers/<node>, rewritten whenever it changes and before the
// exits it reaps are appended): its generation and its running workers (local rank, pid), and
// which of them were started into the running job (joiners).
struct NodeWorkersRecord {
  std::uint64_t generation = 0;
  std::vector<std::pair<int, std::int64_t>> workers;  // (local rank, pid), by local rank
  std::vector<std::int64_t> joiners;                  // pids
  bool operator==(const NodeWorkersRecord&) const = default;
};

std::string encode(const NodeRecord& record);
NodeRecord decodeNodeRecord(const std::string& text);
std::string encode(const ExitRecord& record);
ExitRecord decodeExitRecord(const std::string& text);
std::string encode(const Command& command);
Command decodeCommand(const std::string& text);
std::string encode(const NodeWorkersRecord& record);
NodeWorkersRecord decodeNodeWorkersRecord(const std::string& text);

// "0,1,3" <-> {0, 1, 3}; decodeDevices throws ProtocolError for anything else.
std::string encodeDevices(const std::vector<int>& devices);
std::vector<int> decodeDevices(const std::string& text);

// ---- Store helpers ----------------------------------------------------------------------------

// Appends `value` to the list `name` (name/count, name/<i>) and returns its index (0-based).
std::int64_t appendRecord(comm::Store& store, const std::string& name, const std::string& value);
// The records of list `name` from index `from` up to its current count (waits for each value:
// add() makes the index visible just before set() writes it).
std::vector<std::string> readRecords(comm::Store& store, const std::string& name,
                                     std::int64_t from);
// Reads a key when it exists, without waiting.
std::optional<std::string> tryGet(comm::Store& store, const std::string& key);

// Tells the reader of list `name` (name/count, name/<i>) that it has something to read, without
// it polling the count: a thread of its own blocks in a wait for the key of the next record
// (name/<next>, the reader's position), renewed every `period`. take() is cheap (no request):
// the job controller's loop asks it every turn. It also says yes once a wait failed (the store's
// connection dropped) or a period passed, so that a reader never depends on one notification.
// The thread holds the store and its state and ends after the wait in flight once this is
// destroyed (at most `period` later): nothing waits for it.
class RecordWatch {
 public:
  RecordWatch(std::shared_ptr<comm::Store> store, std::string name, std::int64_t next,
              agent::Duration period);
  ~RecordWatch();
  RecordWatch(const RecordWatch&) = delete;
  RecordWatch& operator=(const RecordWatch&) = delete;

  // True, once, when the list may have grown since the last take(): read it then.
  bool take();
  // The reader has read the records before `next`: the thread waits for name/<next> now.
  void readUpTo(std::int64_t next);

 private:
  struct State;
  static void run(std::shared_ptr<State> state, std::shared_ptr<comm::Store> store,
                  std::string name, agent::Duration period);
  std::shared_ptr<State> state_;
};

// ---- The job description (job/...) --------------------------------------------------------------

// Settings every worker of the job gets, whatever its node.
struct JobSettings {
  int masterPort = 29500;
  std::int64_t maxRestarts = 0;
  std::string token;                       // STRETCH_STORE_TOKEN (never written to the store)
  std::optional<std::string> elasticJson;  // DEEPSPEED_ELASTICITY_CONFIG
  bool batchFromConfig = false;            // the job has a config: workers get the batch triple
  bool liveRecovery = false;               // job/live: failures keep the surviving workers
  // job/hang_timeout: --hang_timeout (seconds, 0: off)
  double hangTimeout = toSeconds(kDefaultHangTimeout);
  bool hangTimeoutFixed = false;          // job/hang_timeout_fixed: the user gave it
  std::optional<std::string> configJson;  // the job's DeepSpeed config (STRETCH_DS_CONFIG)
  // job/keepalive_interval: how often the agents beat (unset: the agent's own interval)
  std::optional<agent::Duration> keepAliveInterval;
  WorkerCommand command;  // the worker program, its arguments and rules
};

// The launch's hosts in node-rank order: id and slot indices.
struct LaunchHost {
  std::string id;
  std::vector<int> slots;
};

// Writes the job description (job/argv, job/host/<rank>, job/env/..., then job/ready).
void publishJob(comm::Store& store, const JobSettings& job, const std::vector<LaunchHost>& hosts);
// Waits (up to the store's timeout) for job/ready and reads the description back; token is
// left empty (an agent already has it).
JobSettings readJob(comm::Store& store);
// Host `nodeRank` of the launch. Throws ConfigError naming --node_rank when there is none.
LaunchHost readLaunchHost(comm::Store& store, std::int64_t nodeRank);

}  // namespace stretch::launcher
