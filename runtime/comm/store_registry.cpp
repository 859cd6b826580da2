#include "runtime/comm/store_registry.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/comm/detail/named_registry.hpp"
#include "runtime/comm/errors.hpp"

namespace stretch::comm {

namespace {

detail::NamedRegistry<StoreFactory>& registry() {
  static detail::NamedRegistry<StoreFactory> instance;
  return instance;
}

}  // namespace

void registerStoreScheme(const std::string& scheme, StoreFactory factory) {
  registry().set(scheme, std::move(factory));
}

bool isStoreSchemeRegistered(const std::string& scheme) {
  return registry().contains(scheme);
}

std::shared_ptr<Store> createStore(const std::string& scheme, const StoreInit& init,
                                   const std::string& hint) {
  const std::optional<StoreFactory> factory = registry().find(scheme);
  if (!factory) {
    std::vector<std::string> schemes = registry().names();
    for (std::string& known : schemes)
      known += "://";
    throw DistributedInitError(ErrorDetail{
        "init_method", fmt::format("\"{}\"", init.url),
        fmt::format("a store built into this program ({}); {}",
                    schemes.empty()
                        ? std::string("none are registered besides env://, tcp:// and file://")
                        : fmt::format("registered: {}", fmt::join(schemes, ", ")),
                    hint)});
  }
  return (*factory)(init);
}

}  // namespace stretch::comm
