#include "runtime/comm/communicator.hpp"

#include <map>
#include <mutex>
#include <tuple>

#include <fmt/format.h>

namespace stretch::comm {

std::string CommunicatorFeatures::version() const {
  return fmt::format("{}.{}.{}", major, minor, patch);
}

CommunicatorFeatures ncclFeatures(int major, int minor, int patch) {
  CommunicatorFeatures features;
  features.library = "nccl";
  features.major = major;
  features.minor = minor;
  features.patch = patch;
  // A tuple compare, so that a later major (3.0) has everything 2.x introduced.
  const auto since = [&](int sinceMinor) {
    return std::tie(major, minor) >= std::make_tuple(2, sinceMinor);
  };
  features.shrink = since(27);
  features.revoke = since(28);
  features.grow = since(29);
  features.abortParentAfterAbortiveShrink = since(31);
  return features;
}

Communicator::~Communicator() = default;
CommunicatorLibrary::~CommunicatorLibrary() = default;

namespace {

// One registered name. Its own mutex serialises the lazy make, so that a slow one (the NCCL
// library initialises CUDA) holds up only callers of that name, never the whole registry, and
// still runs once.
struct LibraryEntry {
  std::function<std::shared_ptr<CommunicatorLibrary>()> make;
  std::mutex mutex;
  bool made = false;  // make returned (a nullptr it returned is kept too: it is not called again)
  std::shared_ptr<CommunicatorLibrary> library;
};

struct LibraryRegistry {
  std::mutex mutex;
  // Entries are never removed, so a pointer taken under the lock stays valid after it.
  std::map<std::string, std::shared_ptr<LibraryEntry>, std::less<>> entries;
};

LibraryRegistry& libraryRegistry() {
  static LibraryRegistry instance;
  return instance;
}

}  // namespace

std::shared_ptr<CommunicatorLibrary> communicatorLibrary(std::string_view name) {
  std::shared_ptr<LibraryEntry> entry;
  {
    auto& registry = libraryRegistry();
    std::lock_guard lock(registry.mutex);
    const auto it = registry.entries.find(name);
    if (it == registry.entries.end())
      return nullptr;
    entry = it->second;
  }
  std::lock_guard lock(entry->mutex);
  if (!entry->made) {
    // A make that throws made nothing: the exception reaches this caller and the next one tries
    // again.
    entry->library = entry->make();
    entry->made = true;
    entry->make = nullptr;  // what it captured is no longer needed
  }
  return entry->library;
}

void registerCommunicatorLibrary(std::string name,
                                 std::function<std::shared_ptr<CommunicatorLibrary>()> make) {
  auto& registry = libraryRegistry();
  std::lock_guard lock(registry.mutex);
  if (registry.entries.contains(name))
    return;  // the first registration stands (its library may be made and in use already)
  auto entry = std::make_shared<LibraryEntry>();
  entry->make = std::move(make);
  registry.entries.emplace(std::move(name), std::move(entry));
}

}  // namespace stretch::comm
