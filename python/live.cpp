// stretch._stretch's live-recovery part (docs/python.md, "Live recovery for PyTorch"): what
// stretch.torch needs to speak the launcher's live-recovery protocol exactly as the C++ engine
// does (runtime/live/generation.hpp; the engine's side is runtime/engine/live_recovery.cpp):
//  - StoreClient: a client of Stretch's TcpStore (the agent's store, STRETCH_AGENT_STORE),
//    which stretch.torch bridges to torch.distributed.Store for ProcessGroupGloo;
//  - the generation record (LiveGeneration, parse/format), the protocol's keys, and the waits
//    the engine makes (for a newer generation; for a group's keys unless the generation is
//    superseded), in C++ and without the GIL.
// No second implementation of the protocol in Python: the record's text and the keys' names
// are runtime/live's.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/comm/errors.hpp"
#include "runtime/comm/tcp_store.hpp"
#include "runtime/common/error.hpp"
#include "runtime/common/worker_variables.hpp"
#include "runtime/config/ds_config.hpp"
#include "runtime/elasticity/runtime_batch.hpp"
#include "runtime/live/agent_store.hpp"
#include "runtime/live/generation.hpp"

namespace py = pybind11;

namespace stretch::python {

namespace {

// How often a wait for a group's keys looks for a newer generation (the engine's
// kSupersessionPoll), and how often a wait for a generation looks at live/latest.
constexpr auto kSupersessionPoll = std::chrono::milliseconds(20);
constexpr auto kGenerationPoll = std::chrono::milliseconds(2);

comm::Duration secondsToDuration(double seconds, const char* what) {
  if (!(seconds > 0) || seconds > 1e9) {
    throw ConfigError(
        ErrorDetail{what, fmt::format("{}", seconds), "a positive number of seconds"});
  }
  return std::chrono::duration_cast<comm::Duration>(std::chrono::duration<double>(seconds));
}

// A client of a Stretch TcpStore. Every call releases the GIL while it talks to the server;
// the store is safe to call from several threads (torch's Gloo threads call it through the
// bridge while the main thread looks at the protocol's keys).
class StoreClient {
 public:
  StoreClient(const std::string& host, int port, const std::string& token, double timeout,
              bool server) {
    if (port < (server ? 0 : 1) || port > 65535)
      throw ConfigError(ErrorDetail{"port", std::to_string(port), "a TCP port in [1, 65535]"});
    comm::TcpStoreOptions options;
    options.host = host;
    options.port = port;
    options.token = token;
    options.timeout = secondsToDuration(timeout, "timeout");
    options.isServer = server;
    const py::gil_scoped_release release;
    store_ = std::make_shared<comm::TcpStore>(options);
  }

  comm::Store& store() const { return *store_; }
  const std::string& host() const { return store_->host(); }
  int port() const { return store_->port(); }

