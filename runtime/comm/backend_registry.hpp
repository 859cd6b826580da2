#pragma once
// Name -> factory registry of backends, so that initDistributed (in the third-party-free core)
// can build Gloo or NCCL backends that live in their own modules. Each backend module exposes a
// register function (comm::gloo::registerGlooBackend(), comm::nccl::registerNcclBackend());
// executables call the ones they link, or registerBuiltinBackends() from
// runtime/comm/builtin_backends.hpp.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/comm/backend.hpp"
#include "runtime/comm/store.hpp"

namespace stretch::comm {

struct BackendInit {
  std::shared_ptr<Store> store;  // already prefixed for this group
  int rank = 0;
  int size = 1;
  Duration timeout = kDefaultTimeout;
  std::string groupName = "default";
  std::string host = "127.0.0.1";  // interface address the backend's transport binds to
  int localRank = 0;               // picks the GPU for device backends
};

using BackendFactory = std::function<std::shared_ptr<Backend>(const BackendInit&)>;

struct BackendInfo {
  std::string name;
  DeviceType device;        // the device whose buffers it serves
  std::string description;  // "Gloo 0.5.0 (TCP transport)"
};

// Registering a name twice replaces the factory. Thread-safe.
void registerBackend(const BackendInfo& info, BackendFactory factory);
bool isBackendRegistered(const std::string& name);
std::vector<BackendInfo> registeredBackends();
// Throws DistributedInitError listing the registered names when `name` is unknown.
std::shared_ptr<Backend> createBackend(const std::string& name, const BackendInit& init);

}  // namespace stretch::comm
