# fp16 loss scalers against DeepSpeed's recorded traces (fixtures/engine/ls_samples.txt), the
# ZeRO-0 rule, the factory, state save/load and rapidcheck properties (seed printed).
# Included from tests/runtime/engine/CMakeLists.txt.
stretch_add_test(loss_scaler_test
  SOURCES loss_scaler_test.cpp
  DEPS stretch_engine stretch_config rapidcheck
  LABELS unit)