 private:
  std::shared_ptr<comm::TcpStore> store_;
};

// The client STRETCH_AGENT_STORE and STRETCH_STORE_TOKEN name (as LiveRecovery::fromEnvironment
// reads them), or None when the variable is unset or empty: no live-capable launcher.
py::object agentStoreFromEnvironment(double timeout) {
  const std::optional<comm::TcpStoreOptions> found = live::agentStoreFromEnvironment();
  if (!found)
    return py::none();
  return py::cast(
      std::make_unique<StoreClient>(found->host, found->port, found->token, timeout, false));
}

// "finished" once the job finished (live/finished), "superseded" once a generation newer than
// `generation` was published, else "".
std::string supersession(comm::Store& root, std::uint64_t generation) {
  if (root.check({live::live_keys::kFinished}))
    return "finished";
  if (live::latestLiveGeneration(root) > generation)
    return "superseded";
  return "";
}

// Waits for `keys` under `prefix` (a generation's group store) as the engine's
// SupersedableStore does: "ready" when they all exist, "superseded" or "finished" as soon as the
// generation is no longer current; StoreTimeoutError after `timeout` seconds.
std::string waitUnlessSuperseded(const StoreClient& client, const std::vector<std::string>& keys,
                                 std::uint64_t generation, double timeout) {
  const auto limit = secondsToDuration(timeout, "timeout");
  const py::gil_scoped_release release;
  comm::Store& store = client.store();
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    const auto left = deadline - std::chrono::steady_clock::now();
    try {
      store.wait(keys,
                 std::max<comm::Duration>(
                     comm::Duration(1'000'000),
                     std::min<comm::Duration>(std::chrono::duration_cast<comm::Duration>(left),
                                              kSupersessionPoll)));
      return "ready";
    } catch (const comm::StoreTimeoutError&) {
      if (auto why = supersession(store, generation); !why.empty())
        return why;
      if (std::chrono::steady_clock::now() >= deadline) {
        std::vector<std::string> missing;
        for (const auto& key : keys) {
          if (!store.check({key}))
            missing.push_back(key);
        }
        throw comm::StoreTimeoutError(
            fmt::format("live generation {}'s store: keys [{}] did not appear within {:.1f} s",
                        generation, fmt::join(missing, ", "), timeout));
      }
    }
  }
}

// The engine's LiveRecovery::waitForGeneration: the first record newer than `after`; None when
// the job finished meanwhile; CommTimeoutError after `timeout` seconds (STRETCH_LIVE_TIMEOUT).
std::optional<live::LiveGeneration> waitForGeneration(const StoreClient& client,
                                                      std::uint64_t after, double timeout,
                                                      const std::string& who) {
  const auto limit = secondsToDuration(timeout, "timeout");
  const py::gil_scoped_release release;
  comm::Store& store = client.store();
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    if (store.check({live::live_keys::kFinished}))
      return std::nullopt;
    const auto latest = live::latestLiveGeneration(store);
    if (latest > after)
      return live::parseLiveGeneration(store.get(live::live_keys::generation(latest)));
    if (std::chrono::steady_clock::now() > deadline) {
      throw comm::CommTimeoutError(
          fmt::format("live recovery: {} waited {:.0f} s for a generation after {}; none came "
                      "(STRETCH_LIVE_TIMEOUT)",
                      who, timeout, after));
    }
    std::this_thread::sleep_for(kGenerationPoll);
  }
}

// The batch a worker trains with in a live generation of `worldSize` ranks, as Engine::rejoin
// resolves it: its own config's (the elastic solver's for that size), the record's batch (the
// launcher's) only checked against it; the start's batch variables have no say. A triple
// (train, micro, accumulation).
std::tuple<std::int64_t, std::int64_t, std::int64_t> liveBatch(
    const std::string& configText, const std::string& source, std::int64_t worldSize,
    const std::optional<live::LiveGeneration>& record) {
  if (worldSize < 1) {
    throw ConfigError(
        ErrorDetail{"world_size", std::to_string(worldSize), "a positive number of ranks"});
  }
  const py::gil_scoped_release release;
  const config::ParsedConfig parsed = config::parseConfig(configText, source);
  elasticity::ElasticEnvironment env = elasticity::ElasticEnvironment::fromProcess();
  env.worldSize = std::to_string(worldSize);
  env.launcherBatch.reset();
  if (record && record->trainBatchSize > 0) {
    config::BatchTriple batch;
    batch.trainBatchSize = record->trainBatchSize;
    batch.microBatchPerGpu = record->microBatch;
    batch.gradientAccumulation = record->gradientAccumulation;
    env.launcherBatch = batch;
    env.launcherBatchName = "the live generation's train_batch_size";
  }
  const auto triple = elasticity::resolveTrainingBatch(parsed.config, worldSize, env).triple;
  return {triple.trainBatchSize, triple.microBatchPerGpu, triple.gradientAccumulation};
}

py::list nodesOf(const std::vector<live::LiveNode>& nodes) {
  py::list out;
  for (const auto& n : nodes)
    out.append(py::make_tuple(n.nodeId, n.firstRank, n.localRanks));
  return out;
}

std::vector<std::pair<std::string, std::int64_t>> placesOf(const py::iterable& items) {
  std::vector<std::pair<std::string, std::int64_t>> out;
  for (const auto& item : items)
    out.push_back(item.cast<std::pair<std::string, std::int64_t>>());
  return out;
}

}  // namespace

