#include "runtime/comm/builtin/builtin_backends.hpp"

#include <mutex>

#ifdef STRETCH_HAVE_GLOO
#include "runtime/comm/gloo/gloo_backend.hpp"
#endif
#ifdef STRETCH_HAVE_NCCL
#include "runtime/comm/nccl/nccl_backend.hpp"
#endif
#ifdef STRETCH_HAVE_REDIS
#include "runtime/comm/redis/redis_store.hpp"
#endif

namespace stretch::comm {

void registerBuiltinBackends() {
  static std::once_flag once;
  std::call_once(once, [] {
#ifdef STRETCH_HAVE_GLOO
    gloo::registerGlooBackend();
#endif
#ifdef STRETCH_HAVE_NCCL
    nccl::registerNcclBackend();
#endif
#ifdef STRETCH_HAVE_REDIS
    redis::registerRedisStore();
#endif
  });
}

std::vector<std::string> builtinBackendNames() {
  std::vector<std::string> names;
#ifdef STRETCH_HAVE_GLOO
  names.emplace_back("gloo");
#endif
#ifdef STRETCH_HAVE_NCCL
  names.emplace_back("nccl");
#endif
  return names;
}

}  // namespace stretch::comm
