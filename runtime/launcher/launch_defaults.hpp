#pragma once
// The launcher's timing defaults, each written once. The option structs start from them
// (LaunchRequest and JoinRequest in seconds, for their command-line flags; NodeAgentOptions,
// LocalAgentOptions, JobControllerOptions, JobSettings as Durations), and `stretch launch
// --help` / `stretch agent --help` print them through those structs.

#include <chrono>

#include "runtime/agent/clock.hpp"
#include "runtime/agent/hang_rule.hpp"

namespace stretch::launcher {

// --hang_timeout: the floor of a worker's hang limit (agent::HangPolicy).
inline constexpr agent::Duration kDefaultHangTimeout = agent::kDefaultHangTimeout;
// --monitor_interval: between an agent's looks at its workers.
inline constexpr agent::Duration kDefaultMonitorInterval = std::chrono::seconds(1);
// --keepalive_timeout: a node whose keep-alives stop this long counts as lost.
inline constexpr agent::Duration kDefaultKeepAliveTimeout = std::chrono::seconds(5);
// --last_call: how long a multi-node elastic job waits for more nodes before (re)starting.
inline constexpr agent::Duration kDefaultLastCall = std::chrono::seconds(2);
// stretch agent --keepalive_interval: between a node agent's keep-alives (the only periodic
// request of an idle agent, with its command wait's; the controller reads each node's counter
// as often, at most every keep-alive timeout / 4).
inline constexpr agent::Duration kDefaultKeepAliveInterval = std::chrono::seconds(1);
// stretch agent --controller_timeout: this long after the job's store last answered, a node
// agent stops its workers and exits (every connect attempt and store request within it is
// bounded by what is left of it, so the timeout is what the agent applies).
inline constexpr agent::Duration kDefaultControllerTimeout = std::chrono::seconds(30);
// The agents `stretch launch` starts get --controller_timeout = this many --keepalive_timeout.
inline constexpr int kControllerTimeoutFactor = 3;
// A node agent's keep-alive gives up on one beat (its connect or its request) after its
// interval, at least this long, and tries again at the next beat: an agent that ends waits for
// the beat in flight, so no longer than that.
inline constexpr agent::Duration kMinKeepAliveRequestTimeout = std::chrono::milliseconds(250);
// Between SIGTERM and SIGKILL when an agent stops its workers.
inline constexpr agent::Duration kDefaultStopGrace = std::chrono::seconds(5);
inline constexpr auto kDefaultStopGraceMs =
    std::chrono::duration_cast<std::chrono::milliseconds>(kDefaultStopGrace);
// The launcher's clients of the job's store (and its server's) wait this long for a key.
inline constexpr agent::Duration kLauncherStoreTimeout = std::chrono::seconds(30);
// Live recovery: how long the agent waits for a generation's donors to report their copies
// given before it releases them anyway (the donors' records in the store decide otherwise).
inline constexpr agent::Duration kDonorReleaseWait = std::chrono::minutes(1);

}  // namespace stretch::launcher
