#include "runtime/comm/backend_registry.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/comm/detail/named_registry.hpp"
#include "runtime/comm/errors.hpp"

namespace stretch::comm {

namespace {

struct Entry {
  BackendInfo info;
  BackendFactory factory;
};

detail::NamedRegistry<Entry>& registry() {
  static detail::NamedRegistry<Entry> instance;
  return instance;
}

}  // namespace

void registerBackend(const BackendInfo& info, BackendFactory factory) {
  registry().set(info.name, Entry{info, std::move(factory)});
}

bool isBackendRegistered(const std::string& name) {
  return registry().contains(name);
}

std::vector<BackendInfo> registeredBackends() {
  std::vector<BackendInfo> out;
  for (const Entry& entry : registry().values())
    out.push_back(entry.info);
  return out;
}

std::shared_ptr<Backend> createBackend(const std::string& name, const BackendInit& init) {
  const std::optional<Entry> entry = registry().find(name);
  if (!entry) {
    const std::vector<std::string> names = registry().names();
    throw DistributedInitError(ErrorDetail{
        "backend", fmt::format("\"{}\"", name),
        names.empty() ? std::string("a backend built into this program (none are registered)")
                      : fmt::format("one of the built backends: {}", fmt::join(names, ", "))});
  }
  return entry->factory(init);
}

}  // namespace stretch::comm
