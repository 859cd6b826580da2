// Work: completion from another thread, error propagation, timeout naming the operation.

#include "runtime/comm/work.hpp"

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/comm/errors.hpp"

namespace stretch::comm {
namespace {

using namespace std::chrono_literals;

TEST(Work, CompletesFromAnotherThread) {
  auto work = std::make_shared<CompletionWork>(OpType::AllReduce, 5s, "test all_reduce");
  EXPECT_FALSE(work->isCompleted());
  std::thread finisher([&] {
    std::this_thread::sleep_for(20ms);
    work->markCompleted();
  });
  work->wait();
  EXPECT_TRUE(work->isCompleted());
  EXPECT_EQ(work->exception(), nullptr);
  finisher.join();
}

TEST(Work, CarriesTheOperationsError) {
  auto work = std::make_shared<CompletionWork>(OpType::Broadcast, 5s, "test broadcast");
  work->markFailed(std::make_exception_ptr(CommPeerError("rank 3 went away")));
  EXPECT_TRUE(work->isCompleted());
  EXPECT_NE(work->exception(), nullptr);
  EXPECT_THROW(work->wait(), CommPeerError);
}

TEST(Work, TimesOutNamingTheOperation) {
  auto work = std::make_shared<CompletionWork>(OpType::AllGather, 10s, "gloo all_gather on rank 1");
  const auto start = std::chrono::steady_clock::now();
  try {
    work->wait(50ms);
    FAIL() << "wait returned";
  } catch (const CommTimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("gloo all_gather on rank 1"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("50 ms"), std::string::npos);
  }
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, 50ms);
  EXPECT_LT(waited, 5s);
  EXPECT_FALSE(work->isCompleted());
}

TEST(Work, CompletedWorkIsDoneAtOnce) {
  auto work = completedWork(OpType::Barrier);
  EXPECT_TRUE(work->isCompleted());
  work->wait(0ms);
  EXPECT_EQ(work->op(), OpType::Barrier);
}

}  // namespace
}  // namespace stretch::comm
