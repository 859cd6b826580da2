# The engine's training semantics (ranks as threads over the in-process backend); its heartbeat.
stretch_add_test(engine_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/engine_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/heartbeat_test.cpp
  DEPS stretch_engine
  LABELS unit
  TIMEOUT 300)

# Checkpoints: exact and elastic resume, client state, corruption.
stretch_add_test(engine_checkpoint_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/engine_checkpoint_test.cpp
  DEPS stretch_engine
  LABELS unit
  TIMEOUT 300)

# Live recovery's engine side: abandonStep / rejoin against a resume from a checkpoint; and
# LiveRecovery joining a generation's Gloo group on loopback (late and missing members); CUDA
# buffers staged through host memory (TorchDeviceStaging) and the job's backend choice.
stretch_add_test(engine_live_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/engine_live_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/live_recovery_join_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/live_recovery_device_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/device_staging_test.cpp
  DEPS stretch_engine stretch_comm_builtin stretch_test_fake_nccl
  LABELS unit
  TIMEOUT 300)

# The engine on CUDA (skips without a device): fp32 vs CPU, fp16 with loss scaling, bf16,
# checkpoints moving between CPU and GPU.
stretch_add_test(engine_cuda_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/engine_cuda_test.cpp
  DEPS stretch_engine
  LABELS gpu
  TIMEOUT 300)

# Tied, frozen and unused parameters at 2 ranks for ZeRO 0/1/2 against a plain LibTorch loop.
stretch_add_test(engine_params_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/engine_params_test.cpp
  DEPS stretch_engine
  LABELS unit
  TIMEOUT 300)

# Live recovery of ZeRO 1/2: the plan that picks the step and the holder of every partition
# from what the survivors hold (rapidcheck over histories cut short anywhere; seed printed).
stretch_add_test(partition_plan_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/partition_plan_test.cpp
  DEPS stretch_engine rapidcheck
  LABELS unit property)
