// Live recovery's NCCL communicators (runtime/comm/nccl/nccl_communicator.hpp) on real CUDA
// devices: init through the library, revoke, abort, re-init, shrink, adopt, interrupt, the
// version caps; two ranks on two devices where one stops, the other revokes and shrinks.
// What needs no device runs everywhere; the rest skips with the CUDA runtime's reason.

#include "runtime/comm/nccl/nccl_communicator.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cuda_runtime_api.h>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/accel/accelerator.hpp"
#include "runtime/comm/errors.hpp"
#include "runtime/comm/nccl/nccl_backend.hpp"
#include "runtime/comm/store.hpp"

namespace stretch::comm::nccl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

int devices() {
  return accel::cudaStatus().deviceCount;
}

#define SKIP_WITHOUT_A_DEVICE()                                                            \
  do {                                                                                     \
    if (devices() < 1)                                                                     \
      GTEST_SKIP() << "no CUDA device visible: " << accel::cudaStatus().unavailableReason; \
  } while (false)

// The headers' minor version (2.28.9 -> 28): what the module could compile in.
int buildMinor() {
  int major = 0;
  int minor = 0;
  std::sscanf(ncclBuildVersion().c_str(), "%d.%d", &major, &minor);
  return major > 2 ? 99 : minor;
}

