# LR schedules against DeepSpeed's recorded sequences (fixtures/engine/lr_samples.txt), config
# errors, state save/load and rapidcheck properties (seed printed).
# Included from tests/runtime/engine/CMakeLists.txt.
stretch_add_test(lr_schedules_test
  SOURCES lr_schedules_test.cpp
  DEPS stretch_engine stretch_config rapidcheck
  LABELS unit)
