# The backend contract suite (included by tests/runtime/comm/CMakeLists.txt): in-process always,
# Gloo when it was built (threads over a HashStore), and Gloo across real processes.
stretch_add_test(backend_contract_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/backend_contract_test.cpp
  DEPS stretch_comm stretch_comm_builtin stretch_sim  # the simulator's functional backend too
  LABELS unit
  TIMEOUT 600)

if(TARGET stretch_comm_gloo)
  # Forked ranks on loopback: launcher and OpenMPI environments, FileStore, a peer that never
  # joins and one killed mid-operation.
  stretch_add_test(gloo_process_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/gloo_process_test.cpp
    DEPS stretch_comm stretch_comm_builtin
    LABELS integration
    TIMEOUT 300)
endif()
