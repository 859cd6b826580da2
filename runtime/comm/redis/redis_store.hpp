#pragma once
// RedisStore: a Store kept in a Redis server, for jobs whose rendezvous traffic outgrows one
// TCPStore thread or that already run a Redis for their scheduler. Keys are binary-safe; values
// are plain Redis strings, so `redis-cli GET <prefix><key>` shows what the ranks see.
//
// Behaviour beyond the Store contract:
//  - add() is INCRBY (Redis keeps the decimal text the contract asks for); compareSet() is one
//    Lua script, atomic on the server; wait() and get() poll with a short backoff (1 ms doubling
//    to 50 ms) until the timeout, since Redis has no "notify when a key appears" for plain keys.
//  - Every key is stored as keyPrefix + key, so several jobs can share one Redis; numKeys()
//    counts only keys under the prefix (SCAN, O(keys in the database)) or the whole database
//    (DBSIZE) when the prefix is empty.
//  - One connection per RedisStore, guarded by a mutex: calls from several threads serialise,
//    but a waiting thread does not hold the connection while it sleeps between polls. A lost
//    connection is re-established on the next call.
// Errors are StoreError (StoreTimeoutError for wait/get) naming host:port and, where Redis
// answered, Redis's own reply.

#include <memory>
#include <string>

#include "runtime/comm/store.hpp"

namespace stretch::comm::redis {

struct RedisStoreOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string password;                // sent with AUTH when not empty
  std::string keyPrefix;               // prepended verbatim to every key, e.g. "stretch/job42/"
  Duration timeout = kDefaultTimeout;  // connect (with retries), get and wait timeout
};

class RedisStore final : public Store {
 public:
  // Connects (retrying until options.timeout); throws StoreError naming host:port and the last
  // error, or Redis's reply to AUTH.
  explicit RedisStore(const RedisStoreOptions& options);
  ~RedisStore() override;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  std::string compareSet(const std::string& key, const std::string& expected,
                         const std::string& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            std::optional<Duration> timeout = std::nullopt) override;
  bool deleteKey(const std::string& key) override;
  std::int64_t numKeys() override;

  const RedisStoreOptions& options() const noexcept { return options_; }

 private:
  struct Connection;
  RedisStoreOptions options_;
  std::unique_ptr<Connection> connection_;
};

// Registers the "redis" scheme with runtime/comm/store_registry.hpp, so that
// initDistributed("redis://HOST:PORT[/PREFIX]") builds a RedisStore on HOST:PORT with keyPrefix
// "PREFIX/" ("stretch/" without one), the init timeout, and the password from the
// STRETCH_REDIS_PASSWORD environment variable (none when unset; a URL would show it in every
// message). registerBuiltinBackends() (runtime/comm/builtin) calls it. Idempotent.
void registerRedisStore();

// The hiredis version this module was compiled against ("1.1.0", from hiredis.h), so that
// executables need not include hiredis's headers.
std::string hiredisVersion();

}  // namespace stretch::comm::redis
