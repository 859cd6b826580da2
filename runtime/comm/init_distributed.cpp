#include "runtime/comm/init_distributed.hpp"

#include <arpa/inet.h>
#include <charconv>
#include <mutex>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "runtime/comm/backend_choice.hpp"
#include "runtime/comm/backend_registry.hpp"
#include "runtime/comm/errors.hpp"
#include "runtime/comm/file_store.hpp"
#include "runtime/comm/staged_backend.hpp"
#include "runtime/comm/store.hpp"
#include "runtime/comm/store_registry.hpp"
#include "runtime/comm/tcp_store.hpp"
#include "runtime/common/error.hpp"
#include "runtime/common/worker_variables.hpp"

extern char** environ;

namespace stretch::comm {

Environment processEnvironment() {
  Environment env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const auto eq = text.find('=');
    if (eq != std::string_view::npos)
      env.emplace(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
  }
  return env;
}

std::string_view toString(EnvSource source) noexcept {
  switch (source) {
    case EnvSource::Arguments:
      return "arguments";
    case EnvSource::Launcher:
      return "launcher environment";
    case EnvSource::OpenMpi:
      return "OpenMPI environment";
    case EnvSource::Pmi:
      return "PMI environment";
  }
  return "?";
}

namespace {

// Every variable initDistributed looks at, in the order errors list them.
constexpr std::string_view kRelevant[] = {"RANK",
                                          "WORLD_SIZE",
                                          "LOCAL_RANK",
                                          "MASTER_ADDR",
                                          "MASTER_PORT",
                                          "OMPI_COMM_WORLD_RANK",
                                          "OMPI_COMM_WORLD_SIZE",
                                          "OMPI_COMM_WORLD_LOCAL_RANK",
                                          "OMPI_COMM_WORLD_LOCAL_SIZE",
                                          "PMI_RANK",
                                          "PMI_SIZE",
                                          "MPI_LOCALRANKID",
                                          "MPI_LOCALNRANKS",
                                          worker_env::kTimeout,
                                          "DEEPSPEED_TIMEOUT"};

std::optional<std::string> lookup(const Environment& env, std::string_view name) {
  const auto it = env.find(std::string(name));
  if (it == env.end())
    return std::nullopt;
  return it->second;
}

std::string foundList(const Environment& env, const InitOptions& options) {
  std::vector<std::string> parts;
  if (options.rank >= 0)
    parts.push_back(fmt::format("rank argument = {}", options.rank));
  if (options.worldSize >= 0)
    parts.push_back(fmt::format("world size argument = {}", options.worldSize));
  if (!options.initMethod.empty())
    parts.push_back(fmt::format("init method = \"{}\"", options.initMethod));
  for (std::string_view name : kRelevant) {
    if (auto value = lookup(env, name))
      parts.push_back(fmt::format("{}={}", name, *value));
  }
  return parts.empty() ? std::string("none of them") : fmt::format("{}", fmt::join(parts, ", "));
}

[[noreturn]] void fail(const std::string& problem, const Environment& env,
                       const InitOptions& options) {
  throw DistributedInitError(fmt::format(
      "cannot initialise distributed training: {}.\n  Found: {}.\n  Expected: the launcher's "
      "RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT (stretch launch sets them), or "
      "OpenMPI's OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK or PMI_RANK/PMI_SIZE under mpirun, or "
      "none of them for a single process",
      problem, foundList(env, options)));
}

std::optional<long long> parseInteger(const std::string& text) {
  long long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    return std::nullopt;
  return value;
}

// An integer variable, or nullopt when unset; a malformed value fails with everything found.
std::optional<int> intVar(const Environment& env, std::string_view name, const InitOptions& options,
                          long long minimum) {
  auto text = lookup(env, name);
  if (!text)
    return std::nullopt;
  const auto value = parseInteger(*text);
  if (!value || *value < minimum || *value > 1'000'000'000) {
    fail(fmt::format("{} = \"{}\" is not an integer >= {}", name, *text, minimum), env, options);
  }
  return static_cast<int>(*value);
}

Duration timeoutFrom(const InitOptions& options, const Environment& env) {
  if (options.timeout)
    return *options.timeout;
  for (std::string_view name : {worker_env::kTimeout, "DEEPSPEED_TIMEOUT"}) {
    if (auto text = lookup(env, name)) {
      const auto minutes = parseInteger(*text);
      if (!minutes || *minutes <= 0 || *minutes > 100000) {
        throw DistributedInitError(ErrorDetail{std::string(name), fmt::format("\"{}\"", *text),
                                               "a positive whole number of minutes"});
      }
      return std::chrono::minutes(*minutes);
    }
  }
  return kDefaultTimeout;
}

struct HostPort {
  std::string host;
  int port = 0;
};

// "HOST:PORT" (an IPv6 literal in brackets); `form` is the accepted syntax, for the error.
HostPort parseHostPort(const std::string& method, const std::string& rest, std::string_view form) {
  const auto colon = rest.rfind(':');
  const auto port =
      colon == std::string::npos ? std::nullopt : parseInteger(rest.substr(colon + 1));
  if (colon == std::string::npos || colon == 0 || !port || *port < 1 || *port > 65535) {
    throw DistributedInitError(ErrorDetail{"init_method", fmt::format("\"{}\"", method),
                                           fmt::format("{} with a port in 1..65535", form)});
  }
  std::string host = rest.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return {host, static_cast<int>(*port)};
}

HostPort parseTcpInitMethod(const std::string& method) {
  return parseHostPort(method, method.substr(6), "\"tcp://HOST:PORT\"");
}

constexpr std::string_view kRedisScheme = "redis://";
constexpr std::string_view kRedisForm = "\"redis://HOST:PORT[/PREFIX]\"";

// "redis://HOST:PORT[/PREFIX]": the store of runtime/comm/redis, through the store registry.
StoreInit parseRedisInitMethod(const std::string& method) {
  const std::string rest = method.substr(kRedisScheme.size());
  const auto slash = rest.find('/');
  const HostPort hp = parseHostPort(method, rest.substr(0, slash), kRedisForm);
  StoreInit init;
  init.url = method;
  init.host = hp.host;
  init.port = hp.port;
  if (slash != std::string::npos)
    init.path = rest.substr(slash + 1);
  return init;
}

}  // namespace

DistributedEnv discoverEnvironment(const InitOptions& options, const Environment& env) {
  DistributedEnv out;
  out.timeout = timeoutFrom(options, env);
  out.token = lookup(env, worker_env::kStoreToken).value_or("");
  out.initMethod = options.initMethod.empty() ? "env://" : options.initMethod;
  if (out.initMethod != "env://" && !out.initMethod.starts_with("tcp://") &&
      !out.initMethod.starts_with("file://") && !out.initMethod.starts_with(kRedisScheme)) {
    throw DistributedInitError(ErrorDetail{
        "init_method", fmt::format("\"{}\"", out.initMethod),
        fmt::format("\"env://\", \"tcp://HOST:PORT\", \"file:///PATH\" or {}", kRedisForm)});
  }
  if (out.initMethod.starts_with("file://") && out.initMethod.size() <= 7) {
    throw DistributedInitError(
        ErrorDetail{"init_method", fmt::format("\"{}\"", out.initMethod),
                    "\"file:///PATH\" naming a file on a shared file system"});
  }

  const auto rank = intVar(env, "RANK", options, 0);
  const auto world = intVar(env, "WORLD_SIZE", options, 1);
  const auto localRank = intVar(env, "LOCAL_RANK", options, 0);
  const auto masterPort = intVar(env, "MASTER_PORT", options, 1);
  const auto masterAddr = lookup(env, "MASTER_ADDR");
  const bool launcherComplete = rank && world && localRank && masterAddr && masterPort;

  const auto ompiRank = intVar(env, "OMPI_COMM_WORLD_RANK", options, 0);
  const auto ompiSize = intVar(env, "OMPI_COMM_WORLD_SIZE", options, 1);
  const auto ompiLocal = intVar(env, "OMPI_COMM_WORLD_LOCAL_RANK", options, 0);
  const auto ompiLocalSize = intVar(env, "OMPI_COMM_WORLD_LOCAL_SIZE", options, 1);
  const auto pmiRank = intVar(env, "PMI_RANK", options, 0);
  const auto pmiSize = intVar(env, "PMI_SIZE", options, 1);
  const auto pmiLocal = intVar(env, "MPI_LOCALRANKID", options, 0);
  const auto pmiLocalSize = intVar(env, "MPI_LOCALNRANKS", options, 1);

  std::optional<int> r = rank;
  std::optional<int> w = world;
  std::optional<int> lr = localRank;
  bool singleNode = false;
  out.source = EnvSource::Launcher;
  if (!launcherComplete && options.autoMpiDiscovery && (ompiRank || pmiRank)) {
    const bool ompi = ompiRank.has_value();
    const auto mpiRank = ompi ? ompiRank : pmiRank;
    const auto mpiSize = ompi ? ompiSize : pmiSize;
    const auto mpiLocal = ompi ? ompiLocal : pmiLocal;
    const auto mpiLocalSize = ompi ? ompiLocalSize : pmiLocalSize;
    const char* sizeName = ompi ? "OMPI_COMM_WORLD_SIZE" : "PMI_SIZE";
    if (!mpiSize)
      fail(fmt::format("MPI started this process but {} is missing", sizeName), env, options);
    if (rank && *rank != *mpiRank)
      fail(fmt::format("RANK={} contradicts the MPI rank {}", *rank, *mpiRank), env, options);
    if (world && *world != *mpiSize)
      fail(fmt::format("WORLD_SIZE={} contradicts the MPI world size {}", *world, *mpiSize), env,
           options);
    r = mpiRank;
    w = mpiSize;
    lr = localRank ? localRank : (mpiLocal ? mpiLocal : std::optional<int>(0));
    singleNode = mpiLocalSize && *mpiLocalSize == *mpiSize;
    out.source = ompi ? EnvSource::OpenMpi : EnvSource::Pmi;
  }

  if (options.rank >= 0) {
    if (r && *r != options.rank && out.source != EnvSource::Launcher)
      fail(fmt::format("the rank argument {} contradicts the {} rank {}", options.rank,
                       toString(out.source), *r),
           env, options);
    if (rank && *rank != options.rank)
      fail(fmt::format("the rank argument {} contradicts RANK={}", options.rank, *rank), env,
           options);
    r = options.rank;
  }
  if (options.worldSize >= 0) {
    if (w && *w != options.worldSize)
      fail(fmt::format("the world size argument {} contradicts the {} world size {}",
                       options.worldSize, toString(out.source), *w),
           env, options);
    w = options.worldSize;
  }
  if (options.rank >= 0 && options.worldSize >= 0 && !rank && !world &&
      out.source == EnvSource::Launcher)
    out.source = EnvSource::Arguments;

  if (!r && !w) {
    // Nothing at all: a single process, as DeepSpeed's MPI discovery finds outside mpirun.
    r = 0;
    w = 1;
  }
  if (!r)
    fail(fmt::format("WORLD_SIZE={} is set but RANK is missing", *w), env, options);
  if (!w)
    fail(fmt::format("RANK={} is set but WORLD_SIZE is missing", *r), env, options);
  if (*w < 1)
    fail(fmt::format("world size {} is not positive", *w), env, options);
  if (*r >= *w)
    fail(fmt::format("rank {} is not below the world size {}", *r, *w), env, options);
  out.rank = *r;
  out.worldSize = *w;
  out.localRank = lr.value_or(0);
  if (out.localRank >= out.worldSize)
    fail(fmt::format("LOCAL_RANK {} is not below the world size {}", out.localRank, out.worldSize),
         env, options);

  out.masterPort = masterPort.value_or(options.port);
  if (out.masterPort < 1 || out.masterPort > 65535)
    fail(fmt::format("master port {} is outside 1..65535", out.masterPort), env, options);
  if (masterAddr && !masterAddr->empty()) {
    out.masterAddr = *masterAddr;
  } else if (out.worldSize == 1 || singleNode) {
    out.masterAddr = "127.0.0.1";
  } else if (!out.initMethod.starts_with("tcp://") && !out.initMethod.starts_with("file://") &&
             !out.initMethod.starts_with(kRedisScheme)) {
    fail(out.source == EnvSource::Launcher
             ? std::string("MASTER_ADDR is missing for a job of several processes")
             : fmt::format("the {} spans several nodes and MASTER_ADDR is not set (pass the "
                           "address of rank 0's node, e.g. mpirun -x MASTER_ADDR=<host>)",
                           toString(out.source)),
         env, options);
  }
  if (out.initMethod.starts_with("tcp://")) {
    const HostPort hp = parseTcpInitMethod(out.initMethod);
    out.masterAddr = hp.host;
    out.masterPort = hp.port;
  }
  if (out.initMethod.starts_with(kRedisScheme)) {
    // The Redis server is the rendezvous point: messages name it, and a multi-node job's
    // transport binds to the interface that reaches it.
    const StoreInit redis = parseRedisInitMethod(out.initMethod);
    out.masterAddr = redis.host;
    out.masterPort = redis.port;
  }
  return out;
}

namespace {

std::mutex gDefaultMutex;
std::shared_ptr<ProcessGroup> gDefaultGroup;

bool isLoopback(const std::string& host) {
  return host == "localhost" || host.starts_with("127.") || host == "::1";
}

// The local address that routes to `master` (a connected UDP socket sends nothing), so that a
// multi-node job's transport binds to the interface its peers can reach.
std::string localAddressTowards(const std::string& master) {
  if (isLoopback(master))
    return "127.0.0.1";
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* result = nullptr;
  if (getaddrinfo(master.c_str(), "9", &hints, &result) != 0 || result == nullptr)
    return master;
  std::string out = master;
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd >= 0) {
    if (::connect(fd, result->ai_addr, result->ai_addrlen) == 0) {
      sockaddr_in local{};
      socklen_t len = sizeof(local);
      if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
        char text[INET_ADDRSTRLEN] = {};
        if (::inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text)) != nullptr)
          out = text;
      }
    }
    ::close(fd);
  }
  freeaddrinfo(result);
  return out;
}

