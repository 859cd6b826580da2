// The event core: (time, sequence) order, the current time, conversions, bad schedules.

#include "sim/scheduler.hpp"

#include <gtest/gtest.h>

#include "runtime/common/error.hpp"

namespace stretch::sim {
namespace {

TEST(Scheduler, PopsInTimeOrderAndTiesInScheduleOrder) {
  Scheduler<int> s;
  s.schedule(30, 0);
  s.schedule(10, 1);
  s.schedule(20, 2);
  s.schedule(10, 3);
  s.schedule(10, 4);
  std::vector<int> order;
  std::vector<SimTime> times;
  while (!s.empty()) {
    const auto e = s.pop();
    order.push_back(e.payload);
    times.push_back(e.time);
    EXPECT_EQ(s.now(), e.time);
  }
  EXPECT_EQ(order, (std::vector<int>{1, 3, 4, 2, 0}));
  EXPECT_EQ(times, (std::vector<SimTime>{10, 10, 10, 20, 30}));
  EXPECT_EQ(s.popped(), 5u);
}

TEST(Scheduler, EventsAtTheCurrentTimeAreAllowedAndComeAfterEarlierOnes) {
  Scheduler<int> s;
  s.schedule(5, 1);
  s.schedule(5, 2);
  EXPECT_EQ(s.pop().payload, 1);
  s.schedule(5, 3);  // now == 5: allowed, after the pending 2
  EXPECT_EQ(s.pop().payload, 2);
  EXPECT_EQ(s.pop().payload, 3);
}

TEST(Scheduler, SchedulingInThePastIsABug) {
  Scheduler<int> s;
  s.schedule(100, 1);
  s.pop();
  EXPECT_THROW(s.schedule(99, 2), InternalError);
  ReferenceScheduler<int> r;
  r.schedule(100, 1);
  r.pop();
  EXPECT_THROW(r.schedule(99, 2), InternalError);
}

TEST(Scheduler, PopOnEmptyIsABug) {
  Scheduler<int> s;
  EXPECT_THROW(s.pop(), InternalError);
  EXPECT_THROW(static_cast<void>(s.nextTime()), InternalError);
}

TEST(Scheduler, ManyEventsComeOutSorted) {
  Scheduler<std::uint64_t> s;
  std::uint64_t x = 12345;
  for (int i = 0; i < 10000; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    s.schedule(static_cast<SimTime>(x >> 50), static_cast<std::uint64_t>(i));
  }
  SimTime last = -1;
  std::uint64_t lastSeq = 0;
  while (!s.empty()) {
    const auto e = s.pop();
    ASSERT_TRUE(e.time > last || (e.time == last && e.sequence > lastSeq));
    last = e.time;
    lastSeq = e.sequence;
  }
}

TEST(SimTime, Conversions) {
  EXPECT_EQ(secondsToNanos(1.5), 1'500'000'000);
  EXPECT_EQ(secondsToNanos(1e-9), 1);
  EXPECT_EQ(secondsToNanos(0.4e-9), 0);
  EXPECT_EQ(hoursToNanos(1.0), kNanosPerHour);
  EXPECT_DOUBLE_EQ(nanosToHours(hoursToNanos(54 * 24.0)), 54 * 24.0);
  EXPECT_THROW(secondsToNanos(-1.0), InternalError);
}

}  // namespace
}  // namespace stretch::sim
