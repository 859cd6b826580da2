// The contract every CPU comm::Backend keeps, run against each one this build has (in-process and,
// when built, Gloo), with one thread per rank: every operation x data type x reduction on world
// sizes 1 to 8 and message sizes from empty to 1 MiB, argument errors before anything is sent,
// unsupported devices, timeouts that end instead of hanging, sub-groups.
//
// Values are small integers, so every reduction is exact in every data type (fp16 and bf16
// included) and results are compared exactly; all_reduce results must also be bit-identical on
// every rank.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/comm/backend_registry.hpp"
#include "runtime/comm/builtin/builtin_backends.hpp"
#include "runtime/comm/errors.hpp"
#include "runtime/comm/in_process_backend.hpp"
#include "runtime/comm/reduce.hpp"
#include "runtime/comm/store.hpp"
#include "sim/sim_backend.hpp"
#include "tests/support/sim_cluster.hpp"

namespace stretch::comm {
namespace {

using namespace std::chrono_literals;

// ---------------------------------------------------------------------------------------------
// Worlds

struct World {
  std::shared_ptr<InProcessWorld> inProcess;  // keeps the in-process ranks alive
  std::shared_ptr<sim::SimWorld> sim;         // keeps the simulated ranks alive
  std::vector<std::shared_ptr<Backend>> ranks;
  Backend& operator[](int r) { return *ranks[static_cast<std::size_t>(r)]; }
};

World makeWorld(const std::string& kind, int size, Duration timeout = 20s) {
  World world;
  world.ranks.resize(static_cast<std::size_t>(size));
  if (kind == "in_process") {
    world.inProcess = std::make_shared<InProcessWorld>(size, timeout);
    for (int r = 0; r < size; ++r)
      world.ranks[static_cast<std::size_t>(r)] = world.inProcess->backend(r);
    return world;
  }
  if (kind == "sim") {
    // Functional mode: the data really moves; 2 GPUs per node so that worlds span nodes.
    world.sim = sim::SimWorld::create(test::handCluster("custom", 8, 2, 10, 1, 1, 10), size,
                                      sim::SimBackendMode::Functional,
                                      {sim::CollectiveAlgorithm::Auto, timeout});
    for (int r = 0; r < size; ++r)
      world.ranks[static_cast<std::size_t>(r)] = world.sim->backend(r);
    return world;
  }
  registerBuiltinBackends();
  auto store = std::make_shared<HashStore>(timeout);
  runRankThreads(size, [&](int r) {
    BackendInit init;
    init.store = store;
    init.rank = r;
    init.size = size;
    init.timeout = timeout;
    init.localRank = r;
    world.ranks[static_cast<std::size_t>(r)] = createBackend(kind, init);
  });
  return world;
}

std::vector<std::string> backendKinds() {
  std::vector<std::string> kinds = {"in_process"};
  kinds.push_back("sim");
  for (const auto& name : builtinBackendNames()) {
    if (name == "gloo")
      kinds.push_back(name);
  }
  return kinds;
}

// Runs `body` on every rank of a fresh world.
void spmd(const std::string& kind, int size, const std::function<void(Backend&, int)>& body) {
  World world = makeWorld(kind, size);
  runRankThreads(size, [&](int r) { body(world[r], r); });
}

// ---------------------------------------------------------------------------------------------
// Typed byte buffers

class Buffer {
 public:
  Buffer(DataType dtype, std::size_t count)
      : dtype_(dtype),
        count_(count),
        bytes_(std::max<std::size_t>(1, count * elementSize(dtype))) {}

  void set(std::size_t i, double v) {
    std::byte* p = bytes_.data() + i * elementSize(dtype_);
    switch (dtype_) {
      case DataType::Float32:
        store(p, static_cast<float>(v));
        break;
      case DataType::Float16:
        store(p, floatToHalf(static_cast<float>(v)));
        break;
      case DataType::BFloat16:
        store(p, floatToBfloat16(static_cast<float>(v)));
        break;
      case DataType::Float64:
        store(p, v);
        break;
      case DataType::Int32:
        store(p, static_cast<std::int32_t>(v));
        break;
      case DataType::Int64:
        store(p, static_cast<std::int64_t>(v));
        break;
      case DataType::UInt8:
        store(p, static_cast<std::uint8_t>(v));
        break;
    }
  }
  double get(std::size_t i) const {
    const std::byte* p = bytes_.data() + i * elementSize(dtype_);
    switch (dtype_) {
      case DataType::Float32:
        return load<float>(p);
      case DataType::Float16:
        return halfToFloat(load<std::uint16_t>(p));
      case DataType::BFloat16:
        return bfloat16ToFloat(load<std::uint16_t>(p));
      case DataType::Float64:
        return load<double>(p);
      case DataType::Int32:
        return load<std::int32_t>(p);
      case DataType::Int64:
        return static_cast<double>(load<std::int64_t>(p));
      case DataType::UInt8:
        return load<std::uint8_t>(p);
    }
    return 0;
  }
  BufferView view() { return BufferView{bytes_.data(), count_, dtype_, Device::cpu()}; }
  bool sameBytes(const Buffer& other) const { return bytes_ == other.bytes_; }
  std::size_t count() const { return count_; }

