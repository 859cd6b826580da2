#pragma once
// initDistributed: DeepSpeed's deepspeed.comm.init_distributed for Stretch.
//
// 1. An already-initialised default group is reused (and its rank/size checked against any
//    explicit arguments).
// 2. Otherwise rank, world size, local rank, master address and port come from the arguments,
//    else the launcher's variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT),
//    else, when autoMpiDiscovery is on and MPI started us, from OpenMPI
//    (OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE) or PMI (PMI_RANK/PMI_SIZE,
//    MPI_LOCALRANKID). Missing or contradictory values give one DistributedInitError listing
//    every variable that was found.
// 3. Rank 0 starts a TCPStore server on MASTER_ADDR:MASTER_PORT (bound to that address only);
//    every rank connects with the job token from STRETCH_STORE_TOKEN. "file://PATH" uses a
//    FileStore instead; "tcp://HOST:PORT" overrides the master. "redis://HOST:PORT[/PREFIX]"
//    uses a RedisStore on that server (keys under "PREFIX/", "stretch/" without one; the
//    password, if any, from STRETCH_REDIS_PASSWORD) through runtime/comm/store_registry.hpp:
//    only in builds with hiredis after registerBuiltinBackends(), else DistributedInitError
//    names the URL. A prefix must serve one run: one that already holds a completed rendezvous
//    is a DistributedInitError.
// 4. The backend named by `backend` is built through the backend registry
//    (runtime/comm/backend_registry.hpp) over a PrefixStore, with `device`'s backend for device
//    buffers when given (NCCL, or Gloo staged through host memory), and installed as the
//    default group.
//
// Timeout: the argument, else STRETCH_TIMEOUT or DEEPSPEED_TIMEOUT (minutes), else 10 minutes.

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "runtime/comm/process_group.hpp"
#include "runtime/comm/types.hpp"

namespace stretch::comm {

using Environment = std::map<std::string, std::string>;

// The process environment as a map (for discoverEnvironment).
Environment processEnvironment();

class DeviceStaging;

// What serves a job's device buffers besides the CPU backend (runtime/comm/backend_choice.hpp
// decides): a registered device backend ("nccl"), rendezvousing under the group's store prefix
// "device/"; or, with staging set, a StagedBackend over the CPU backend; or neither (CPU jobs).
// The backend of a job's device buffers. `backend` (a registered name, "nccl") serves them
// natively; else `staging` moves them through host memory to the host backend. With both, and
// an `identity` (the rank's device UUID), building a group first asks whether two ranks share a
// device (anyDeviceShared: several local "nodes" on one machine) and then stages instead; with
// `backend` alone, such a group is a ConfigError naming the device.
struct DeviceComm {
  std::string backend;
  std::shared_ptr<DeviceStaging> staging;
  std::string identity;
};

struct InitOptions {
  std::string backend = "gloo";  // a registered backend name
  DeviceComm device;             // device buffers' backend, besides `backend`'s
  bool autoMpiDiscovery = true;
  int port = 29500;  // MASTER_PORT when the environment has none (DeepSpeed's default)
  std::optional<Duration> timeout;
  std::string initMethod;  // "", "env://", "tcp://HOST:PORT", "file:///path" or
                           // "redis://HOST:PORT[/PREFIX]"
  int rank = -1;           // -1: from the environment
  int worldSize = -1;      // -1: from the environment
};

// Where each value came from, for messages and `stretch report`.
enum class EnvSource { Arguments, Launcher, OpenMpi, Pmi };
std::string_view toString(EnvSource source) noexcept;

struct DistributedEnv {
  int rank = 0;
  int worldSize = 1;
  int localRank = 0;
  std::string masterAddr = "127.0.0.1";
  int masterPort = 29500;
  Duration timeout = kDefaultTimeout;
  std::string token;  // STRETCH_STORE_TOKEN, "" when unset
  std::string initMethod = "env://";
  EnvSource source = EnvSource::Launcher;
};

// Pure: works out the distributed environment from options and variables; throws
// DistributedInitError with everything it found when that is impossible or inconsistent.
DistributedEnv discoverEnvironment(const InitOptions& options, const Environment& env);

// Discovers, builds the store and backend, and installs the result as the default group; or
// returns the default group if one exists. Blocks until every rank has joined (timeout).
std::shared_ptr<ProcessGroup> initDistributed(const InitOptions& options = {});

// A group of `size` ranks whose backend (a registered name) rendezvouses through `store`,
// already prefixed for this group: what initDistributed builds after discovery, for the groups
// a job builds later (live recovery's generations, runtime/live/generation.hpp). The
// transport binds to this host's address towards `peerAddress` (the store's host). Collective:
// blocks until every rank has joined (timeout). The group's store() is left unset.
// `device` adds the device buffers' backend as InitOptions::device says.
std::shared_ptr<ProcessGroup> buildGroup(const std::string& backend, std::shared_ptr<Store> store,
                                         int rank, int size, Duration timeout,
                                         const std::string& peerAddress, int localRank,
                                         const DeviceComm& device = {});

// The default group, or nullptr before initDistributed / after destroyProcessGroup.
std::shared_ptr<ProcessGroup> defaultGroup();
bool isInitialized();
// Installs `group` as the default (tests, the simulator, embedding applications).
void setDefaultGroup(std::shared_ptr<ProcessGroup> group);
void destroyProcessGroup();

}  // namespace stretch::comm