// `count` floats on `device`, all `value`, freed on scope exit.
class DeviceFloats {
 public:
  DeviceFloats(int device, std::size_t count, float value) : device_(device), count_(count) {
    cudaSetDevice(device);
    EXPECT_EQ(cudaMalloc(&data_, count * sizeof(float)), cudaSuccess);
    const std::vector<float> host(count, value);
    EXPECT_EQ(cudaMemcpy(data_, host.data(), count * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  ~DeviceFloats() { cudaFree(data_); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;

  BufferView view() const { return {data_, count_, DataType::Float32, Device::cuda(device_)}; }
  std::vector<float> values() const {
    std::vector<float> host(count_);
    cudaSetDevice(device_);
    EXPECT_EQ(cudaMemcpy(host.data(), data_, count_ * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return host;
  }

 private:
  int device_;
  std::size_t count_;
  void* data_ = nullptr;
};

std::shared_ptr<CommunicatorLibrary> libraryOn(int device) {
  cudaSetDevice(device);
  return makeNcclLibrary(device);
}

// A one-rank communicator from a fresh unique id.
std::unique_ptr<Communicator> single(CommunicatorLibrary& library) {
  return library.init(library.uniqueId(), 0, 1, 30s, {});
}

// An all-reduce sum at one rank is the identity: the communicator works.
void expectWorks(Communicator& comm, int device = 0) {
  DeviceFloats buffer(device, 1024, 3.0f);
  comm.backend()->allReduce(buffer.view(), ReduceOp::Sum)->wait(30s);
  EXPECT_EQ(buffer.values().front(), 3.0f * static_cast<float>(comm.size()));
}

// ---- Without a device ---------------------------------------------------------------------

TEST(NcclCommunicatorTest, FeaturesAreTheLoadedVersionCappedByTheHeaders) {
  auto library = makeNcclLibrary(0);
  const CommunicatorFeatures& features = library->features();
  EXPECT_EQ(features.library, "nccl");
  EXPECT_EQ(features.version(), ncclVersion());
  const CommunicatorFeatures loaded = ncclFeatures(features.major, features.minor, features.patch);
  // Never more than the loaded library has, and nothing the headers lack.
  EXPECT_LE(features.shrink, loaded.shrink && buildMinor() >= 27);
  EXPECT_LE(features.revoke, loaded.revoke && buildMinor() >= 28);
  EXPECT_LE(features.grow, loaded.grow && buildMinor() >= 29);
  EXPECT_EQ(features.abortParentAfterAbortiveShrink, loaded.abortParentAfterAbortiveShrink);
  if (buildMinor() < 29) {
    EXPECT_FALSE(features.grow);
    // A joiner is refused before any device is needed, naming both versions.
    try {
      library->join(std::string(256, '0'), 1, 2, 1s, {});
      FAIL() << "join ran with NCCL " << ncclBuildVersion() << " headers";
    } catch (const CommUnsupportedError& e) {
      EXPECT_THAT(e.what(), AllOf(HasSubstr("ncclCommGrow"), HasSubstr("2.29"),
                                  HasSubstr(ncclBuildVersion()), HasSubstr(ncclVersion())));
    }
  }
}

TEST(NcclCommunicatorTest, RegisteredAsTheNcclLibrary) {
  registerNcclBackend();
  auto library = communicatorLibrary("nccl");
  ASSERT_NE(library, nullptr);
  EXPECT_EQ(library->features().version(), ncclVersion());
  EXPECT_EQ(communicatorLibrary("nccl"), library);  // made once
  EXPECT_EQ(library->adopt(nullptr), nullptr);
}

TEST(NcclCommunicatorTest, BadIdsAndRanksAreRefusedBeforeNcclSeesThem) {
  auto library = makeNcclLibrary(0);
  try {
    library->init("not hex", 0, 1, 1s, {});
    FAIL() << "a malformed unique id was accepted";
  } catch (const CommError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("rank 0 of 1"), HasSubstr("hex digits")));
  }
  EXPECT_THROW(library->init(std::string(256, '0'), 2, 2, 1s, {}), CommError);
}

TEST(NcclCommunicatorTest, MissingDeviceIsNamed) {
  const int missing = devices();  // one past the last device: never valid
  auto library = makeNcclLibrary(missing);
  try {
    library->init(std::string(256, '0'), 0, 1, 1s, {});
    FAIL() << "a communicator on cuda:" << missing << " was created";
  } catch (const CommError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("cuda:" + std::to_string(missing)), HasSubstr("visible"),
                                HasSubstr("rank 0 of 1")));
  }
}

// ---- One rank on a real device ------------------------------------------------------------

TEST(NcclCommunicatorTest, InitThroughTheRegistryAndAllReduce) {
  SKIP_WITHOUT_A_DEVICE();
  cudaSetDevice(0);
  registerNcclBackend();
  auto library = communicatorLibrary("nccl");
  ASSERT_NE(library, nullptr);
  auto comm = single(*library);
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  EXPECT_EQ(comm->backend(), comm->backend());
  EXPECT_EQ(comm->backend()->name(), "nccl");
  expectWorks(*comm);
  EXPECT_EQ(comm->asyncError(), std::nullopt);
  EXPECT_FALSE(comm->aborted());
  comm->destroy();
  EXPECT_FALSE(comm->aborted());
  EXPECT_THROW(comm->backend()->barrier(), CommError);
}

TEST(NcclCommunicatorTest, RevokeFailsPendingAndLaterWorks) {
  SKIP_WITHOUT_A_DEVICE();
  auto library = libraryOn(0);
  auto comm = single(*library);
  DeviceFloats buffer(0, 1 << 22, 1.0f);
  auto pending = comm->backend()->allReduce(buffer.view(), ReduceOp::Sum);
  comm->revoke("rank 3 stopped answering");
  comm->revoke("a second reason is ignored");
  EXPECT_FALSE(comm->aborted());
  try {
    pending->wait(10s);
    FAIL() << "a Work issued before the revoke succeeded";
  } catch (const CommPeerError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("revoked"), HasSubstr("rank 3 stopped answering")));
  }
  try {
    comm->backend()->allReduce(buffer.view(), ReduceOp::Sum);
    FAIL() << "a revoked communicator accepted an all-reduce";
  } catch (const CommPeerError& e) {
    EXPECT_THAT(e.what(), HasSubstr("rank 3 stopped answering"));
  }
  // Revoked with no peer at fault: NCCL reports it in progress, then quiescent, never an error.
  EXPECT_EQ(comm->asyncError(), std::nullopt);
  const auto start = Clock::now();
  comm->destroy();
  EXPECT_LT(Clock::now() - start, 15s);
}

