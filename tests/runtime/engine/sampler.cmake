# DistributedSampler tests. Included from tests/runtime/engine/CMakeLists.txt.

# PyTorch's recorded output, argument errors, resume across world sizes (rapidcheck).
stretch_add_test(sampler_test
  SOURCES sampler_test.cpp
  DEPS stretch_engine rapidcheck
  LABELS unit)

# Against torch 1.13 itself (/usr/bin/python3 or $STRETCH_TORCH_PYTHON); skips, saying why, when
# that interpreter cannot import torch.
stretch_add_test(sampler_torch_test
  SOURCES sampler_torch_test.cpp
  DEPS stretch_engine
  LABELS integration
  TIMEOUT 300)