 private:
  template <typename T>
  static void store(std::byte* p, T v) {
    std::memcpy(p, &v, sizeof v);
  }
  template <typename T>
  static T load(const std::byte* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }

  DataType dtype_;
  std::size_t count_;
  std::vector<std::byte> bytes_;
};

bool isFloating(DataType dtype) {
  return dtype == DataType::Float32 || dtype == DataType::Float16 || dtype == DataType::BFloat16 ||
         dtype == DataType::Float64;
}

// Rank r's element i: 1..3 (products use 1..2 so 8 ranks stay within uint8 and bf16's exact
// integers; the sign varies for signed types so min and max are not trivial).
double valueOf(DataType dtype, ReduceOp op, int rank, std::size_t i) {
  const auto k = static_cast<int>((static_cast<std::size_t>(rank) * 7 + i) % 11);
  double v = op == ReduceOp::Product ? 1 + (k % 2) : 1 + (k % 3);
  if (dtype != DataType::UInt8 && op != ReduceOp::Product && k % 4 == 3)
    v = -v;
  return v;
}

double expectedReduction(DataType dtype, ReduceOp op, int size, std::size_t i) {
  double acc = valueOf(dtype, op, 0, i);
  for (int r = 1; r < size; ++r) {
    const double v = valueOf(dtype, op, r, i);
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg:
        acc += v;
        break;
      case ReduceOp::Product:
        acc *= v;
        break;
      case ReduceOp::Min:
        acc = std::min(acc, v);
        break;
      case ReduceOp::Max:
        acc = std::max(acc, v);
        break;
    }
  }
  if (op == ReduceOp::Avg)
    acc = isFloating(dtype) ? acc / size : std::trunc(acc / size);
  return acc;
}

// The reference is computed in double; round it through the data type as the backend stores it.
double roundedTo(DataType dtype, double v) {
  Buffer b(dtype, 1);
  b.set(0, v);
  return b.get(0);
}

constexpr ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Min, ReduceOp::Max,
                             ReduceOp::Product};

std::string label(const std::string& kind, int size, DataType dtype, std::size_t count) {
  return kind + " world " + std::to_string(size) + " " + std::string(toString(dtype)) + " x " +
         std::to_string(count);
}

class BackendContract : public ::testing::TestWithParam<std::string> {};

// ---------------------------------------------------------------------------------------------
// all_reduce

TEST_P(BackendContract, AllReduceEveryOpAndDtypeIsExactAndBitIdenticalAcrossRanks) {
  for (int size : {1, 2, 3, 4}) {
    World world = makeWorld(GetParam(), size);
    for (DataType dtype : kAllDataTypes) {
      for (std::size_t count :
           {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000}}) {
        for (ReduceOp op : kOps) {
          SCOPED_TRACE(label(GetParam(), size, dtype, count) + " " + std::string(toString(op)));
          std::vector<Buffer> results(static_cast<std::size_t>(size), Buffer(dtype, count));
          runRankThreads(size, [&](int r) {
            Buffer& b = results[static_cast<std::size_t>(r)];
            for (std::size_t i = 0; i < count; ++i)
              b.set(i, valueOf(dtype, op, r, i));
            world[r].allReduce(b.view(), op)->wait();
          });
          for (std::size_t i = 0; i < count; ++i) {
            ASSERT_EQ(results[0].get(i), roundedTo(dtype, expectedReduction(dtype, op, size, i)))
                << "element " << i;
          }
          for (int r = 1; r < size; ++r)
            ASSERT_TRUE(results[0].sameBytes(results[static_cast<std::size_t>(r)])) << "rank " << r;
        }
      }
    }
  }
}

