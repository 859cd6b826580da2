#include "sim/detail/failure_sources.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace stretch::sim::detail {

FailureSources::FailureSources(const Scenario& s, std::uint64_t replica, const NodePool& nodes,
                               RunMetrics& metrics)
    : causes_(s.failures.causes,
              deriveSeed(s.seed, replica, static_cast<std::uint64_t>(RandomStream::Causes))),
      workerRng_(deriveSeed(s.seed, replica, static_cast<std::uint64_t>(RandomStream::Workers))) {
  const std::int64_t count = nodes.size();
  const FailureSpec& f = s.failures;
  const auto failureSeed =
      deriveSeed(s.seed, replica, static_cast<std::uint64_t>(RandomStream::Failures));
  switch (f.model) {
    case FailureModelKind::None:
      break;
    case FailureModelKind::Exponential:
      failures_.process = makeExponentialProcess(count, f.nodeMtbfHours, failureSeed);
      break;
    case FailureModelKind::Weibull:
      failures_.process = makeWeibullProcess(count, f.nodeMtbfHours, f.shape, failureSeed);
      break;
    case FailureModelKind::Trace: {
      std::vector<FailureStrike> strikes;
      for (std::size_t i = 0; i < f.trace.size(); ++i) {
        const TraceFailure& t = f.trace[i];
        FailureStrike strike;
        strike.time = hoursToNanos(t.atHours);
        strike.node = nodes.resolveTraceNode(t.node, i);
        if (!t.cause.empty()) {
          strike.cause = causes_.find(t.cause);
          if (!strike.cause && !f.causes.empty()) {
            metrics.note(
                fmt::format("trace cause \"{}\" is not in the cause table: treated as a "
                            "hardware failure",
                            t.cause));
          }
        }
        strike.repairHours = t.repairHours;
        strikes.push_back(strike);
      }
      failures_.process = makeTraceProcess(std::move(strikes));
      break;
    }
  }
  failures_.kind = Ev::Failure;
  if (s.spot) {
    preemptions_.process = makeExponentialProcess(
        count, s.spot->nodeMeanHoursBetweenPreemptions,
        deriveSeed(s.seed, replica, static_cast<std::uint64_t>(RandomStream::Preemptions)));
    preemptions_.kind = Ev::Preemption;
  }
}

void FailureSources::sync(EventQueue& queue, SimTime now) {
  syncSlot(failures_, queue, now);
  syncSlot(preemptions_, queue, now);
}

void FailureSources::syncSlot(ProcessSlot& slot, EventQueue& queue, SimTime now) {
  if (!slot.process) {
    return;
  }
  const auto next = slot.process->peek();
  if (!next) {
    if (slot.scheduled) {
      ++slot.token;
      slot.scheduled = false;
    }
    return;
  }
  if (slot.scheduled && slot.time == next->time) {
    return;
  }
  ++slot.token;
  slot.scheduled = true;
  slot.time = std::max(next->time, now);
  queue.schedule(slot.time, Payload{slot.kind, slot.token, 0});
}

void FailureSources::nodeUpOrDown(std::int64_t node, bool up, SimTime now) {
  for (ProcessSlot* slot : {&failures_, &preemptions_}) {
    if (slot->process) {
      if (up) {
        slot->process->nodeUp(node, now);
      } else {
        slot->process->nodeDown(node, now);
      }
    }
  }
}

std::int64_t FailureSources::pickWorker(std::int64_t workers) {
  return static_cast<std::int64_t>(workerRng_.below(static_cast<std::uint64_t>(workers)));
}

}  // namespace stretch::sim::detail