// Every rank announces itself; the last one opens the gate. A rank that times out reports how
// many joined, which a bare transport timeout cannot.
void joinRendezvous(Store& store, const DistributedEnv& env) {
  const std::int64_t joined = store.add("init/joined", 1);
  if (joined == env.worldSize)
    store.set("init/complete", "1");
  try {
    store.wait({"init/complete"}, env.timeout);
  } catch (const StoreTimeoutError&) {
    const std::int64_t now = store.add("init/joined", 0);
    throw CommTimeoutError(fmt::format(
        "initDistributed: only {} of {} ranks joined the rendezvous at {}:{} within {} (this is "
        "rank {}); check that every rank was started with the same MASTER_ADDR, MASTER_PORT and "
        "WORLD_SIZE",
        now, env.worldSize, env.masterAddr, env.masterPort, formatDuration(env.timeout), env.rank));
  }
}

// The store of a redis:// init method. A store that already holds "init/complete" before this
// rank joined is left over from an earlier run under the same prefix (this run cannot have
// completed without this rank): joining it would pass a stale rendezvous, so it is an error.
std::shared_ptr<Store> redisStore(const DistributedEnv& env) {
  StoreInit init = parseRedisInitMethod(env.initMethod);
  init.rank = env.rank;
  init.worldSize = env.worldSize;
  init.timeout = env.timeout;
  auto store = createStore(
      "redis", init,
      "redis:// is registered by comm::registerBuiltinBackends() in builds with hiredis "
      "(STRETCH_WITH_REDIS, libhiredis-dev)");
  if (store->check({"init/complete"})) {
    throw DistributedInitError(ErrorDetail{
        "init_method", fmt::format("\"{}\"", env.initMethod),
        "a key prefix that no earlier run used (this one holds a completed rendezvous): give "
        "each run its own /PREFIX or delete the old keys"});
  }
  return store;
}

}  // namespace