TEST(NcclCommunicatorTest, AbortIsIdempotentAndEndsTheCommunicator) {
  SKIP_WITHOUT_A_DEVICE();
  auto library = libraryOn(0);
  auto comm = single(*library);
  auto backend = comm->backend();
  comm->abort("test over");
  comm->abort("again");
  EXPECT_TRUE(comm->aborted());
  const auto error = comm->asyncError();
  ASSERT_TRUE(error.has_value());
  EXPECT_THAT(*error, AllOf(HasSubstr("aborted"), HasSubstr("test over")));
  DeviceFloats buffer(0, 16, 1.0f);
  try {
    backend->allReduce(buffer.view(), ReduceOp::Sum);
    FAIL() << "an aborted communicator accepted an all-reduce";
  } catch (const CommError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("aborted"), HasSubstr("test over")));
  }
  if (library->features().shrink) {
    EXPECT_THROW(comm->shrink({}, false, 5s, {}), CommError);
  }
  comm->destroy();  // nothing left to destroy
  comm->revoke("after the abort");
}

TEST(NcclCommunicatorTest, ANewUniqueIdInitialisesAgainAfterAnAbort) {
  SKIP_WITHOUT_A_DEVICE();
  auto library = libraryOn(0);
  auto first = single(*library);
  expectWorks(*first);
  first->abort("generation 0 failed");
  auto second = single(*library);
  expectWorks(*second);
  second->destroy();
}

TEST(NcclCommunicatorTest, ShrinkOfOneRankExcludingNone) {
  SKIP_WITHOUT_A_DEVICE();
  auto library = libraryOn(0);
  if (!library->features().shrink)
    GTEST_SKIP() << "ncclCommShrink needs NCCL 2.27: loaded " << ncclVersion() << ", headers "
                 << ncclBuildVersion();
  auto parent = single(*library);
  auto child = parent->shrink({}, false, 30s, {});
  EXPECT_EQ(child->rank(), 0);
  EXPECT_EQ(child->size(), 1);
  expectWorks(*child);
  EXPECT_THROW(parent->shrink({0}, false, 5s, {}), CommError);  // itself
  child->destroy();
  parent->destroy();
}

TEST(NcclCommunicatorTest, RevokedCommunicatorShrinksAsRecoveryDoes) {
  SKIP_WITHOUT_A_DEVICE();
  auto library = libraryOn(0);
  const CommunicatorFeatures& features = library->features();
  if (!features.shrink)
    GTEST_SKIP() << "ncclCommShrink needs NCCL 2.27: loaded " << ncclVersion();
  auto parent = single(*library);
  DeviceFloats buffer(0, 1 << 20, 1.0f);
  auto pending = parent->backend()->allReduce(buffer.view(), ReduceOp::Sum);
  parent->revoke("recovery test");
  EXPECT_THROW(pending->wait(10s), CommPeerError);
  // Without ncclCommRevoke only an abortive shrink ends the device work (the generation logic
  // passes the same).
  auto child = parent->shrink({}, !features.revoke, 30s, {});
  expectWorks(*child);
  child->destroy();
  parent->destroy();  // aborts instead where destroying the parent of an abortive shrink hangs
}

TEST(NcclCommunicatorTest, AdoptSharesTheBackendsCommunicator) {
  SKIP_WITHOUT_A_DEVICE();
  BackendInit init;
  init.store = std::make_shared<HashStore>(30s);
  init.timeout = 30s;
  auto backend = std::make_shared<NcclBackend>(init);
  auto library = libraryOn(0);
  auto comm = library->adopt(backend);
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(comm->backend(), backend);
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  expectWorks(*comm);
  comm->revoke("adopted and revoked");
  DeviceFloats buffer(0, 16, 1.0f);
  EXPECT_THROW(backend->allReduce(buffer.view(), ReduceOp::Sum), CommPeerError);
  comm->abort("test over");
  EXPECT_TRUE(backend->isAborted());
}

TEST(NcclCommunicatorTest, GrowIsUnsupportedWithOlderHeaders) {
  SKIP_WITHOUT_A_DEVICE();
  auto library = libraryOn(0);
  if (library->features().grow)
    GTEST_SKIP() << "this build has ncclCommGrow (NCCL " << ncclVersion() << ")";
  auto comm = single(*library);
  EXPECT_THROW(comm->growId(), CommUnsupportedError);
  try {
    comm->grow(2, std::nullopt, 1s, {});
    FAIL() << "grow ran without ncclCommGrow";
  } catch (const CommUnsupportedError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("ncclCommGrow"), HasSubstr("2.29"),
                                HasSubstr(ncclBuildVersion()), HasSubstr(ncclVersion())));
  }
  expectWorks(*comm);  // untouched
  comm->destroy();
}

