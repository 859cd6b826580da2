#pragma once
// WorkerGroup: what the agent loop needs from the workers it runs. The loop feeds the
// AgentStateMachine the exits poll() reports and carries out its StartWorkers / StopWorkers
// actions through start() and stop(). Implementations: real processes on one node (the
// launcher), simulated workers (the discrete-event simulator), scripted fakes in tests.
//
// Contract:
//  - start(action) launches the workers `action` assigns to the nodes this group owns (a node's
//    own NodeAssignment for a real agent; every node for the simulator) and returns once they
//    are launched, not finished. Each worker gets its global rank, local rank, the world size,
//    the node rank and the batch triple of `action`. A failure to launch is reported as an exit
//    with a non-zero code through poll(), or thrown as stretch::Error when nothing could start.
//  - stop() stops every worker it started (terminate, then kill after a grace period) and
//    returns when all of them are gone. Exits of stopped workers are not reported afterwards
//    (a late report would be ignored anyway: it names an old generation).
//  - poll() never blocks: it returns the exits seen since the previous call, each once, with
//    the generation of the StartWorkers that started the worker.
//  - Not thread-safe: one agent loop drives one group.

#include <vector>

#include "runtime/agent/state_machine.hpp"

namespace stretch::agent {

class WorkerGroup {
 public:
  virtual ~WorkerGroup() = default;

  virtual void start(const StartWorkers& action) = 0;
  virtual void stop() = 0;
  virtual std::vector<WorkerExited> poll() = 0;
  // Live recovery: starts generation `action` keeping the workers that still run and fit its
  // layout (they continue in the new generation), stopping those that do not and starting only
  // the missing ones. Returns false when this group cannot (the caller then stops and starts
  // as usual). Exits reported afterwards carry action.generation.
  virtual bool continueLive(const StartWorkers& /*action*/) { return false; }
  // Whether continueLive(next) would keep workers running (asked before their generation is
  // stopped).
  virtual bool canContinueLive(const StartWorkers& /*next*/) const { return false; }
};

}  // namespace stretch::agent
