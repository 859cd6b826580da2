#pragma once
// URL scheme -> factory registry of rendezvous stores that live in their own modules, so that
// initDistributed (in the third-party-free core) can use them: "redis://" is registered by
// comm::redis::registerRedisStore() (runtime/comm/redis), which registerBuiltinBackends()
// (runtime/comm/builtin) calls in builds with hiredis. The core's own methods (env://, tcp://,
// file://) are not in the registry.

#include <functional>
#include <memory>
#include <string>

#include "runtime/comm/store.hpp"
#include "runtime/comm/types.hpp"

namespace stretch::comm {

// What initDistributed knows when it builds the store of "SCHEME://HOST:PORT[/PATH]".
struct StoreInit {
  std::string url;   // the init method as given, for messages
  std::string host;  // brackets of an IPv6 literal removed
  int port = 0;
  std::string path;  // after "HOST:PORT/", "" when absent
  int rank = 0;
  int worldSize = 1;
  Duration timeout = kDefaultTimeout;
};

// Connects to (or creates) the store; throws StoreError naming the URL's host and port.
using StoreFactory = std::function<std::shared_ptr<Store>(const StoreInit&)>;

// Registering a scheme twice replaces the factory. Thread-safe.
void registerStoreScheme(const std::string& scheme, StoreFactory factory);
bool isStoreSchemeRegistered(const std::string& scheme);
// Throws DistributedInitError naming init.url (and `hint`, how to get the scheme built) when
// `scheme` is not registered.
std::shared_ptr<Store> createStore(const std::string& scheme, const StoreInit& init,
                                   const std::string& hint);

}  // namespace stretch::comm
