// initDistributed: discovery from the launcher's, OpenMPI's and PMI's variables, clear errors
// listing what was found, timeouts, init methods, and reuse of an existing default group.

#include "runtime/comm/init_distributed.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/comm/backend_choice.hpp"
#include "runtime/comm/backend_registry.hpp"
#include "runtime/comm/errors.hpp"
#include "runtime/comm/in_process_backend.hpp"
#include "runtime/comm/staged_backend.hpp"
#include "runtime/comm/store.hpp"
#include "runtime/comm/store_registry.hpp"

namespace stretch::comm {
namespace {

using namespace std::chrono_literals;

std::string errorOf(const InitOptions& options, const Environment& env) {
  try {
    discoverEnvironment(options, env);
  } catch (const DistributedInitError& e) {
    return e.what();
  }
  return "";
}

TEST(DiscoverEnvironment, ReadsTheLaunchersVariables) {
  const Environment env = {{"RANK", "3"},
                           {"WORLD_SIZE", "8"},
                           {"LOCAL_RANK", "1"},
                           {"MASTER_ADDR", "10.0.0.5"},
                           {"MASTER_PORT", "29611"},
                           {"STRETCH_STORE_TOKEN", "abc"}};
  const DistributedEnv d = discoverEnvironment({}, env);
  EXPECT_EQ(d.rank, 3);
  EXPECT_EQ(d.worldSize, 8);
  EXPECT_EQ(d.localRank, 1);
  EXPECT_EQ(d.masterAddr, "10.0.0.5");
  EXPECT_EQ(d.masterPort, 29611);
  EXPECT_EQ(d.token, "abc");
  EXPECT_EQ(d.source, EnvSource::Launcher);
  EXPECT_EQ(d.timeout, std::chrono::minutes(10));
  EXPECT_EQ(d.initMethod, "env://");
}

TEST(DiscoverEnvironment, NothingSetMeansOneProcessOnLoopback) {
  const DistributedEnv d = discoverEnvironment({}, {});
  EXPECT_EQ(d.rank, 0);
  EXPECT_EQ(d.worldSize, 1);
  EXPECT_EQ(d.localRank, 0);
  EXPECT_EQ(d.masterAddr, "127.0.0.1");
  EXPECT_EQ(d.masterPort, 29500);
}

TEST(DiscoverEnvironment, DerivesEverythingFromOpenMpiOnOneNode) {
  const Environment env = {{"OMPI_COMM_WORLD_RANK", "2"},
                           {"OMPI_COMM_WORLD_SIZE", "4"},
                           {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                           {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}};
  InitOptions options;
  options.port = 29777;
  const DistributedEnv d = discoverEnvironment(options, env);
  EXPECT_EQ(d.source, EnvSource::OpenMpi);
  EXPECT_EQ(d.rank, 2);
  EXPECT_EQ(d.worldSize, 4);
  EXPECT_EQ(d.localRank, 2);
  EXPECT_EQ(d.masterAddr, "127.0.0.1");
  EXPECT_EQ(d.masterPort, 29777);
}

TEST(DiscoverEnvironment, OpenMpiAcrossNodesNeedsTheMastersAddress) {
  Environment env = {{"OMPI_COMM_WORLD_RANK", "5"},
                     {"OMPI_COMM_WORLD_SIZE", "16"},
                     {"OMPI_COMM_WORLD_LOCAL_RANK", "5"},
                     {"OMPI_COMM_WORLD_LOCAL_SIZE", "8"}};
  const std::string message = errorOf({}, env);
  EXPECT_NE(message.find("several nodes"), std::string::npos) << message;
  EXPECT_NE(message.find("OMPI_COMM_WORLD_SIZE=16"), std::string::npos) << message;
  env["MASTER_ADDR"] = "node0";
  const DistributedEnv d = discoverEnvironment({}, env);
  EXPECT_EQ(d.masterAddr, "node0");
  EXPECT_EQ(d.rank, 5);
}

TEST(DiscoverEnvironment, ReadsPmiWhenOpenMpiIsAbsent) {
  const Environment env = {
      {"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "2"}};
  const DistributedEnv d = discoverEnvironment({}, env);
  EXPECT_EQ(d.source, EnvSource::Pmi);
  EXPECT_EQ(d.rank, 1);
  EXPECT_EQ(d.worldSize, 2);
  EXPECT_EQ(d.localRank, 1);
}

TEST(DiscoverEnvironment, MpiDiscoveryCanBeSwitchedOff) {
  const Environment env = {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}};
  InitOptions options;
  options.autoMpiDiscovery = false;
  const DistributedEnv d = discoverEnvironment(options, env);
  EXPECT_EQ(d.worldSize, 1);  // the launcher variables say nothing: one process
}

TEST(DiscoverEnvironment, MissingVariablesAreListedWithEverythingFound) {
  const std::string message = errorOf({}, {{"RANK", "1"}, {"MASTER_PORT", "1234"}});
  EXPECT_NE(message.find("WORLD_SIZE is missing"), std::string::npos) << message;
  EXPECT_NE(message.find("RANK=1"), std::string::npos) << message;
  EXPECT_NE(message.find("MASTER_PORT=1234"), std::string::npos) << message;
  EXPECT_NE(message.find("OMPI_COMM_WORLD_RANK"), std::string::npos) << message;  // the hint

  EXPECT_NE(errorOf({}, {{"WORLD_SIZE", "2"}}).find("RANK is missing"), std::string::npos);
  EXPECT_NE(errorOf({}, {{"RANK", "0"}, {"WORLD_SIZE", "2"}}).find("MASTER_ADDR is missing"),
            std::string::npos);
}

TEST(DiscoverEnvironment, ContradictionsAreErrors) {
  EXPECT_NE(errorOf({}, {{"RANK", "4"}, {"WORLD_SIZE", "4"}}).find("not below the world size"),
            std::string::npos);
  EXPECT_NE(errorOf({}, {{"RANK", "x"}, {"WORLD_SIZE", "4"}}).find("RANK = \"x\""),
            std::string::npos);
  EXPECT_NE(errorOf({}, {{"RANK", "0"}, {"WORLD_SIZE", "0"}}).find("WORLD_SIZE = \"0\""),
            std::string::npos);
  EXPECT_NE(errorOf({}, {{"RANK", "1"},
                         {"WORLD_SIZE", "2"},
                         {"OMPI_COMM_WORLD_RANK", "0"},
                         {"OMPI_COMM_WORLD_SIZE", "2"}})
                .find("contradicts the MPI rank 0"),
            std::string::npos);
  InitOptions options;
  options.rank = 1;
  EXPECT_NE(errorOf(options, {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}})
                .find("contradicts RANK=0"),
            std::string::npos);
  EXPECT_NE(
      errorOf({},
              {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}})
          .find("MASTER_PORT"),
      std::string::npos);
}

TEST(DiscoverEnvironment, ArgumentsAloneAreEnough) {
  InitOptions options;
  options.rank = 1;
  options.worldSize = 2;
  options.initMethod = "tcp://127.0.0.1:23456";
  const DistributedEnv d = discoverEnvironment(options, {});
  EXPECT_EQ(d.source, EnvSource::Arguments);
  EXPECT_EQ(d.rank, 1);
  EXPECT_EQ(d.masterAddr, "127.0.0.1");
  EXPECT_EQ(d.masterPort, 23456);
}

TEST(DiscoverEnvironment, InitMethodsAreValidated) {
  InitOptions options;
  for (const char* bad : {"tcp://host", "tcp://host:0", "tcp://:80", "http://x", "file://"}) {
    options.initMethod = bad;
    try {
      discoverEnvironment(options, {});
      ADD_FAILURE() << "accepted " << bad;
    } catch (const DistributedInitError& e) {
      EXPECT_NE(std::string(e.what()).find("init_method"), std::string::npos) << e.what();
    }
  }
  options.initMethod = "file:///tmp/x";
  EXPECT_EQ(discoverEnvironment(options, {}).initMethod, "file:///tmp/x");
}

TEST(DiscoverEnvironment, RedisUrlsMakeTheRedisServerTheRendezvousPoint) {
  InitOptions options;
  options.rank = 1;
  options.worldSize = 4;  // several processes, and no MASTER_ADDR needed
  options.initMethod = "redis://10.0.0.7:6380/job42";
  const DistributedEnv d = discoverEnvironment(options, {});
  EXPECT_EQ(d.initMethod, "redis://10.0.0.7:6380/job42");
  EXPECT_EQ(d.masterAddr, "10.0.0.7");
  EXPECT_EQ(d.masterPort, 6380);
  options.initMethod = "redis://[::1]:6379";
  EXPECT_EQ(discoverEnvironment(options, {}).masterAddr, "::1");
  for (const char* bad : {"redis://host", "redis://:6379", "redis://host:0/x", "redis://"}) {
    options.initMethod = bad;
    const std::string error = errorOf(options, {});
    EXPECT_NE(error.find(std::string("init_method = \"") + bad), std::string::npos) << error;
    EXPECT_NE(error.find("redis://HOST:PORT[/PREFIX]"), std::string::npos) << error;
  }
}

TEST(DiscoverEnvironment, TimeoutComesFromStretchOrDeepSpeedMinutes) {
  EXPECT_EQ(discoverEnvironment({}, {{"DEEPSPEED_TIMEOUT", "3"}}).timeout, std::chrono::minutes(3));
  EXPECT_EQ(discoverEnvironment({}, {{"DEEPSPEED_TIMEOUT", "3"}, {"STRETCH_TIMEOUT", "7"}}).timeout,
            std::chrono::minutes(7));
  InitOptions options;
  options.timeout = 1500ms;
  EXPECT_EQ(discoverEnvironment(options, {{"STRETCH_TIMEOUT", "7"}}).timeout, 1500ms);
  try {
    discoverEnvironment({}, {{"STRETCH_TIMEOUT", "ten"}});
    FAIL();
  } catch (const DistributedInitError& e) {
    EXPECT_NE(std::string(e.what()).find("STRETCH_TIMEOUT = \"ten\""), std::string::npos);
  }
}

class InitDistributed : public ::testing::Test {
 protected:
  void SetUp() override {
    destroyProcessGroup();
    registerBackend({"in_process_test", DeviceType::Cpu, "threads (tests)"},
                    [](const BackendInit& init) {
                      auto world = std::make_shared<InProcessWorld>(init.size, init.timeout);
                      return world->backend(init.rank);
                    });
  }
  void TearDown() override { destroyProcessGroup(); }
};

TEST_F(InitDistributed, BuildsAOneProcessGroupAndReusesIt) {
  InitOptions options;
  options.backend = "in_process_test";
  options.rank = 0;
  options.worldSize = 1;
  auto group = initDistributed(options);
  ASSERT_NE(group, nullptr);
  EXPECT_TRUE(isInitialized());
  EXPECT_EQ(group->size(), 1);
  EXPECT_EQ(group->backend(DeviceType::Cpu).name(), "in_process");
  EXPECT_NE(group->store(), nullptr);
  EXPECT_EQ(initDistributed(options), group);  // reused

  options.worldSize = 2;
  EXPECT_THROW(initDistributed(options), DistributedInitError);
  destroyProcessGroup();
  EXPECT_FALSE(isInitialized());
}

TEST_F(InitDistributed, ReusesAGroupInstalledByTheApplication) {
  InProcessWorld world(1);
  auto mine = std::make_shared<ProcessGroup>(0, 1);
  mine->setBackend(DeviceType::Cpu, world.backend(0));
  setDefaultGroup(mine);
  EXPECT_EQ(initDistributed({}), mine);
}

TEST_F(InitDistributed, UnknownBackendListsTheBuiltOnes) {
  InitOptions options;
  options.backend = "mpi";
  options.rank = 0;
  options.worldSize = 1;
  try {
    initDistributed(options);
    FAIL();
  } catch (const DistributedInitError& e) {
    EXPECT_NE(std::string(e.what()).find("backend = \"mpi\""), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("in_process_test"), std::string::npos) << e.what();
  }
}

// This test links no store module: redis:// must say what is missing instead of connecting.
TEST_F(InitDistributed, RedisWithoutRedisSupportNamesTheUrl) {
  ASSERT_FALSE(isStoreSchemeRegistered("redis"));
  InitOptions options;
  options.backend = "in_process_test";
  options.rank = 0;
  options.worldSize = 2;
  options.timeout = 1s;
  options.initMethod = "redis://127.0.0.1:6379/job";
  try {
    initDistributed(options);
    FAIL() << "redis:// worked without RedisStore";
  } catch (const DistributedInitError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("init_method = \"redis://127.0.0.1:6379/job\""), std::string::npos)
        << message;
    EXPECT_NE(message.find("hiredis"), std::string::npos) << message;
  }
  EXPECT_FALSE(isInitialized());
}

// A port nobody listens on: bind one, note it, close it.
int unusedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

TEST_F(InitDistributed, AWrongMasterPortIsAClearErrorWithinTheTimeout) {
  const int port = unusedPort();
  InitOptions options;
  options.backend = "in_process_test";
  options.rank = 1;
  options.worldSize = 2;
  options.timeout = 1500ms;
  options.initMethod = "tcp://127.0.0.1:" + std::to_string(port);
  const auto start = std::chrono::steady_clock::now();
  try {
    initDistributed(options);
    FAIL() << "connected to a port nobody listens on";
  } catch (const StoreError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << message;
    EXPECT_NE(message.find("MASTER_PORT"), std::string::npos) << message;
  }
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, 1s);
  EXPECT_LT(waited, 10s);
  EXPECT_FALSE(isInitialized());
}

}  // namespace
}  // namespace stretch::comm