TEST_P(BackendContract, AllReduceOfOneMebibyteOnEightRanks) {
  constexpr int kSize = 8;
  constexpr std::size_t kCount = (1u << 20) / sizeof(float);
  World world = makeWorld(GetParam(), kSize);
  std::vector<std::vector<float>> data(kSize, std::vector<float>(kCount));
  runRankThreads(kSize, [&](int r) {
    auto& v = data[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < kCount; ++i)
      v[i] = static_cast<float>((i + static_cast<std::size_t>(r)) % 13);
    world[r].allReduce(BufferView::of(std::span(v)), ReduceOp::Sum)->wait();
  });
  for (std::size_t i = 0; i < kCount; i += 997) {
    float expected = 0;
    for (int r = 0; r < kSize; ++r)
      expected += static_cast<float>((i + static_cast<std::size_t>(r)) % 13);
    ASSERT_EQ(data[0][i], expected) << i;
  }
  for (int r = 1; r < kSize; ++r)
    ASSERT_EQ(data[0], data[static_cast<std::size_t>(r)]);
}

TEST_P(BackendContract, ManyOperationsInFlightCompleteInIssueOrder) {
  constexpr int kSize = 3;
  constexpr int kOpsInFlight = 20;
  spmd(GetParam(), kSize, [&](Backend& backend, int r) {
    std::vector<std::vector<std::int64_t>> bufs(kOpsInFlight);
    std::vector<std::shared_ptr<Work>> works;
    for (int k = 0; k < kOpsInFlight; ++k) {
      bufs[static_cast<std::size_t>(k)] = {k, r, 1};
      works.push_back(backend.allReduce(
          BufferView::of(std::span(bufs[static_cast<std::size_t>(k)])), ReduceOp::Sum));
    }
    for (int k = 0; k < kOpsInFlight; ++k) {
      works[static_cast<std::size_t>(k)]->wait();
      EXPECT_EQ(bufs[static_cast<std::size_t>(k)],
                (std::vector<std::int64_t>{k * kSize, 0 + 1 + 2, kSize}));
    }
  });
}

// ---------------------------------------------------------------------------------------------
// broadcast, all_gather, reduce_scatter, all_to_all

TEST_P(BackendContract, BroadcastFromEveryRoot) {
  for (int size : {1, 2, 3, 5}) {
    World world = makeWorld(GetParam(), size);
    for (DataType dtype :
         {DataType::Float32, DataType::BFloat16, DataType::Int64, DataType::UInt8}) {
      for (std::size_t count :
           {std::size_t{0}, std::size_t{1}, std::size_t{9}, std::size_t{70000}}) {
        for (int root = 0; root < size; ++root) {
          SCOPED_TRACE(label(GetParam(), size, dtype, count) + " root " + std::to_string(root));
          std::vector<Buffer> bufs(static_cast<std::size_t>(size), Buffer(dtype, count));
          runRankThreads(size, [&](int r) {
            Buffer& b = bufs[static_cast<std::size_t>(r)];
            for (std::size_t i = 0; i < count; ++i)
              b.set(i, r == root ? static_cast<double>((i * 3 + 1) % 100) : 0.0);
            world[r].broadcast(b.view(), root)->wait();
          });
          for (int r = 0; r < size; ++r) {
            for (std::size_t i = 0; i < count; i += 1 + count / 50)
              ASSERT_EQ(bufs[static_cast<std::size_t>(r)].get(i), (i * 3 + 1) % 100)
                  << r << " " << i;
          }
        }
      }
    }
  }
}

TEST_P(BackendContract, AllGatherConcatenatesInRankOrder) {
  for (int size : {1, 2, 4, 7}) {
    World world = makeWorld(GetParam(), size);
    for (DataType dtype : kAllDataTypes) {
      for (std::size_t count :
           {std::size_t{0}, std::size_t{1}, std::size_t{5}, std::size_t{20000}}) {
        SCOPED_TRACE(label(GetParam(), size, dtype, count));
        runRankThreads(size, [&](int r) {
          Buffer in(dtype, count);
          Buffer out(dtype, count * static_cast<std::size_t>(size));
          for (std::size_t i = 0; i < count; ++i)
            in.set(i, static_cast<double>((static_cast<std::size_t>(r) * 31 + i) % 97));
          world[r].allGather(in.view(), out.view())->wait();
          for (int from = 0; from < size; ++from) {
            for (std::size_t i = 0; i < count; i += 1 + count / 40) {
              ASSERT_EQ(out.get(static_cast<std::size_t>(from) * count + i),
                        (static_cast<std::size_t>(from) * 31 + i) % 97)
                  << "rank " << r << " block " << from << " element " << i;
            }
          }
        });
      }
    }
  }
}

