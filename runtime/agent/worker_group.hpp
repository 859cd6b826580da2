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

#include <optional>
#include <string>
#include <vector>

#include "runtime/agent/live_plan.hpp"
#include "runtime/agent/state_machine.hpp"

namespace stretch::agent {

class WorkerGroup {
 public:
  virtual ~WorkerGroup() = default;

  virtual void start(const StartWorkers& action) = 0;
  virtual void stop() = 0;
  virtual std::vector<WorkerExited> poll() = 0;
  // Live recovery (runtime/agent/live_plan.hpp). What the running workers hold, for
  // planLiveRecovery, asked before their generation is stopped; nullopt when this group cannot
  // keep workers into `next` at all (live recovery off, or a layout it does not own).
  virtual std::optional<LiveSituation> liveSituation(const StartWorkers& /*next*/) const {
    return std::nullopt;
  }
  // Starts generation `action` by carrying out `plan` (a live plan for `action` made from this
  // group's liveSituation): the kept workers go on, the others stop, the joiners start, the
  // live generations are published. Exits reported afterwards carry action.generation.
  virtual void continueLive(const StartWorkers& /*action*/, const LivePlan& /*plan*/) {}
  // The nodes of `action` this group already knows are gone (their agent left, or stopped
  // answering a command), asked before the start is carried out: a start naming them would be
  // logged for nodes that can run nothing. The loop then skips the start and feeds the machine
  // these departures instead, so that it plans the start again without them. Default: none (a
  // group that learns of departures only through the events it reports).
  virtual std::vector<NodeLeft> goneNodes(const StartWorkers& /*action*/) const { return {}; }
  // Output of the workers that could not be written (a rank log on a full disk), one line per
  // file, since the group was made.
  virtual std::vector<std::string> lostOutput() const { return {}; }
  // What went wrong with the group's own files since the last call (a log or config copy that
  // could not be written, a link planted at a log path), already reported on stderr, one line
  // each, for the event log. The job goes on.
  virtual std::vector<std::string> takeProblems() { return {}; }
};

}  // namespace stretch::agent
