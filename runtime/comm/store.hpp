#pragma once
// The key-value store ranks rendezvous through (c10d's Store): the Gloo and NCCL backends
// exchange addresses and ids in it, the elastic agent keeps its rendezvous state in it.
//
// Contract, for every implementation (tests/runtime/comm/store_contract_test.cpp runs it):
//  - Keys are non-empty strings; values are arbitrary bytes held in std::string.
//  - get() and wait() block until every key exists or the store's timeout (or the one given)
//    has passed, then throw StoreTimeoutError naming the missing keys and the timeout.
//  - add() treats a missing key as 0 and stores the result as decimal text, so get() of an
//    added key returns e.g. "3"; add() on a non-numeric value throws StoreError.
//  - compareSet(key, expected, desired): if the key is missing and expected is empty, or the
//    value equals expected, the value becomes desired; returns the value stored afterwards
//    (expected itself when the key is missing and expected is not empty).
//  - tryMultiGet(keys) returns, in order, each key's value as it is now, nullopt for a key that
//    does not exist; it never blocks (nor creates a key).
//  - Implementations are safe to call from several threads at once; a Store object may be
//    shared by several backends (through PrefixStore).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/comm/types.hpp"

namespace stretch::comm {

class Store {
 public:
  explicit Store(Duration timeout = kDefaultTimeout) : timeout_(timeout) {}
  virtual ~Store();

  virtual void set(const std::string& key, const std::string& value) = 0;
  // Waits for the key (up to timeout()) and returns its value.
  virtual std::string get(const std::string& key) = 0;
  // Atomically adds `delta` to the integer at `key` (missing = 0) and returns the new value.
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
  virtual std::string compareSet(const std::string& key, const std::string& expected,
                                 const std::string& desired) = 0;
  // True when every key exists now. Never blocks.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // Blocks until every key exists; throws StoreTimeoutError after `timeout` (default timeout()).
  virtual void wait(const std::vector<std::string>& keys,
                    std::optional<Duration> timeout = std::nullopt) = 0;
  // Removes the key; false when it did not exist.
  virtual bool deleteKey(const std::string& key) = 0;
  // The values of `keys` now, in order; nullopt for a key that does not exist. Never blocks.
  // TcpStore answers it with one request however many keys (the job controller reads every
  // node's keep-alive counter so); this default (FileStore, RedisStore) asks check() and get()
  // per key, so a key deleted between the two makes its get() wait up to the timeout.
  virtual std::vector<std::optional<std::string>> tryMultiGet(const std::vector<std::string>& keys);
  // Number of keys currently held (for a PrefixStore: in the whole underlying store).
  virtual std::int64_t numKeys() = 0;

  Duration timeout() const noexcept { return timeout_; }
  void setTimeout(Duration timeout) noexcept { timeout_ = timeout; }

 protected:
  [[noreturn]] static void throwTimeout(std::string_view storeName,
                                        const std::vector<std::string>& missing, Duration timeout);
  // Validates a key (non-empty); throws StoreError naming the store otherwise.
  static void checkKey(std::string_view storeName, const std::string& key);

 private:
  Duration timeout_;
};

// Keys live in this process only; for ranks that are threads (tests, the simulator).
class HashStore final : public Store {
 public:
  explicit HashStore(Duration timeout = kDefaultTimeout);
  ~HashStore() override;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  std::string compareSet(const std::string& key, const std::string& expected,
                         const std::string& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            std::optional<Duration> timeout = std::nullopt) override;
  bool deleteKey(const std::string& key) override;
  std::vector<std::optional<std::string>> tryMultiGet(
      const std::vector<std::string>& keys) override;
  std::int64_t numKeys() override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Forwards every method to an inner store: the base of a store that changes only part of what
// the inner one does (PrefixStore renames keys; live recovery's generation store gives up its
// waits once superseded; tests' stores that stall or fail). It keeps a timeout of its own,
// initially the inner store's: get() and wait() without a timeout wait for timeout(). get()
// waits through wait(), so an override of wait() governs both.
//
// A derived class overrides what it changes, and innerKey() when it renames keys: every forwarded
// key passes through it. Throws StoreError naming `name` when `inner` is null.
class ForwardingStore : public Store {
 public:
  explicit ForwardingStore(std::shared_ptr<Store> inner, std::string_view name = "ForwardingStore");

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  std::string compareSet(const std::string& key, const std::string& expected,
                         const std::string& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            std::optional<Duration> timeout = std::nullopt) override;
  bool deleteKey(const std::string& key) override;
  std::vector<std::optional<std::string>> tryMultiGet(
      const std::vector<std::string>& keys) override;
  std::int64_t numKeys() override;

  const std::shared_ptr<Store>& underlying() const noexcept { return inner_; }

 protected:
  // The inner store's name for `key`: `key` itself unless a derived class renames keys.
  virtual std::string innerKey(const std::string& key) const;
  std::vector<std::string> innerKeys(const std::vector<std::string>& keys) const;
  Store& inner() const noexcept { return *inner_; }

 private:
  std::shared_ptr<Store> inner_;
};

// Prepends "<prefix>/" to every key of an underlying store, so several groups or generations
// share one server without seeing each other's keys. Timeouts default to the underlying one.
class PrefixStore final : public ForwardingStore {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> store);

  const std::string& prefix() const noexcept { return prefix_; }

 protected:
  std::string innerKey(const std::string& key) const override;

 private:
  std::string prefix_;
};

}  // namespace stretch::comm
