#include "runtime/comm/store.hpp"

#include <charconv>
#include <condition_variable>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/comm/errors.hpp"

namespace stretch::comm {

Store::~Store() = default;

void Store::throwTimeout(std::string_view storeName, const std::vector<std::string>& missing,
                         Duration timeout) {
  throw StoreTimeoutError(fmt::format("{}: key{} {} did not appear within {}", storeName,
                                      missing.size() == 1 ? "" : "s", fmt::join(missing, ", "),
                                      formatDuration(timeout)));
}

void Store::checkKey(std::string_view storeName, const std::string& key) {
  if (key.empty())
    throw StoreError(fmt::format("{}: key = \"\": expected a non-empty key", storeName));
}

std::vector<std::optional<std::string>> Store::tryMultiGet(const std::vector<std::string>& keys) {
  for (const auto& key : keys)
    checkKey("Store::tryMultiGet", key);
  std::vector<std::optional<std::string>> out;
  out.reserve(keys.size());
  for (const auto& key : keys)
    out.push_back(check({key}) ? std::optional<std::string>(get(key)) : std::nullopt);
  return out;
}

// ---------------------------------------------------------------------------------------------
// HashStore

struct HashStore::State {
  std::mutex mutex;
  std::condition_variable changed;
  std::unordered_map<std::string, std::string> values;

  bool hasAll(const std::vector<std::string>& keys) const {
    for (const auto& key : keys) {
      if (!values.contains(key))
        return false;
    }
    return true;
  }
  std::vector<std::string> missing(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    for (const auto& key : keys) {
      if (!values.contains(key))
        out.push_back(key);
    }
    return out;
  }
};

namespace {
constexpr std::string_view kHashStoreName = "HashStore";

std::int64_t parseCounter(std::string_view store, const std::string& key,
                          const std::string& value) {
  std::int64_t out = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
  if (ec != std::errc() || end != value.data() + value.size()) {
    throw StoreError(fmt::format("{}: add on key \"{}\" whose value \"{}\" is not an integer",
                                 store, key, value.size() > 64 ? value.substr(0, 64) : value));
  }
  return out;
}
}  // namespace

HashStore::HashStore(Duration timeout) : Store(timeout), state_(std::make_unique<State>()) {}
HashStore::~HashStore() = default;

void HashStore::set(const std::string& key, const std::string& value) {
  checkKey(kHashStoreName, key);
  {
    std::lock_guard lock(state_->mutex);
    state_->values[key] = value;
  }
  state_->changed.notify_all();
}

std::string HashStore::get(const std::string& key) {
  checkKey(kHashStoreName, key);
  wait({key});
  std::lock_guard lock(state_->mutex);
  return state_->values.at(key);
}

std::int64_t HashStore::add(const std::string& key, std::int64_t delta) {
  checkKey(kHashStoreName, key);
  std::int64_t result = 0;
  {
    std::lock_guard lock(state_->mutex);
    auto it = state_->values.find(key);
    const std::int64_t current =
        it == state_->values.end() ? 0 : parseCounter(kHashStoreName, key, it->second);
    result = current + delta;
    state_->values[key] = std::to_string(result);
  }
  state_->changed.notify_all();
  return result;
}

std::string HashStore::compareSet(const std::string& key, const std::string& expected,
                                  const std::string& desired) {
  checkKey(kHashStoreName, key);
  std::string result;
  {
    std::lock_guard lock(state_->mutex);
    auto it = state_->values.find(key);
    if (it == state_->values.end()) {
      if (!expected.empty())
        return expected;
      state_->values[key] = desired;
      result = desired;
    } else if (it->second == expected) {
      it->second = desired;
      result = desired;
    } else {
      return it->second;
    }
  }
  state_->changed.notify_all();
  return result;
}

bool HashStore::check(const std::vector<std::string>& keys) {
  std::lock_guard lock(state_->mutex);
  return state_->hasAll(keys);
}

void HashStore::wait(const std::vector<std::string>& keys, std::optional<Duration> timeout) {
  const Duration limit = timeout.value_or(this->timeout());
  std::unique_lock lock(state_->mutex);
  if (!state_->changed.wait_for(lock, limit, [&] { return state_->hasAll(keys); }))
    throwTimeout(kHashStoreName, state_->missing(keys), limit);
}

bool HashStore::deleteKey(const std::string& key) {
  std::lock_guard lock(state_->mutex);
  return state_->values.erase(key) > 0;
}

std::vector<std::optional<std::string>> HashStore::tryMultiGet(
    const std::vector<std::string>& keys) {
  std::vector<std::optional<std::string>> out;
  out.reserve(keys.size());
  std::lock_guard lock(state_->mutex);
  for (const auto& key : keys) {
    checkKey(kHashStoreName, key);
    const auto it = state_->values.find(key);
    out.push_back(it == state_->values.end() ? std::nullopt
                                             : std::optional<std::string>(it->second));
  }
  return out;
}

std::int64_t HashStore::numKeys() {
  std::lock_guard lock(state_->mutex);
  return static_cast<std::int64_t>(state_->values.size());
}

// ---------------------------------------------------------------------------------------------
// ForwardingStore

ForwardingStore::ForwardingStore(std::shared_ptr<Store> inner, std::string_view name)
    : Store(inner ? inner->timeout() : kDefaultTimeout), inner_(std::move(inner)) {
  if (!inner_)
    throw StoreError(fmt::format("{}: underlying store is null", name));
}

std::string ForwardingStore::innerKey(const std::string& key) const {
  return key;
}

std::vector<std::string> ForwardingStore::innerKeys(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& key : keys)
    out.push_back(innerKey(key));
  return out;
}

void ForwardingStore::set(const std::string& key, const std::string& value) {
  inner_->set(innerKey(key), value);
}

std::string ForwardingStore::get(const std::string& key) {
  wait({key});
  return inner_->get(innerKey(key));
}

std::int64_t ForwardingStore::add(const std::string& key, std::int64_t delta) {
  return inner_->add(innerKey(key), delta);
}

std::string ForwardingStore::compareSet(const std::string& key, const std::string& expected,
                                        const std::string& desired) {
  return inner_->compareSet(innerKey(key), expected, desired);
}

bool ForwardingStore::check(const std::vector<std::string>& keys) {
  return inner_->check(innerKeys(keys));
}

void ForwardingStore::wait(const std::vector<std::string>& keys, std::optional<Duration> timeout) {
  inner_->wait(innerKeys(keys), timeout.value_or(this->timeout()));
}

bool ForwardingStore::deleteKey(const std::string& key) {
  return inner_->deleteKey(innerKey(key));
}

std::vector<std::optional<std::string>> ForwardingStore::tryMultiGet(
    const std::vector<std::string>& keys) {
  return inner_->tryMultiGet(innerKeys(keys));
}

std::int64_t ForwardingStore::numKeys() {
  return inner_->numKeys();
}

// ---------------------------------------------------------------------------------------------
// PrefixStore

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> store)
    : ForwardingStore(std::move(store), fmt::format("PrefixStore \"{}\"", prefix)),
      prefix_(std::move(prefix)) {}

std::string PrefixStore::innerKey(const std::string& key) const {
  checkKey(fmt::format("PrefixStore \"{}\"", prefix_), key);
  return prefix_ + "/" + key;
}

}  // namespace stretch::comm