void registerLive(py::module_& m) {
  py::class_<StoreClient>(m, "StoreClient",
                          "A client of a Stretch TcpStore (the launcher's agent store). Values "
                          "are bytes; blocking calls release the GIL.")
      .def(py::init<const std::string&, int, const std::string&, double, bool>(), py::arg("host"),
           py::arg("port"), py::arg("token") = "", py::arg("timeout") = 30.0,
           py::arg("server") = false,
           "Connects to HOST:PORT; with server=True, first serves a store there in this process "
           "(port 0: a free one, see .port), as the launcher's agent does.")
      .def_static("from_environment", &agentStoreFromEnvironment, py::arg("timeout") = 30.0,
                  "The agent's store named by STRETCH_AGENT_STORE (and STRETCH_STORE_TOKEN), or "
                  "None when it is unset.")
      .def_property_readonly("host", &StoreClient::host)
      .def_property_readonly("port", &StoreClient::port)
      .def(
          "set",
          [](const StoreClient& c, const std::string& key, const py::bytes& value) {
            std::string v = value;
            const py::gil_scoped_release release;
            c.store().set(key, v);
          },
          py::arg("key"), py::arg("value"))
      .def(
          "get",
          [](const StoreClient& c, const std::string& key) {
            std::string v;
            {
              const py::gil_scoped_release release;
              v = c.store().get(key);
            }
            return py::bytes(v);
          },
          py::arg("key"))
      .def(
          "add",
          [](const StoreClient& c, const std::string& key, std::int64_t delta) {
            const py::gil_scoped_release release;
            return c.store().add(key, delta);
          },
          py::arg("key"), py::arg("delta"))
      .def(
          "compare_set",
          [](const StoreClient& c, const std::string& key, const py::bytes& expected,
             const py::bytes& desired) {
            std::string e = expected;
            std::string d = desired;
            std::string v;
            {
              const py::gil_scoped_release release;
              v = c.store().compareSet(key, e, d);
            }
            return py::bytes(v);
          },
          py::arg("key"), py::arg("expected"), py::arg("desired"))
      .def(
          "check",
          [](const StoreClient& c, const std::vector<std::string>& keys) {
            const py::gil_scoped_release release;
            return c.store().check(keys);
          },
          py::arg("keys"))
      .def(
          "wait",
          [](const StoreClient& c, const std::vector<std::string>& keys,
             std::optional<double> timeout) {
            std::optional<comm::Duration> limit;
            if (timeout)
              limit = secondsToDuration(*timeout, "timeout");
            const py::gil_scoped_release release;
            c.store().wait(keys, limit);
          },
          py::arg("keys"), py::arg("timeout") = py::none(),
          "Blocks until every key exists; StoreTimeoutError after `timeout` seconds (default: "
          "the client's).")
      .def(
          "delete_key",
          [](const StoreClient& c, const std::string& key) {
            const py::gil_scoped_release release;
            return c.store().deleteKey(key);
          },
          py::arg("key"))
      .def("num_keys", [](const StoreClient& c) {
        const py::gil_scoped_release release;
        return c.store().numKeys();
      });

  py::class_<live::LiveGeneration>(m, "LiveGeneration",
                                   "A live generation record (runtime/live/generation.hpp).")
      .def_readonly("generation", &live::LiveGeneration::generation)
      .def_readonly("agent_generation", &live::LiveGeneration::agentGeneration)
      .def_readonly("world_size", &live::LiveGeneration::worldSize)
      .def_readonly("train_batch_size", &live::LiveGeneration::trainBatchSize)
      .def_readonly("micro_batch", &live::LiveGeneration::microBatch)
      .def_readonly("gradient_accumulation", &live::LiveGeneration::gradientAccumulation)
      .def_property_readonly("nodes",
                             [](const live::LiveGeneration& g) { return nodesOf(g.nodes); })
      .def_property_readonly("donors",
                             [](const live::LiveGeneration& g) { return nodesOf(g.donors); })
      .def("rank_of", &live::LiveGeneration::rankOf, py::arg("node_id"), py::arg("local_rank"))
      .def("transfer_rank_of", &live::LiveGeneration::transferRankOf, py::arg("node_id"),
           py::arg("local_rank"))
      .def("transfer_size", &live::LiveGeneration::transferSize)
      .def("__eq__",
           [](const live::LiveGeneration& a, const live::LiveGeneration& b) { return a == b; })
      .def("__repr__", [](const live::LiveGeneration& g) {
        return fmt::format("<LiveGeneration {} of {} rank(s)>", g.generation, g.worldSize);
      });

  m.def("parse_live_generation", &live::parseLiveGeneration, py::arg("text"),
        "A live generation record from its text; CommError naming the line when malformed.");
  m.def("format_live_generation", &live::formatLiveGeneration, py::arg("record"));
  m.def(
      "make_live_generation",
      [](std::uint64_t generation, std::uint64_t agentGeneration, const py::iterable& members,
         std::int64_t train, std::int64_t micro, std::int64_t accumulation,
         const py::iterable& donors) {
        return live::makeLiveGeneration(generation, agentGeneration, placesOf(members), train,
                                        micro, accumulation, placesOf(donors));
      },
      py::arg("generation"), py::arg("agent_generation"), py::arg("members"),
      py::arg("train_batch_size"), py::arg("micro_batch"), py::arg("gradient_accumulation"),
      py::arg("donors") = py::list(),
      "The record of `generation` whose members are (node id, local rank) pairs in rank order.");
  m.def(
      "publish_live_generation",
      [](const StoreClient& c, const live::LiveGeneration& record) {
        const py::gil_scoped_release release;
        live::publishLiveGeneration(c.store(), record);
      },
      py::arg("store"), py::arg("record"),
      "Writes the record, then live/latest (the agent's part).");
  m.def(
      "latest_live_generation",
      [](const StoreClient& c) {
        const py::gil_scoped_release release;
        return live::latestLiveGeneration(c.store());
      },
      py::arg("store"));
  m.def(
      "live_capability",
      [](const StoreClient& c, const std::string& nodeId, std::int64_t pid) {
        live::LiveCapability capability;
        {
          const py::gil_scoped_release release;
          capability = live::liveCapability(c.store(), nodeId, pid);
        }
        switch (capability) {
          case live::LiveCapability::Capable:
            return "capable";
          case live::LiveCapability::CapableWithCopies:
            return "copies";
          case live::LiveCapability::None:
            break;
        }
        return "none";
      },
      py::arg("store"), py::arg("node_id"), py::arg("pid"),
      "What the worker said through its live/capable key: 'none', 'capable' or 'copies'.");
  m.def("live_batch", &liveBatch, py::arg("config_text"), py::arg("source"), py::arg("world_size"),
        py::arg("record") = py::none(),
        "(train, micro, accumulation) for a live generation of world_size ranks: the elastic "
        "solver's for the config, the record's batch checked against it (as the engine's "
        "rejoin).");
  m.def("wait_for_generation", &waitForGeneration, py::arg("store"), py::arg("after"),
        py::arg("timeout"), py::arg("who"),
        "The first generation record newer than `after`, or None once the job finished.");
  m.def("wait_unless_superseded", &waitUnlessSuperseded, py::arg("store"), py::arg("keys"),
        py::arg("generation"), py::arg("timeout"),
        "'ready', 'superseded' or 'finished' (the engine's SupersedableStore wait).");
  m.def(
      "supersession",
      [](const StoreClient& c, std::uint64_t generation) {
        const py::gil_scoped_release release;
        return supersession(c.store(), generation);
      },
      py::arg("store"), py::arg("generation"),
      "'finished', 'superseded' (a newer generation was published) or ''.");

  py::module_ keys = m.def_submodule("live_keys", "The live-recovery protocol's store keys.");
  keys.def("generation", &live::live_keys::generation, py::arg("n"));
  keys.def("capable", &live::live_keys::capable, py::arg("node_id"), py::arg("pid"));
  m.def("worker_process_id", &live::workerProcessId,
        "The pid the agent knows this worker by (its process group's id; the same behind a "
        "`sh -c` wrapper): the one to put in its live/capable key.");
  keys.def("ready", &live::live_keys::ready, py::arg("n"));
  keys.def("group_prefix", &live::live_keys::groupPrefix, py::arg("n"));
  keys.def("transfer_prefix", &live::live_keys::transferPrefix, py::arg("n"));
  keys.def("donated", &live::live_keys::donated, py::arg("n"));
  keys.attr("LATEST") = std::string(live::live_keys::kLatest);
  keys.attr("FINISHED") = std::string(live::live_keys::kFinished);
  keys.attr("CAPABLE_WITH_COPIES") = std::string(live::live_keys::kCapableWithCopies);
}

}  // namespace stretch::python
