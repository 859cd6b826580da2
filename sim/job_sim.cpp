#include "sim/job_sim.hpp"

#include "sim/detail/simulation.hpp"

namespace stretch::sim {

std::string_view toString(Outcome outcome) noexcept {
  switch (outcome) {
    case Outcome::Finished:
      return "finished";
    case Outcome::Failed:
      return "failed";
    case Outcome::Horizon:
      return "horizon";
    case Outcome::Stalled:
      return "stalled";
    case Outcome::TimeLimit:
      return "time_limit";
  }
  return "?";
}

agent::AgentConfig agentConfigFor(const Scenario& scenario) {
  return detail::Simulation::makeAgentConfig(scenario);
}

RunResult simulate(const Scenario& scenario, const RunOptions& options) {
  detail::Simulation simulation(scenario, options);
  return simulation.run();
}

}  // namespace stretch::sim
