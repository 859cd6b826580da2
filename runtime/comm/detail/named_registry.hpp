#pragma once
// A thread-safe name -> value map: the shape of the backend registry (backend_registry.hpp) and
// the store-scheme registry (store_registry.hpp). Private to runtime/comm.

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace stretch::comm::detail {

template <typename Value>
class NamedRegistry {
 public:
  // Setting a name twice replaces its value.
  void set(const std::string& name, Value value) {
    std::lock_guard lock(mutex_);
    entries_[name] = std::move(value);
  }
  bool contains(const std::string& name) const {
    std::lock_guard lock(mutex_);
    return entries_.contains(name);
  }
  // A copy, so the caller may use it (call a factory) without holding the lock.
  std::optional<Value> find(const std::string& name) const {
    std::lock_guard lock(mutex_);
    const auto it = entries_.find(name);
    return it == entries_.end() ? std::nullopt : std::optional<Value>(it->second);
  }
  // In name order.
  std::vector<std::string> names() const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (const auto& entry : entries_)
      out.push_back(entry.first);
    return out;
  }
  std::vector<Value> values() const {
    std::lock_guard lock(mutex_);
    std::vector<Value> out;
    for (const auto& entry : entries_)
      out.push_back(entry.second);
    return out;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, Value> entries_;
};

}  // namespace stretch::comm::detail
