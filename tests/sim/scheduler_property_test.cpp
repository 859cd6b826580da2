// The binary-heap scheduler against the ordered-map reference (rapidcheck; the seed is printed
// on failure and can be replayed with RC_PARAMS="seed=N"): for any sequence of schedules (at
// random times not before now, many ties) and pops, both pop the same events in the same order
// at the same times.

#include <rapidcheck.h>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "sim/scheduler.hpp"

namespace stretch::sim {
namespace {

struct Op {
  bool pop = false;
  SimTime delay = 0;  // schedule at now + delay
};

RC_GTEST_PROP(SchedulerProperty, HeapPopsWhatTheReferencePops, ()) {
  const auto ops = *rc::gen::container<std::vector<Op>>(rc::gen::build<Op>(
      rc::gen::set(&Op::pop, rc::gen::weightedElement<bool>({{3, false}, {2, true}})),
      rc::gen::set(&Op::delay,
                   rc::gen::oneOf(rc::gen::just<SimTime>(0), rc::gen::inRange<SimTime>(0, 5),
                                  rc::gen::inRange<SimTime>(0, 1'000'000'000)))));
  Scheduler<int> heap;
  ReferenceScheduler<int> ref;
  int id = 0;
  auto popBoth = [&] {
    const auto a = heap.pop();
    const auto b = ref.pop();
    RC_ASSERT(a.time == b.time);
    RC_ASSERT(a.sequence == b.sequence);
    RC_ASSERT(a.payload == b.payload);
    RC_ASSERT(heap.now() == ref.now());
  };
  for (const Op& op : ops) {
    if (op.pop) {
      RC_ASSERT(heap.empty() == ref.empty());
      if (!heap.empty()) {
        popBoth();
      }
    } else {
      const SimTime at = heap.now() + op.delay;
      const auto s1 = heap.schedule(at, id);
      const auto s2 = ref.schedule(at, id);
      RC_ASSERT(s1 == s2);
      ++id;
    }
    RC_ASSERT(heap.size() == ref.size());
  }
  while (!heap.empty()) {
    RC_ASSERT(!ref.empty());
    popBoth();
  }
  RC_ASSERT(ref.empty());
  RC_ASSERT(heap.popped() == ref.popped());
}

}  // namespace
}  // namespace stretch::sim