// Several "nodes" on one machine (stretch launch --launcher local) each see one device of their
// own and share it: buildGroup asks the ranks for their devices' identities before building
// the device backend, and stages through host memory instead when two ranks name one device.
namespace stretch::comm::shared_device {

class NullStaging final : public DeviceStaging {
 public:
  DeviceType device() const noexcept override { return DeviceType::Cuda; }
  void* allocateHost(std::size_t bytes) override { return std::malloc(bytes); }
  void freeHost(void* host, std::size_t) noexcept override { std::free(host); }
  void toHost(void*, const BufferView&) override {}
  void toDevice(const BufferView&, const void*) override {}
};

struct Built {
  std::vector<std::shared_ptr<ProcessGroup>> groups;
  std::vector<std::string> errors;
  int deviceBackendsMade = 0;
};

// Two ranks on threads, one store, a host backend of in-process ranks and a stand-in device
// backend that counts how often it is made.
Built buildTwo(const std::vector<std::string>& identities, bool withStaging) {
  auto hostWorld = std::make_shared<InProcessWorld>(2, 5s);
  auto deviceWorld = std::make_shared<InProcessWorld>(2, 5s);
  auto made = std::make_shared<std::atomic<int>>(0);
  registerBackend({"host_test", DeviceType::Cpu, "threads (tests)"},
                  [hostWorld](const BackendInit& init) { return hostWorld->backend(init.rank); });
  registerBackend({"device_test", DeviceType::Cuda, "stand-in device backend (tests)"},
                  [deviceWorld, made](const BackendInit& init) {
                    ++*made;
                    return deviceWorld->backend(init.rank);
                  });
  auto store = std::make_shared<HashStore>(5s);
  Built built;
  built.groups.resize(2);
  built.errors.resize(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      DeviceComm device;
      device.backend = "device_test";
      device.identity = identities[static_cast<std::size_t>(r)];
      if (withStaging)
        device.staging = std::make_shared<NullStaging>();
      try {
        built.groups[static_cast<std::size_t>(r)] =
            buildGroup("host_test", std::make_shared<PrefixStore>("g1", store), r, 2, 5s,
                       "127.0.0.1", 0, device);
      } catch (const std::exception& e) {
        built.errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : ranks)
    t.join();
  built.deviceBackendsMade = *made;
  return built;
}

TEST(SharedDevice, RanksOnDevicesOfTheirOwnGetTheDeviceBackend) {
  const Built built = buildTwo({"GPU-aaaa", "GPU-bbbb"}, /*withStaging=*/true);
  EXPECT_EQ(built.deviceBackendsMade, 2);
  for (int r = 0; r < 2; ++r) {
    ASSERT_NE(built.groups[static_cast<std::size_t>(r)], nullptr) << built.errors[r];
    EXPECT_EQ(built.groups[static_cast<std::size_t>(r)]->backend(DeviceType::Cuda).name(),
              "in_process");
  }
}

TEST(SharedDevice, RanksSharingADeviceStageInsteadOnEveryRank) {
  const Built built = buildTwo({"GPU-aaaa", "GPU-aaaa"}, /*withStaging=*/true);
  EXPECT_EQ(built.deviceBackendsMade, 0);
  for (int r = 0; r < 2; ++r) {
    ASSERT_NE(built.groups[static_cast<std::size_t>(r)], nullptr) << built.errors[r];
    EXPECT_EQ(built.groups[static_cast<std::size_t>(r)]->backend(DeviceType::Cuda).name(),
              "in_process staged");
  }
}

TEST(SharedDevice, WithoutStagingASharedDeviceIsAConfigErrorNamingIt) {
  const Built built = buildTwo({"GPU-aaaa", "GPU-aaaa"}, /*withStaging=*/false);
  EXPECT_EQ(built.deviceBackendsMade, 0);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(built.groups[static_cast<std::size_t>(r)], nullptr);
    EXPECT_NE(built.errors[static_cast<std::size_t>(r)].find("device = GPU-aaaa"),
              std::string::npos)
        << built.errors[r];
    EXPECT_NE(built.errors[static_cast<std::size_t>(r)].find("STRETCH_COMM_BACKEND=gloo"),
              std::string::npos)
        << built.errors[r];
  }
}

// The check itself: every rank gets the same answer, in three requests and one wait each.
TEST(SharedDevice, EveryRankOfALargerGroupGetsTheSameAnswer) {
  for (const bool duplicate : {false, true}) {
    HashStore store(5s);
    constexpr int kRanks = 16;
    std::vector<int> answers(kRanks, -1);
    std::vector<std::thread> ranks;
    for (int r = 0; r < kRanks; ++r) {
      ranks.emplace_back([&, r] {
        // With `duplicate`, the last rank names the first one's device.
        const int device = duplicate && r == kRanks - 1 ? 0 : r;
        answers[static_cast<std::size_t>(r)] =
            anyDeviceShared(store, r, kRanks, "GPU-" + std::to_string(device), 5s) ? 1 : 0;
      });
    }
    for (auto& t : ranks)
      t.join();
    EXPECT_EQ(answers, std::vector<int>(kRanks, duplicate ? 1 : 0)) << "duplicate " << duplicate;
  }
  HashStore alone(5s);
  EXPECT_FALSE(anyDeviceShared(alone, 0, 1, "GPU-0", 5s));
  EXPECT_EQ(alone.numKeys(), 0);  // a group of one asks nothing
  HashStore missing(5s);
  EXPECT_THROW(anyDeviceShared(missing, 0, 2, "GPU-0", 100ms), StoreTimeoutError);
}

}  // namespace stretch::comm::shared_device
