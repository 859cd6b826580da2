#include "runtime/agent/driver.hpp"

namespace stretch::agent {

AgentDriver::AgentDriver(const AgentConfig& config, Time now, bool liveRecovery)
    : machine_(config, now), liveRecovery_(liveRecovery) {}

std::vector<DriverStep> AgentDriver::handle(Time now, const Event& event,
                                            const WorkerGroup& group) {
  return drive(now, machine_.handle(now, event), group);
}

std::vector<DriverStep> AgentDriver::tick(Time now, const WorkerGroup& group) {
  return drive(now, machine_.tick(now), group);
}

std::vector<DriverStep> AgentDriver::drive(Time now, const std::vector<Action>& actions,
                                           const WorkerGroup& group) {
  std::vector<DriverStep> steps;
  steps.reserve(actions.size());
  for (std::size_t index = 0; index < actions.size(); ++index) {
    DriverStep step{actions[index], {recordOf(actions[index], now)}, nullptr, nullptr};
    EventRecord& record = step.records.front();
    if (std::holds_alternative<StopWorkers>(step.action)) {
      pending_.reset();
      const auto* next =
          index + 1 < actions.size() ? std::get_if<StartWorkers>(&actions[index + 1]) : nullptr;
      if (liveRecovery_ && next != nullptr) {
        if (const auto situation = group.liveSituation(*next)) {
          step.decision = std::make_shared<const LivePlan>(
              planLiveRecovery(*situation, *next, machine_.rules()));
          if (step.decision->live)
            pending_ = step.decision;
        }
      }
      step.live = pending_;
      if (liveRecovery_)
        record.recovery = pending_ ? "live" : "checkpoint";
      if (step.decision)
        step.records.push_back(recordOf(*step.decision, *next, now));
    } else if (const auto* start = std::get_if<StartWorkers>(&step.action)) {
      step.live = std::move(pending_);
      pending_.reset();
      if (liveRecovery_ && start->generation > 1)
        record.recovery = step.live ? "live" : "checkpoint";
    }
    steps.push_back(std::move(step));
  }
  return steps;
}

}  // namespace stretch::agent
