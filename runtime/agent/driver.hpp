#pragma once
// AgentDriver: the one place where the state machine's actions become what a worker group does
// and what the event log says. The launcher's agent loop (runtime/launcher/agent_loop.hpp) and
// the simulator (sim/detail/simulation.hpp) both feed their events through it and apply the
// steps it returns, so a failure decides the same way in both: the same records, the same live
// plans, the same reasons (tests/sim/driver_agreement_property_test.cpp holds it).
//
// What it adds to the machine: live recovery. When the machine answers an event with a
// StopWorkers followed at once by a StartWorkers (a restart or a rescale), the driver asks the
// group what its workers hold (WorkerGroup::liveSituation, before anything is stopped) and
// decides with planLiveRecovery (runtime/agent/live_plan.hpp; the machine's world-size rules
// give the interim batch). A live plan keeps the running workers: the stop step says so and the
// start step carries the plan, for WorkerGroup::continueLive. The event log marks both records
// "recovery": "live", a restart of every worker "checkpoint", and the decision itself is a
// "live_plan" record after the stop's.
//
// Pure: no clock, no I/O; the group is only asked, never changed. Not thread-safe (one driver per
// agent, like the machine it owns).

#include <memory>
#include <vector>

#include "runtime/agent/clock.hpp"
#include "runtime/agent/event_log.hpp"
#include "runtime/agent/live_plan.hpp"
#include "runtime/agent/state_machine.hpp"
#include "runtime/agent/worker_group.hpp"

namespace stretch::agent {

// One action of the machine, and what carrying it out means.
struct DriverStep {
  Action action;
  // What the event log says, in order: the action's record, then, for a stop followed by a start
  // under live recovery, the live_plan record. A start_workers record has no resume_step: the
  // executor knows its checkpoints (or its survivors' step) and fills it in.
  std::vector<EventRecord> records;
  // StopWorkers: the running workers go on into the next start (nothing is stopped now).
  // StartWorkers: carry this plan out (WorkerGroup::continueLive) instead of starting every
  // worker. Null for every other action, and for a stop or start from the checkpoint. (Shared:
  // a plan at 10^4 workers is not copied from step to step.)
  std::shared_ptr<const LivePlan> live;
  // StopWorkers under live recovery: the decision for the start that follows (live or not), for
  // the executor's log; null when no decision was taken.
  std::shared_ptr<const LivePlan> decision;
};

class AgentDriver {
 public:
  // `liveRecovery`: decide each restart with planLiveRecovery (off: every restart stops every
  // worker, and the records carry no "recovery" key). Throws as AgentStateMachine does.
  AgentDriver(const AgentConfig& config, Time now, bool liveRecovery);

  // Feeds `event` (or a tick) to the machine; the steps come in the machine's action order.
  // `group` is asked for its live situation when a restart follows.
  std::vector<DriverStep> handle(Time now, const Event& event, const WorkerGroup& group);
  std::vector<DriverStep> tick(Time now, const WorkerGroup& group);

  const AgentStateMachine& machine() const noexcept { return machine_; }
  bool liveRecovery() const noexcept { return liveRecovery_; }

 private:
  std::vector<DriverStep> drive(Time now, const std::vector<Action>& actions,
                                const WorkerGroup& group);

  AgentStateMachine machine_;
  bool liveRecovery_ = false;
  // The live plan of the next StartWorkers (decided at its stop), or null.
  std::shared_ptr<const LivePlan> pending_;
};

}  // namespace stretch::agent
