# Checkpoint file I/O tests. Included from tests/runtime/engine/CMakeLists.txt.

# Names, SHA-256, atomic writes, latest, state-file round trips, manifest, verification and
# corruption (rapidcheck).
stretch_add_test(checkpoint_io_test
  SOURCES checkpoint_io_test.cpp
  DEPS stretch_engine rapidcheck
  LABELS unit)
target_compile_definitions(checkpoint_io_test PRIVATE STRETCH_CHECKPOINT_TEST_INTEGRATION=0)

# torch.load / torch.save interop with Python torch 1.13 (/usr/bin/python3 or
# $STRETCH_TORCH_PYTHON); skips, saying why, when that interpreter cannot import torch.
stretch_add_test(checkpoint_torch_test
  SOURCES checkpoint_io_test.cpp
  DEPS stretch_engine rapidcheck
  LABELS integration
  TIMEOUT 300)
target_compile_definitions(checkpoint_torch_test PRIVATE STRETCH_CHECKPOINT_TEST_INTEGRATION=1)
