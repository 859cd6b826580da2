// Gloo across real processes on loopback, started the ways a job starts: initDistributed from a
// launcher's environment (TCPStore on rank 0), from OpenMPI's variables, and over a FileStore.
// Also the failures an elastic job lives through: a peer that never joins (the rendezvous times
// out), a peer that publishes its address and then freezes (the others' connect ends within the
// timeout), and a peer killed in the middle of an all_reduce (the survivors get an error instead
// of hanging). Every child is reaped; every wait is bounded.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <signal.h>
#include <stdlib.h>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/comm/backend_registry.hpp"
#include "runtime/comm/builtin/builtin_backends.hpp"
#include "runtime/comm/errors.hpp"
#include "runtime/comm/file_store.hpp"
#include "runtime/comm/init_distributed.hpp"
#include "tests/runtime/comm/store_test_util.hpp"

namespace stretch::comm {
namespace {

using namespace std::chrono_literals;
using test::Children;

// Child exit codes.
constexpr int kOk = 0;
constexpr int kWrongResult = 3;
constexpr int kTimedOut = 4;
constexpr int kPeerError = 5;
constexpr int kOtherCommError = 6;
constexpr int kLate = 7;

void setEnvironment(const std::map<std::string, std::string>& vars) {
  for (const char* name :
       {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMI_SIZE",
        "STRETCH_TIMEOUT", "DEEPSPEED_TIMEOUT", "STRETCH_STORE_TOKEN"}) {
    ::unsetenv(name);
  }
  for (const auto& [name, value] : vars)
    ::setenv(name.c_str(), value.c_str(), 1);
}

// In a child: joins the job and checks all_reduce, all_gather and a ring of sends.
int collectivesRoundTrip(const InitOptions& options) {
  registerBuiltinBackends();
  auto group = initDistributed(options);
  const int rank = group->rank();
  const int size = group->size();
  std::vector<double> v(1000);
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<double>(rank) + static_cast<double>(i);
  group->allReduce(BufferView::of(std::span(v)), ReduceOp::Avg)->wait();
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] != static_cast<double>(i) + (size - 1) / 2.0)
      return kWrongResult;
  }
  std::vector<std::int64_t> mine = {rank, rank * rank};
  std::vector<std::int64_t> all(2 * static_cast<std::size_t>(size));
  group->allGather(BufferView::of(std::span(mine)), BufferView::of(std::span(all)))->wait();
  for (int r = 0; r < size; ++r) {
    if (all[2 * static_cast<std::size_t>(r)] != r ||
        all[2 * static_cast<std::size_t>(r) + 1] != r * r)
      return kWrongResult;
  }
  group->barrier()->wait();
  destroyProcessGroup();
  return kOk;
}

int exitCodeOf(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[child %d] %s\n", static_cast<int>(::getpid()), e.what());
  }
  try {
    std::rethrow_exception(error);
  } catch (const CommTimeoutError&) {
    return kTimedOut;
  } catch (const StoreTimeoutError&) {
    return kTimedOut;
  } catch (const CommPeerError&) {
    return kPeerError;
  } catch (const std::exception&) {
    return kOtherCommError;
  }
}

// Forks `size` ranks running `body(rank)` and returns their exit codes (-1: killed or late).
std::vector<int> runJob(int size, const std::function<int(int rank)>& body,
                        std::chrono::milliseconds limit = 60s) {
  Children children;
  for (int r = 0; r < size; ++r) {
    children.spawn([&, r] {
      int code = kOtherCommError;
      try {
        code = body(r);
      } catch (...) {
        code = exitCodeOf(std::current_exception());
      }
      ::_exit(code);
    });
  }
  return children.join(limit);
}

TEST(GlooProcesses, FourRanksFromTheLaunchersEnvironmentOverTcpStore) {
  const int port = test::freeLoopbackPort();
  const auto codes = runJob(4, [&](int r) {
    setEnvironment({{"RANK", std::to_string(r)},
                    {"WORLD_SIZE", "4"},
                    {"LOCAL_RANK", std::to_string(r)},
                    {"MASTER_ADDR", "127.0.0.1"},
                    {"MASTER_PORT", std::to_string(port)},
                    {"STRETCH_STORE_TOKEN", "0123456789abcdef0123456789abcdef"},
                    {"STRETCH_TIMEOUT", "1"}});
    return collectivesRoundTrip({});
  });
  EXPECT_EQ(codes, std::vector<int>(4, kOk));
}

TEST(GlooProcesses, TwoRanksDiscoveredFromOpenMpiVariables) {
  const int port = test::freeLoopbackPort();
  const auto codes = runJob(2, [&](int r) {
    setEnvironment({{"OMPI_COMM_WORLD_RANK", std::to_string(r)},
                    {"OMPI_COMM_WORLD_SIZE", "2"},
                    {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(r)},
                    {"MASTER_ADDR", "127.0.0.1"},
                    {"MASTER_PORT", std::to_string(port)}});
    InitOptions options;
    options.timeout = 60s;
    return collectivesRoundTrip(options);
  });
  EXPECT_EQ(codes, std::vector<int>(2, kOk));
}

