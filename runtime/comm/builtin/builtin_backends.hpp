#pragma once
// Registers every communication backend this build contains (Gloo, NCCL) with the registry
// in runtime/comm/backend_registry.hpp, and every store scheme (redis://, with hiredis) with
// runtime/comm/store_registry.hpp, so that initDistributed with backend "gloo" or init method
// "redis://..." works in any program that links stretch_comm_builtin. Idempotent and
// thread-safe.

#include <string>
#include <vector>

namespace stretch::comm {

void registerBuiltinBackends();

// Names of the backends compiled into this build ("gloo", "nccl"), whether or not registered.
std::vector<std::string> builtinBackendNames();

}  // namespace stretch::comm
