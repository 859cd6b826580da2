// PeriodicTask: runs at once and then at its interval, runs again at once on runNow(), stops
// within a bound far below its interval (no sleeping in slices), ends when the body asks or
// throws, and keeps the exception instead of letting it escape.

#include "runtime/common/periodic_task.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

namespace stretch {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Polls `condition` for up to `limit`.
template <typename F>
bool eventually(F condition, std::chrono::milliseconds limit = 5s) {
  const auto deadline = Clock::now() + limit;
  while (!condition()) {
    if (Clock::now() > deadline)
      return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(PeriodicTask, RunsAtOnceThenAtItsInterval) {
  std::atomic<int> runs{0};
  const auto start = Clock::now();
  PeriodicTask task("counter", 50ms, [&] {
    ++runs;
    return PeriodicTask::Next::Continue;
  });
  ASSERT_TRUE(eventually([&] { return runs.load() >= 1; }, 1s));
  EXPECT_LT(Clock::now() - start, 40ms) << "the first run waited for the interval";
  ASSERT_TRUE(eventually([&] { return runs.load() >= 4; }));
  // Four runs are three intervals apart at least.
  EXPECT_GE(Clock::now() - start, 150ms);
  EXPECT_TRUE(task.running());
}

TEST(PeriodicTask, StopsPromptlyFromTheDestructorAndFromStop) {
  std::atomic<int> runs{0};
  const auto body = [&] {
    ++runs;
    return PeriodicTask::Next::Continue;
  };
  {
    auto task = std::make_unique<PeriodicTask>("long interval", 1h, body);
    ASSERT_TRUE(eventually([&] { return runs.load() == 1; }));
    const auto before = Clock::now();
    task.reset();
    EXPECT_LT(Clock::now() - before, 200ms);
  }
  PeriodicTask task("long interval", 1h, body);
  ASSERT_TRUE(eventually([&] { return runs.load() == 2; }));
  const auto before = Clock::now();
  task.stop();
  EXPECT_LT(Clock::now() - before, 200ms);
  EXPECT_FALSE(task.running());
  task.stop();  // idempotent
  EXPECT_EQ(runs.load(), 2);
}

TEST(PeriodicTask, StopLetsARunInProgressFinish) {
  std::atomic<bool> inside{false};
  std::atomic<bool> finished{false};
  PeriodicTask task("slow body", 1h, [&] {
    inside = true;
    std::this_thread::sleep_for(100ms);
    finished = true;
    return PeriodicTask::Next::Continue;
  });
  ASSERT_TRUE(eventually([&] { return inside.load(); }));
  task.stop();
  EXPECT_TRUE(finished.load());
}

TEST(PeriodicTask, RunNowRunsAgainWithoutWaitingForTheInterval) {
  std::atomic<int> runs{0};
  PeriodicTask task("on demand", 1h, [&] {
    ++runs;
    return PeriodicTask::Next::Continue;
  });
  ASSERT_TRUE(eventually([&] { return runs.load() == 1; }));
  task.runNow();
  EXPECT_TRUE(eventually([&] { return runs.load() == 2; }, 1s));
  task.runNow();
  EXPECT_TRUE(eventually([&] { return runs.load() == 3; }, 1s));
}

TEST(PeriodicTask, TheBodyEndsTheTaskByAskingToStop) {
  std::atomic<int> runs{0};
  PeriodicTask task("three runs", 1ms, [&] {
    return ++runs == 3 ? PeriodicTask::Next::Stop : PeriodicTask::Next::Continue;
  });
  ASSERT_TRUE(eventually([&] { return !task.running(); }));
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(runs.load(), 3);
  EXPECT_EQ(task.failure(), nullptr);
  task.runNow();  // nothing runs any more
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(runs.load(), 3);
}

TEST(PeriodicTask, AnExceptionEndsTheTaskAndIsKept) {
  std::atomic<int> runs{0};
  PeriodicTask task("failing", 1ms, [&]() -> PeriodicTask::Next {
    if (++runs == 2)
      throw std::runtime_error("disk full");
    return PeriodicTask::Next::Continue;
  });
  ASSERT_TRUE(eventually([&] { return !task.running(); }));
  EXPECT_EQ(runs.load(), 2);
  ASSERT_NE(task.failure(), nullptr);
  try {
    std::rethrow_exception(task.failure());
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "disk full");
  }
  EXPECT_EQ(task.name(), "failing");
}

}  // namespace
}  // namespace stretch
