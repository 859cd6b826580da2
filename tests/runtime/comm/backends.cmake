# The backend contract suite (included by tests/runtime/comm/CMakeLists.txt): in-process always,
# Gloo when it was built (threads over a HashStore), and Gloo across real processes.
stretch_add_test(backend_contract_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/backend_contract_test.cpp
  DEPS stretch_comm stretch_comm_builtin
  LABELS unit
  TIMEOUT 600)
if(TARGET stretch_sim)
  # The simulator's functional backend keeps the same contract (sim/sim_backend.hpp).
  target_link_libraries(backend_contract_test PRIVATE stretch_sim)
  target_compile_definitions(backend_contract_test PRIVATE STRETCH_HAVE_SIM=1)
endif()

if(TARGET stretch_comm_gloo)
  # Forked ranks on loopback: launcher and OpenMPI environments, FileStore, a peer that never
  # joins and one killed mid-operation.
  stretch_add_test(gloo_process_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/gloo_process_test.cpp
    DEPS stretch_comm stretch_comm_builtin
    LABELS integration
    TIMEOUT 300)
endif()