TEST_P(BackendContract, ReduceScatterGivesEachRankItsReducedBlock) {
  for (int size : {1, 2, 3, 4}) {
    World world = makeWorld(GetParam(), size);
    for (DataType dtype : kAllDataTypes) {
      for (ReduceOp op : kOps) {
        for (std::size_t block :
             {std::size_t{0}, std::size_t{1}, std::size_t{6}, std::size_t{5000}}) {
          SCOPED_TRACE(label(GetParam(), size, dtype, block) + " " + std::string(toString(op)));
          const std::size_t total = block * static_cast<std::size_t>(size);
          runRankThreads(size, [&](int r) {
            Buffer in(dtype, total);
            Buffer out(dtype, block);
            for (std::size_t i = 0; i < total; ++i)
              in.set(i, valueOf(dtype, op, r, i));
            world[r].reduceScatter(in.view(), out.view(), op)->wait();
            const std::size_t base = static_cast<std::size_t>(r) * block;
            for (std::size_t i = 0; i < block; i += 1 + block / 30) {
              ASSERT_EQ(out.get(i), roundedTo(dtype, expectedReduction(dtype, op, size, base + i)))
                  << "rank " << r << " element " << i;
            }
          });
        }
      }
    }
  }
}

TEST_P(BackendContract, AllToAllTransposesBlocks) {
  for (int size : {1, 2, 3, 6}) {
    World world = makeWorld(GetParam(), size);
    for (DataType dtype :
         {DataType::Float32, DataType::Float16, DataType::Int32, DataType::UInt8}) {
      for (std::size_t block :
           {std::size_t{0}, std::size_t{1}, std::size_t{4}, std::size_t{9000}}) {
        SCOPED_TRACE(label(GetParam(), size, dtype, block));
        const std::size_t total = block * static_cast<std::size_t>(size);
        runRankThreads(size, [&](int r) {
          Buffer in(dtype, total);
          Buffer out(dtype, total);
          // Element i of the block rank r sends to rank d encodes (r, d, i).
          for (int d = 0; d < size; ++d) {
            for (std::size_t i = 0; i < block; ++i)
              in.set(static_cast<std::size_t>(d) * block + i,
                     (r * 7 + d * 3 + static_cast<int>(i)) % 101);
          }
          world[r].allToAll(in.view(), out.view())->wait();
          for (int s = 0; s < size; ++s) {
            for (std::size_t i = 0; i < block; i += 1 + block / 30) {
              ASSERT_EQ(out.get(static_cast<std::size_t>(s) * block + i),
                        (s * 7 + r * 3 + static_cast<int>(i)) % 101)
                  << "rank " << r << " from " << s << " element " << i;
            }
          }
        });
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// send / recv and barrier

TEST_P(BackendContract, RingOfSendsAndReceivesWithTags) {
  for (int size : {2, 3, 5}) {
    SCOPED_TRACE(size);
    spmd(GetParam(), size, [&](Backend& backend, int r) {
      const int next = (r + 1) % size;
      const int prev = (r + size - 1) % size;
      for (int round = 0; round < 3; ++round) {
        std::vector<double> out(100 + static_cast<std::size_t>(round), r * 1000.0 + round);
        std::vector<double> in(out.size(), -1.0);
        std::vector<std::int32_t> tagOut = {r, round};
        std::vector<std::int32_t> tagIn(2, -1);
        // Post everything before waiting: crossing sends must not deadlock.
        auto s1 = backend.send(BufferView::of(std::span(out)), next, 1);
        auto s2 = backend.send(BufferView::of(std::span(tagOut)), prev, 2);
        auto r2 = backend.recv(BufferView::of(std::span(tagIn)), next, 2);
        auto r1 = backend.recv(BufferView::of(std::span(in)), prev, 1);
        for (auto& w : {s1, s2, r1, r2})
          w->wait();
        EXPECT_EQ(in, std::vector<double>(out.size(), prev * 1000.0 + round));
        EXPECT_EQ(tagIn, (std::vector<std::int32_t>{next, round}));
      }
    });
  }
}

TEST_P(BackendContract, BarrierHoldsEveryRankUntilTheLastArrives) {
  constexpr int kSize = 4;
  std::atomic<int> arrived{0};
  std::atomic<bool> earlyExit{false};
  spmd(GetParam(), kSize, [&](Backend& backend, int r) {
    if (r == kSize - 1)
      std::this_thread::sleep_for(100ms);
    arrived.fetch_add(1);
    backend.barrier()->wait();
    if (arrived.load() != kSize)
      earlyExit = true;
  });
  EXPECT_FALSE(earlyExit.load());
}

// ---------------------------------------------------------------------------------------------
// Errors

TEST_P(BackendContract, ShapeRootAndPeerErrorsAreThrownBeforeAnythingIsSent) {
  // One rank only: a rejected call must not have started a collective the peer would wait for.
  World world = makeWorld(GetParam(), 2);
  Backend& b = world[0];
  std::vector<float> four(4), seven(7), eight(8);
  auto v4 = BufferView::of(std::span(four));
  auto v7 = BufferView::of(std::span(seven));
  auto v8 = BufferView::of(std::span(eight));
  EXPECT_THROW(b.allGather(v4, v7), CommError);
  EXPECT_THROW(b.reduceScatter(v7, v4, ReduceOp::Sum), CommError);
  EXPECT_THROW(b.allToAll(v7, v7), CommError);
  EXPECT_THROW(b.allToAll(v4, v8), CommError);
  EXPECT_THROW(b.broadcast(v4, 2), CommError);
  EXPECT_THROW(b.broadcast(v4, -1), CommError);
  EXPECT_THROW(b.send(v4, 0), CommError);  // to itself
  EXPECT_THROW(b.recv(v4, 5), CommError);
  std::vector<std::int32_t> ints(8);
  EXPECT_THROW(b.allGather(v4, BufferView::of(std::span(ints))), CommError);  // dtype mismatch
  try {
    b.allGather(v4, v7);
  } catch (const CommError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("all_gather"), std::string::npos) << message;
    EXPECT_NE(message.find('7'), std::string::npos) << message;
    EXPECT_NE(message.find('8'), std::string::npos) << message;
  }
  // Both ranks still work afterwards.
  runRankThreads(2, [&](int r) {
    std::vector<float> v = {1.0f};
    world[r].allReduce(BufferView::of(std::span(v)), ReduceOp::Sum)->wait();
    EXPECT_EQ(v[0], 2.0f);
  });
}

TEST_P(BackendContract, CudaBuffersAreUnsupportedNamingBackendAndOp) {
  World world = makeWorld(GetParam(), 1);
  std::vector<float> v(4);
  BufferView cuda{v.data(), v.size(), DataType::Float32, Device{DeviceType::Cuda, 0}};
  EXPECT_FALSE(world[0].supportsDevice(DeviceType::Cuda));
  try {
    world[0].allReduce(cuda, ReduceOp::Sum)->wait();
    ADD_FAILURE() << "a CUDA buffer was accepted";
  } catch (const CommUnsupportedError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(std::string(world[0].name())), std::string::npos) << message;
    EXPECT_NE(message.find("all_reduce"), std::string::npos) << message;
  }
}

TEST_P(BackendContract, AMissingPeerTimesOutInsteadOfHanging) {
  World world = makeWorld(GetParam(), 2, 5s);
  std::vector<float> v(16, 1.0f);
  const auto start = std::chrono::steady_clock::now();
  auto work =
      world[0].allReduce(BufferView::of(std::span(v)), ReduceOp::Sum, CollectiveOptions{300ms});
  try {
    work->wait();
    ADD_FAILURE() << "all_reduce completed without its peer";
  } catch (const CommTimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("all_reduce"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);
  // Destroying the world with a broken rank must not hang either (the test's own timeout).
}

TEST_P(BackendContract, WaitWithATimeoutReturnsControlToTheCaller) {
  if (GetParam() == "in_process" || GetParam() == "sim")
    GTEST_SKIP() << "the in-process and simulated backends run collectives in the caller, "
                    "synchronously";
  World world = makeWorld(GetParam(), 2, 5s);
  std::vector<float> v(4, 1.0f);
  auto work = world[0].allReduce(BufferView::of(std::span(v)), ReduceOp::Sum);
  ASSERT_FALSE(work->isCompleted());
  EXPECT_THROW(work->wait(50ms), CommTimeoutError);
  // The peer arrives; the operation completes normally.
  std::vector<float> w(4, 2.0f);
  std::thread peer(
      [&] { world[1].allReduce(BufferView::of(std::span(w)), ReduceOp::Sum)->wait(); });
  work->wait();
  peer.join();
  EXPECT_EQ(v, std::vector<float>(4, 3.0f));
}

// A failure breaks the whole backend: this rank's point-to-point messages posted before it fail
// with it instead of waiting out their timeout. abort() leaves the group the same way, and peers
// waiting in a collective with the rank fail fast although its backend object lives on.
TEST_P(BackendContract, AFailureOrAnAbortEndsEveryPendingOperationAtOnce) {
  if (GetParam() == "in_process" || GetParam() == "sim")
    GTEST_SKIP() << "the in-process and simulated backends have no connections to close";
  {
    World world = makeWorld(GetParam(), 2, 20s);
    std::vector<float> in(8), out(8, 1.0f), v(8, 1.0f);
    auto recv = world[0].recv(BufferView::of(std::span(in)), 1, 7);
    auto send = world[0].send(BufferView::of(std::span(out)), 1, 8);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THROW(world[0].allReduce(BufferView::of(std::span(v)), ReduceOp::Sum, {300ms})->wait(),
                 CommTimeoutError);
    EXPECT_THROW(recv->wait(), CommError);
    EXPECT_THROW(send->wait(), CommError);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  }
  {
    World world = makeWorld(GetParam(), 3, 20s);
    std::vector<float> in(8), a(8, 1.0f), b(8, 1.0f), c(8, 1.0f);
    auto recv = world[0].recv(BufferView::of(std::span(in)), 2, 3);
    auto peer1 = world[1].allReduce(BufferView::of(std::span(a)), ReduceOp::Sum);
    auto peer2 = world[2].allReduce(BufferView::of(std::span(b)), ReduceOp::Sum);
    const auto start = std::chrono::steady_clock::now();
    world[0].abort("the test leaves");
    world[0].abort("a second abort");  // does nothing: the first reason stays
    try {
      recv->wait();
      ADD_FAILURE() << "a recv completed after its rank left the group";
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find("the test leaves"), std::string::npos) << e.what();
    }
    EXPECT_THROW(peer1->wait(), CommError);
    EXPECT_THROW(peer2->wait(), CommError);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
    try {
      world[0].allReduce(BufferView::of(std::span(c)), ReduceOp::Sum)->wait();
      ADD_FAILURE() << "an all_reduce ran after its rank left the group";
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find("the test leaves"), std::string::npos) << e.what();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Sub-groups

TEST_P(BackendContract, SubGroupsRunIndependentlyOfEachOther) {
  constexpr int kSize = 4;
  spmd(GetParam(), kSize, [&](Backend& backend, int r) {
    const std::vector<int> evens = {0, 2};
    const std::vector<int> odds = {1, 3};
    auto group = backend.createSubgroup(r % 2 == 0 ? evens : odds, r % 2 == 0 ? "evens" : "odds");
    ASSERT_NE(group, nullptr);
    EXPECT_EQ(group->size(), 2);
    EXPECT_EQ(group->rank(), r / 2);
    std::vector<std::int32_t> v = {r};
    group->allReduce(BufferView::of(std::span(v)), ReduceOp::Sum)->wait();
    EXPECT_EQ(v[0], r % 2 == 0 ? 0 + 2 : 1 + 3);
    // The parent group still works after its sub-groups were created.
    std::vector<std::int32_t> all = {r};
    backend.allReduce(BufferView::of(std::span(all)), ReduceOp::Max)->wait();
    EXPECT_EQ(all[0], kSize - 1);
  });
}

TEST_P(BackendContract, SubGroupRejectsBadMemberLists) {
  World world = makeWorld(GetParam(), 3);
  EXPECT_THROW(world[0].createSubgroup({0, 5}, "bad"), CommError);
  EXPECT_THROW(world[0].createSubgroup({1, 0}, "unsorted"), CommError);
  EXPECT_THROW(world[0].createSubgroup({1, 2}, "not-a-member"), CommError);
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendContract, ::testing::ValuesIn(backendKinds()),
                         [](const auto& p) { return p.param; });

}  // namespace
}  // namespace stretch::comm
