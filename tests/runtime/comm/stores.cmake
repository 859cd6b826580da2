# Store tests: the Store contract over every implementation, TCPStore's hardening, RedisStore
# and initDistributed over redis://.
# Included from tests/runtime/comm/CMakeLists.txt.

set(_stretch_store_deps stretch_comm)
set(_stretch_store_defs)
if(TARGET stretch_comm_redis)
  list(APPEND _stretch_store_deps stretch_comm_redis)
  list(APPEND _stretch_store_defs STRETCH_TEST_HAVE_REDIS_STORE=1)
endif()
if(STRETCH_REDIS_SERVER)
  list(APPEND _stretch_store_defs STRETCH_REDIS_SERVER="${STRETCH_REDIS_SERVER}")
endif()

# HashStore, FileStore, TCPStore and each inside a PrefixStore: threads in one process.
stretch_add_test(store_contract_test
  SOURCES store_contract_test.cpp
  DEPS ${_stretch_store_deps}
  LABELS unit)
target_compile_definitions(store_contract_test PRIVATE ${_stretch_store_defs}
                                                       STRETCH_STORE_TEST_INTEGRATION=0)

# RedisStore against a private redis-server, and forked processes on FileStore and TCPStore.
stretch_add_test(store_integration_test
  SOURCES store_contract_test.cpp
  DEPS ${_stretch_store_deps}
  LABELS integration
  TIMEOUT 180)
target_compile_definitions(store_integration_test PRIVATE ${_stretch_store_defs}
                                                          STRETCH_STORE_TEST_INTEGRATION=1)

# TCPStore against hostile and broken clients (rapidcheck prints its seed).
stretch_add_test(tcp_store_security_test
  SOURCES tcp_store_security_test.cpp
  DEPS stretch_comm rapidcheck
  LABELS unit)

# TCPStore at scale (issue 43): many waiters woken by one set, withdrawn waiters forgotten, a
# connection storm from one address, the per-address cap option.
stretch_add_test(tcp_store_scale_test
  SOURCES tcp_store_scale_test.cpp
  DEPS stretch_comm
  LABELS unit)

# initDistributed("redis://...") as a user reaches it (registerBuiltinBackends), in forked ranks
# against a private redis-server.
if(TARGET stretch_comm_redis)
  stretch_add_test(redis_init_test
    SOURCES redis_init_test.cpp
    DEPS stretch_comm stretch_comm_builtin stretch_comm_redis
    LABELS integration
    TIMEOUT 300)
  target_compile_definitions(redis_init_test PRIVATE ${_stretch_store_defs})
endif()
