#pragma once
// Where a worker finds its agent's store: the launcher gives every worker STRETCH_AGENT_STORE
// (HOST:PORT) and STRETCH_STORE_TOKEN (runtime/common/worker_variables.hpp). Read the same way
// by the C++ engine (LiveRecovery::fromEnvironment) and by stretch.torch (python/live.cpp).

#include <optional>

#include "runtime/comm/tcp_store.hpp"

namespace stretch::live {

// Client options for the agent's store (host, port, token; the other fields their defaults), or
// nullopt when STRETCH_AGENT_STORE is unset or empty: no live-capable launcher started this
// process. Throws ConfigError naming the variable when its value is not HOST:PORT with a port
// in 1..65535.
std::optional<comm::TcpStoreOptions> agentStoreFromEnvironment();

}  // namespace stretch::live
