#include "runtime/comm/backend_registry.hpp"

#include <map>
#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/comm/errors.hpp"

namespace stretch::comm {

namespace {
struct Entry {
  BackendInfo info;
  BackendFactory factory;
};

struct Registry {
  std::mutex mutex;
  std::map<std::string, Entry> entries;
};

Registry& registry() {
  static Registry instance;
  return instance;
}
}  // namespace

void registerBackend(const BackendInfo& info, BackendFactory factory) {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  r.entries[info.name] = Entry{info, std::move(factory)};
}

bool isBackendRegistered(const std::string& name) {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  return r.entries.contains(name);
}

std::vector<BackendInfo> registeredBackends() {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<BackendInfo> out;
  for (const auto& [name, entry] : r.entries)
    out.push_back(entry.info);
  return out;
}

std::shared_ptr<Backend> createBackend(const std::string& name, const BackendInit& init) {
  BackendFactory factory;
  {
    auto& r = registry();
    std::lock_guard lock(r.mutex);
    auto it = r.entries.find(name);
    if (it == r.entries.end()) {
      std::vector<std::string> names;
      for (const auto& [known, entry] : r.entries)
        names.push_back(known);
      throw DistributedInitError(ErrorDetail{
          "backend", fmt::format("\"{}\"", name),
          names.empty() ? std::string("a backend built into this program (none are registered)")
                        : fmt::format("one of the built backends: {}", fmt::join(names, ", "))});
    }
    factory = it->second.factory;
  }
  return factory(init);
}

}  // namespace stretch::comm