TEST(GlooProcesses, ThreeRanksOverAFileStore) {
  test::TempDir dir;
  const std::string url = "file://" + (dir.path() / "rendezvous").string();
  const auto codes = runJob(3, [&](int r) {
    setEnvironment({});
    InitOptions options;
    options.initMethod = url;
    options.rank = r;
    options.worldSize = 3;
    options.timeout = 60s;
    return collectivesRoundTrip(options);
  });
  EXPECT_EQ(codes, std::vector<int>(3, kOk));
}

TEST(GlooProcesses, APeerThatNeverJoinsEndsTheRendezvousWithATimeout) {
  const int port = test::freeLoopbackPort();
  const auto start = std::chrono::steady_clock::now();
  // Ranks 0 and 1 of a world of 3 start; rank 2 never does.
  const auto codes = runJob(2, [&](int r) {
    setEnvironment({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(port)}});
    InitOptions options;
    options.rank = r;
    options.worldSize = 3;
    options.timeout = 2s;
    return collectivesRoundTrip(options);
  });
  ASSERT_EQ(codes.size(), 2u);
  EXPECT_EQ(codes[0], kTimedOut);
  // Rank 1 times out too, or sees rank 0's store server go away first.
  EXPECT_TRUE(codes[1] == kTimedOut || codes[1] == kOtherCommError) << codes[1];
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
}

TEST(GlooProcesses, APeerThatFreezesAfterPublishingItsAddressEndsTheConnectWithinTheTimeout) {
  // Gloo's own connect waits five times its context timeout; the backend asks for a fifth so
  // that the whole rendezvous keeps to the caller's. Rank 1 binds to 127.0.0.2: Gloo's lower
  // address listens, so rank 0 (127.0.0.1) waits for rank 1 to connect, which it never does.
  test::TempDir dir;
  const auto path = (dir.path() / "rendezvous").string();
  constexpr auto kTimeout = 1000ms;
  const auto codes = runJob(2, [&](int r) {
    registerBuiltinBackends();
    std::shared_ptr<Store> store = std::make_shared<FileStore>(path, 10s);
    if (r == 1)
      store = std::make_shared<test::StallingStore>(store,
                                                    2 * kTimeout + 500ms);  // past rank 0's limit
    BackendInit init;
    init.store = store;
    init.rank = r;
    init.size = 2;
    init.timeout = kTimeout;
    init.host = r == 0 ? "127.0.0.1" : "127.0.0.2";
    const auto start = std::chrono::steady_clock::now();
    try {
      createBackend("gloo", init);
    } catch (...) {
      const int code = exitCodeOf(std::current_exception());
      if (r == 0 && std::chrono::steady_clock::now() - start > 2 * kTimeout)
        return kLate;
      return code;
    }
    return kOk;  // not expected: rank 1 never connects
  });
  ASSERT_EQ(codes.size(), 2u);
  EXPECT_EQ(codes[0], kTimedOut) << "rank 0 should time out within twice its timeout of "
                                 << kTimeout.count() << " ms (" << kLate << ": it took longer)";
  EXPECT_EQ(codes[1], kTimedOut);
}

TEST(GlooProcesses, SurvivorsOfAPeerKilledMidAllReduceGetAnErrorNotAHang) {
  const int port = test::freeLoopbackPort();
  const auto start = std::chrono::steady_clock::now();
  const auto codes = runJob(3, [&](int r) {
    setEnvironment({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(port)}});
    registerBuiltinBackends();
    InitOptions options;
    options.rank = r;
    options.worldSize = 3;
    options.timeout = 10s;
    auto group = initDistributed(options);
    std::vector<float> v(1 << 20, 1.0f);  // 4 MiB: the kill lands inside a transfer
    for (int iteration = 0; iteration < 1000; ++iteration) {
      auto work = group->allReduce(BufferView::of(std::span(v)), ReduceOp::Avg);
      if (r == 2 && iteration == 3)
        ::raise(SIGKILL);
      work->wait();
    }
    return kOk;  // not expected: the survivors cannot finish 1000 iterations without rank 2
  });
  ASSERT_EQ(codes.size(), 3u);
  EXPECT_EQ(codes[2], -1);  // killed
  for (int r : {0, 1}) {
    EXPECT_TRUE(codes[static_cast<std::size_t>(r)] == kPeerError ||
                codes[static_cast<std::size_t>(r)] == kTimedOut)
        << "rank " << r << " exited with " << codes[static_cast<std::size_t>(r)];
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 40s);
}

}  // namespace
}  // namespace stretch::comm
