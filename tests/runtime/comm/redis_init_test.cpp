// initDistributed("redis://HOST:PORT/PREFIX") the way a user reaches it: registerBuiltinBackends()
// then initDistributed, in forked ranks, against a private redis-server on loopback (skipped when
// redis-server is not installed). The ranks rendezvous through Redis, run an all_reduce over Gloo
// when it was built, and exchange keys through the group's store; the keys are then read back
// from Redis under the prefix. A second run on the same prefix is a clear error.

#include <chrono>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/comm/backend_registry.hpp"
#include "runtime/comm/builtin/builtin_backends.hpp"
#include "runtime/comm/errors.hpp"
#include "runtime/comm/in_process_backend.hpp"
#include "runtime/comm/init_distributed.hpp"
#include "runtime/comm/redis/redis_store.hpp"
#include "runtime/comm/store_registry.hpp"
#include "tests/runtime/comm/redis_server.hpp"
#include "tests/runtime/comm/store_test_util.hpp"

namespace stretch::comm {
namespace {

using namespace std::chrono_literals;
using test::Children;
using test::RedisServer;

// Child exit codes.
constexpr int kOk = 0;
constexpr int kWrongResult = 3;
constexpr int kFailed = 4;

// Gloo when this build has it; otherwise a backend that needs no peer at construction, so the
// test still covers the store path.
std::string backendForTest() {
  registerBuiltinBackends();
  if (isBackendRegistered("gloo"))
    return "gloo";
  registerBackend({"in_process_test", DeviceType::Cpu, "threads (tests)"},
                  [](const BackendInit& init) {
                    auto world = std::make_shared<InProcessWorld>(init.size, init.timeout);
                    return world->backend(init.rank);
                  });
  return "in_process_test";
}

void clearLauncherEnvironment() {
  for (const char* name :
       {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "STRETCH_TIMEOUT", "DEEPSPEED_TIMEOUT",
        "STRETCH_STORE_TOKEN", "STRETCH_REDIS_PASSWORD"}) {
    ::unsetenv(name);
  }
}

InitOptions optionsFor(const std::string& url, int rank, int worldSize, Duration timeout) {
  InitOptions options;
  options.backend = backendForTest();
  options.initMethod = url;
  options.rank = rank;
  options.worldSize = worldSize;
  options.timeout = timeout;
  return options;
}

// In a child: joins the job over Redis, all-reduces (Gloo) and swaps a key with the peer.
int rankOverRedis(const std::string& url, int rank, int worldSize) {
  clearLauncherEnvironment();
  const InitOptions options = optionsFor(url, rank, worldSize, 30s);
  try {
    auto group = initDistributed(options);
    if (options.backend == "gloo") {
      std::vector<double> v(1000, static_cast<double>(rank + 1));
      group->allReduce(BufferView::of(std::span(v)), ReduceOp::Sum)->wait();
      const double expected = worldSize * (worldSize + 1) / 2.0;
      for (const double x : v) {
        if (x != expected)
          return kWrongResult;
      }
    }
    group->store()->set("hello/" + std::to_string(rank), "from " + std::to_string(rank));
    const int peer = (rank + 1) % worldSize;
    if (group->store()->get("hello/" + std::to_string(peer)) != "from " + std::to_string(peer))
      return kWrongResult;
    return kOk;
  } catch (...) {
    return kFailed;
  }
}

std::vector<int> runJob(const std::string& url, int worldSize) {
  Children children;
  for (int r = 0; r < worldSize; ++r)
    children.spawn([&, r] { ::_exit(rankOverRedis(url, r, worldSize)); });
  return children.join(90s);
}

// A private redis-server per test; skips when none is installed.
class RedisInitMethod : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!server_.running())
      GTEST_SKIP() << "redis-server not found (PATH or STRETCH_REDIS_SERVER) " << server_.error();
  }
  std::string url(const std::string& prefix) const {
    return fmt::format("redis://127.0.0.1:{}/{}", server_.port(), prefix);
  }

  RedisServer server_;
};

TEST_F(RedisInitMethod, RanksRendezvousAndShareTheStoreThroughRedis) {
  EXPECT_EQ(runJob(url("run1"), 2), std::vector<int>(2, kOk));

  // The keys are in Redis, under "run1/".
  redis::RedisStoreOptions options;
  options.port = server_.port();
  options.keyPrefix = "run1/";
  options.timeout = 5s;
  redis::RedisStore redis(options);
  EXPECT_EQ(redis.get("init/joined"), "2");
  EXPECT_EQ(redis.get("hello/1"), "from 1");
}

TEST_F(RedisInitMethod, ASecondRunOnTheSamePrefixIsAClearError) {
  const std::string reused = url("reused");
  ASSERT_EQ(runJob(reused, 2), std::vector<int>(2, kOk));

  try {
    initDistributed(optionsFor(reused, 0, 2, 5s));
    FAIL() << "joined a rendezvous left over from the first run";
  } catch (const DistributedInitError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(reused), std::string::npos) << message;
    EXPECT_NE(message.find("prefix"), std::string::npos) << message;
  }
  EXPECT_FALSE(isInitialized());

  // A fresh prefix on the same server works.
  EXPECT_EQ(runJob(url("run2"), 2), std::vector<int>(2, kOk));
}

TEST(RedisInitMethodErrors, AServerNobodyRunsIsAStoreErrorNamingIt) {
  registerBuiltinBackends();
  ASSERT_TRUE(isStoreSchemeRegistered("redis"));
  const int port = test::freeLoopbackPort();
  try {
    initDistributed(optionsFor(fmt::format("redis://127.0.0.1:{}/x", port), 1, 2, 1s));
    FAIL() << "connected to a port nobody listens on";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("127.0.0.1:{}", port)), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(isInitialized());
}

}  // namespace
}  // namespace stretch::comm