TEST(NcclCommunicatorTest, InitInterruptedAbortsIt) {
  SKIP_WITHOUT_A_DEVICE();
  auto library = libraryOn(0);
  const auto start = Clock::now();
  const Interrupt interrupt = [&] { return Clock::now() - start > 300ms; };
  try {
    library->init(library->uniqueId(), 0, 2, 60s, interrupt);  // rank 1 never comes
    FAIL() << "initialisation of 2 ranks completed with one";
  } catch (const CommAbortedError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("rank 0 of 2"), HasSubstr("interrupted")));
  }
  EXPECT_LT(Clock::now() - start, 10s);
}

TEST(NcclCommunicatorTest, InitTimeoutNamesRankAndSize) {
  SKIP_WITHOUT_A_DEVICE();
  auto library = libraryOn(0);
  try {
    library->init(library->uniqueId(), 0, 2, 1s, {});
    FAIL() << "initialisation of 2 ranks completed with one";
  } catch (const CommTimeoutError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("rank 0 of 2"), HasSubstr("1 s"),
                                HasSubstr("are all 2 ranks running?")));
  }
}

// ---- Two ranks on two devices: one stops, the other revokes and shrinks -------------------

TEST(NcclCommunicatorMultiDeviceTest, SurvivorRevokesAndShrinksToOneRank) {
  if (devices() < 2) {
    GTEST_SKIP() << "needs 2 GPUs: NCCL refuses two ranks of one communicator on one device ("
                 << devices() << " visible)";
  }
  auto libraries = std::vector{libraryOn(0), libraryOn(1)};
  const CommunicatorFeatures features = libraries[0]->features();
  const std::string id = libraries[0]->uniqueId();
  std::unique_ptr<Communicator> comms[2];
  std::string errors[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      try {
        cudaSetDevice(r);
        comms[r] = libraries[static_cast<std::size_t>(r)]->init(id, r, 2, 60s, {});
        expectWorks(*comms[r], r);  // 2 ranks: 3 + 3
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : ranks)
    t.join();
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");

  // Rank 1 is "killed": it stops taking part. Rank 0's all-reduce (of the size both already
  // ran, so no new connection is needed) blocks until a watchdog revokes the communicator.
  cudaSetDevice(0);
  DeviceFloats buffer(0, 1024, 1.0f);
  std::atomic<Clock::time_point> revokedAt{Clock::time_point::max()};
  std::thread watchdog([&] {
    std::this_thread::sleep_for(300ms);
    revokedAt = Clock::now();
    comms[0]->revoke("rank 1 stopped taking part");
  });
  try {
    comms[0]->backend()->allReduce(buffer.view(), ReduceOp::Sum, {60s})->wait();
    ADD_FAILURE() << "an all-reduce completed without rank 1";
  } catch (const CommPeerError& e) {
    EXPECT_THAT(e.what(), HasSubstr("rank 1 stopped taking part"));
  }
  const auto unblocked = Clock::now();
  watchdog.join();
  EXPECT_LT(unblocked - revokedAt.load(), 1s) << "the blocked all-reduce outlived the revoke";

  if (!features.shrink) {
    comms[0]->abort("test over");
    comms[1]->abort("test over");
    GTEST_SKIP() << "ncclCommShrink needs NCCL 2.27: loaded " << ncclVersion();
  }
  auto survivor = comms[0]->shrink({1}, !features.revoke, 60s, {});
  const auto shrunkIn =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - revokedAt.load());
  std::printf("nccl live recovery, 2 ranks: revoke -> shrunk to 1 rank in %lld ms (NCCL %s)\n",
              static_cast<long long>(shrunkIn.count()), ncclVersion().c_str());
  EXPECT_EQ(survivor->rank(), 0);
  EXPECT_EQ(survivor->size(), 1);
  expectWorks(*survivor);
  survivor->destroy();
  comms[1]->abort("killed rank cleaned up");
  comms[0]->destroy();  // aborts instead where destroying the parent of an abortive shrink hangs
}

}  // namespace
}  // namespace stretch::comm::nccl
