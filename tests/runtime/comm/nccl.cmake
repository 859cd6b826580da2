# NCCL backend tests (included by tests/runtime/comm/CMakeLists.txt). Built with NCCL and CUDA;
# labelled gpu: every test that needs a device skips with the CUDA runtime's reason without one.
if(STRETCH_WITH_NCCL_ENABLED)
  stretch_add_test(nccl_backend_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/nccl_backend_test.cpp
    DEPS stretch_comm_nccl stretch_comm stretch_accel CUDA::cudart
    LABELS gpu
    TIMEOUT 300)
  # Live recovery's communicators over NCCL; the two-rank test skips on fewer than 2 GPUs.
  stretch_add_test(nccl_communicator_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/nccl_communicator_test.cpp
    DEPS stretch_comm_nccl stretch_comm stretch_accel CUDA::cudart
    LABELS gpu
    TIMEOUT 300)
endif()