namespace {
DeviceType deviceOf(const std::string& backend) {
  for (const BackendInfo& info : registeredBackends()) {
    if (info.name == backend)
      return info.device;
  }
  return DeviceType::Cpu;
}
}  // namespace

std::shared_ptr<ProcessGroup> buildGroup(const std::string& backend, std::shared_ptr<Store> store,
                                         int rank, int size, Duration timeout,
                                         const std::string& peerAddress, int localRank,
                                         const DeviceComm& device) {
  BackendInit init;
  init.store = store;
  init.rank = rank;
  init.size = size;
  init.timeout = timeout;
  init.groupName = "default";
  init.host = localAddressTowards(peerAddress);
  init.localRank = localRank;
  auto built = createBackend(backend, init);
  const DeviceType hostDevice = deviceOf(backend);
  auto group = std::make_shared<ProcessGroup>(rank, size);
  group->setBackend(hostDevice, built);
  bool shared = false;
  if (!device.backend.empty() && !device.identity.empty() && size > 1) {
    PrefixStore check("device_check", store);
    shared = anyDeviceShared(check, rank, size, device.identity, timeout);
    if (shared && !device.staging) {
      throw ConfigError(ErrorDetail{
          "device", device.identity,
          fmt::format("a device of this rank's own for {}: another rank of the group trains on "
                      "it too (several nodes on one machine?); {}=gloo stages through host memory",
                      device.backend, kCommBackendEnv)});
    }
    if (shared && rank == 0) {
      spdlog::info(
          "comm: ranks of different nodes share a device (several nodes on one "
          "machine), which {} refuses: gloo staged through pinned host memory instead",
          device.backend);
    }
  }
  if (!device.backend.empty() && !shared) {
    BackendInit deviceInit = init;
    deviceInit.store = std::make_shared<PrefixStore>("device", store);
    group->setBackend(deviceOf(device.backend), createBackend(device.backend, deviceInit));
  } else if (device.staging) {
    group->setBackend(device.staging->device(),
                      std::make_shared<StagedBackend>(std::move(built), device.staging));
  }
  return group;
}

