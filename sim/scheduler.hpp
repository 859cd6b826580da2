#pragma once
// The simulator's event core: a priority queue of events keyed by (time, sequence).
//
// Time is an integer count of nanoseconds (agent::Time's unit) so that results are bit-identical
// for the same seed: no floating-point time ever decides an order. Events at the same time pop in
// the order they were scheduled (the sequence number breaks ties), which makes the order total
// and independent of the heap's internal layout.
//
// Scheduler is a binary heap (O(log n) schedule and pop, O(n) memory for n pending events);
// ReferenceScheduler is the obvious ordered-map implementation kept as a test oracle: both must
// pop the same sequence for any sequence of operations (tests/sim/scheduler_property_test.cpp).
//
// Cancellation is left to the caller: an event carries whatever token it needs (a generation,
// an epoch) and the handler ignores stale ones, which keeps the queue a plain heap.
//
// Not thread-safe: one simulation owns one scheduler.

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "runtime/common/check.hpp"

namespace stretch::sim {

// Simulated time in nanoseconds since the start of the run.
using SimTime = std::int64_t;

inline constexpr SimTime kNanosPerSecond = 1'000'000'000;
inline constexpr SimTime kNanosPerHour = 3600 * kNanosPerSecond;

// Seconds (finite, >= 0) to nanoseconds, rounded to the nearest nanosecond.
SimTime secondsToNanos(double seconds);
// Hours to nanoseconds, rounded to the nearest nanosecond.
SimTime hoursToNanos(double hours);
inline double nanosToSeconds(SimTime ns) noexcept {
  return static_cast<double>(ns) * 1e-9;
}
inline double nanosToHours(SimTime ns) noexcept {
  return static_cast<double>(ns) / static_cast<double>(kNanosPerHour);
}

template <class Payload>
struct ScheduledEvent {
  SimTime time = 0;
  std::uint64_t sequence = 0;
  Payload payload{};
};

template <class Payload>
class Scheduler {
 public:
  using Event = ScheduledEvent<Payload>;

  // Schedules `payload` at `time` (>= now(); throws InternalError otherwise) and returns its
  // sequence number.
  std::uint64_t schedule(SimTime time, Payload payload) {
    STRETCH_CHECK(time >= now_, "event scheduled at {} ns, before the current time {} ns", time,
                  now_);
    const std::uint64_t seq = nextSequence_++;
    heap_.push_back(Event{time, seq, std::move(payload)});
    siftUp(heap_.size() - 1);
    return seq;
  }

  bool empty() const noexcept { return heap_.empty(); }
  std::size_t size() const noexcept { return heap_.size(); }
  // The time of the last popped event (0 before the first).
  SimTime now() const noexcept { return now_; }
  // The time of the next event; the queue must not be empty.
  SimTime nextTime() const {
    STRETCH_CHECK(!heap_.empty(), "nextTime() on an empty scheduler");
    return heap_.front().time;
  }
  // Events popped so far.
  std::uint64_t popped() const noexcept { return popped_; }

  // Removes and returns the earliest event (smallest (time, sequence)) and advances now() to it.
  Event pop() {
    STRETCH_CHECK(!heap_.empty(), "pop() on an empty scheduler");
    Event top = std::move(heap_.front());
    if (heap_.size() > 1) {
      heap_.front() = std::move(heap_.back());
      heap_.pop_back();
      siftDown(0);
    } else {
      heap_.pop_back();
    }
    now_ = top.time;
    ++popped_;
    return top;
  }

  void reserve(std::size_t n) { heap_.reserve(n); }

 private:
  static bool before(const Event& a, const Event& b) noexcept {
    return a.time < b.time || (a.time == b.time && a.sequence < b.sequence);
  }
  void siftUp(std::size_t i) {
    Event moving = std::move(heap_[i]);
    while (i > 0) {
      const std::size_t parent = (i - 1) / 2;
      if (!before(moving, heap_[parent])) {
        break;
      }
      heap_[i] = std::move(heap_[parent]);
      i = parent;
    }
    heap_[i] = std::move(moving);
  }
  void siftDown(std::size_t i) {
    const std::size_t n = heap_.size();
    Event moving = std::move(heap_[i]);
    while (true) {
      std::size_t child = 2 * i + 1;
      if (child >= n) {
        break;
      }
      if (child + 1 < n && before(heap_[child + 1], heap_[child])) {
        ++child;
      }
      if (!before(heap_[child], moving)) {
        break;
      }
      heap_[i] = std::move(heap_[child]);
      i = child;
    }
    heap_[i] = std::move(moving);
  }

  std::vector<Event> heap_;
  SimTime now_ = 0;
  std::uint64_t nextSequence_ = 0;
  std::uint64_t popped_ = 0;
};

// Same contract as Scheduler, implemented with an ordered map: slow and obviously right.
template <class Payload>
class ReferenceScheduler {
 public:
  using Event = ScheduledEvent<Payload>;

  std::uint64_t schedule(SimTime time, Payload payload) {
    STRETCH_CHECK(time >= now_, "event scheduled at {} ns, before the current time {} ns", time,
                  now_);
    const std::uint64_t seq = nextSequence_++;
    events_.emplace(std::make_pair(time, seq), std::move(payload));
    return seq;
  }
  bool empty() const noexcept { return events_.empty(); }
  std::size_t size() const noexcept { return events_.size(); }
  SimTime now() const noexcept { return now_; }
  SimTime nextTime() const {
    STRETCH_CHECK(!events_.empty(), "nextTime() on an empty scheduler");
    return events_.begin()->first.first;
  }
  std::uint64_t popped() const noexcept { return popped_; }
  Event pop() {
    STRETCH_CHECK(!events_.empty(), "pop() on an empty scheduler");
    auto it = events_.begin();
    Event e{it->first.first, it->first.second, std::move(it->second)};
    events_.erase(it);
    now_ = e.time;
    ++popped_;
    return e;
  }

 private:
  std::map<std::pair<SimTime, std::uint64_t>, Payload> events_;
  SimTime now_ = 0;
  std::uint64_t nextSequence_ = 0;
  std::uint64_t popped_ = 0;
};

}  // namespace stretch::sim