std::shared_ptr<ProcessGroup> initDistributed(const InitOptions& options) {
  {
    std::lock_guard lock(gDefaultMutex);
    if (gDefaultGroup) {
      if ((options.rank >= 0 && options.rank != gDefaultGroup->rank()) ||
          (options.worldSize >= 0 && options.worldSize != gDefaultGroup->size())) {
        throw DistributedInitError(fmt::format(
            "initDistributed: the default group is already initialised as rank {} of {}, but "
            "rank {} of {} was requested",
            gDefaultGroup->rank(), gDefaultGroup->size(), options.rank, options.worldSize));
      }
      return gDefaultGroup;
    }
  }
  const DistributedEnv env = discoverEnvironment(options, processEnvironment());

  std::shared_ptr<Store> store;
  if (env.worldSize == 1) {
    store = std::make_shared<HashStore>(env.timeout);
  } else if (env.initMethod.starts_with("file://")) {
    store = std::make_shared<FileStore>(env.initMethod.substr(7), env.timeout);
  } else if (env.initMethod.starts_with(kRedisScheme)) {
    store = redisStore(env);
  } else {
    if (env.token.empty() && !isLoopback(env.masterAddr)) {
      spdlog::warn(
          "STRETCH_STORE_TOKEN is not set: the rendezvous store at {}:{} admits any "
          "client that can reach it; `stretch launch` sets a random token per job",
          env.masterAddr, env.masterPort);
    }
    TcpStoreOptions storeOptions;
    storeOptions.host = env.masterAddr;
    storeOptions.port = env.masterPort;
    storeOptions.isServer = env.rank == 0;
    storeOptions.token = env.token;
    storeOptions.timeout = env.timeout;
    store = std::make_shared<TcpStore>(storeOptions);
  }

  joinRendezvous(*store, env);

  auto group =
      buildGroup(options.backend, std::make_shared<PrefixStore>("default_pg", store), env.rank,
                 env.worldSize, env.timeout, env.masterAddr, env.localRank, options.device);
  group->setStore(store);

  std::lock_guard lock(gDefaultMutex);
  if (!gDefaultGroup)
    gDefaultGroup = group;
  return gDefaultGroup;
}

std::shared_ptr<ProcessGroup> defaultGroup() {
  std::lock_guard lock(gDefaultMutex);
  return gDefaultGroup;
}

bool isInitialized() {
  return defaultGroup() != nullptr;
}

void setDefaultGroup(std::shared_ptr<ProcessGroup> group) {
  std::lock_guard lock(gDefaultMutex);
  gDefaultGroup = std::move(group);
}

void destroyProcessGroup() {
  setDefaultGroup(nullptr);
}

}  // namespace stretch::comm
