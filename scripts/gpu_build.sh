#!/usr/bin/env bash
# Configure and build Stretch on a GPU machine with the `gpu` CMake preset (docs/gpu.md):
# LibTorch from the local PyTorch (torch.utils.cmake_prefix_path), CUDA from /usr/local/cuda and
# NCCL from PyTorch's nvidia-nccl wheel (or NCCL_HOME). Libraries the machine lacks (fmt, spdlog,
# nlohmann-json, CLI11, GoogleTest, rapidcheck, Gloo) may come from Debian packages unpacked
# under DEPS (default .deps), as `dpkg -x PKG.deb .deps` does.
#
#   scripts/gpu_build.sh [ninja targets...]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
deps="${DEPS:-$root/.deps}"
python="${PYTHON:-python3}"

export STRETCH_TORCH_CMAKE_PREFIX="$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
if [[ -d "$deps" ]]; then
  export STRETCH_DEPS_PREFIX="$deps/usr;$deps/usr/lib/x86_64-linux-gnu/cmake;$deps/usr/share/cmake"
  export LD_LIBRARY_PATH="$deps/usr/lib:$deps/usr/lib/x86_64-linux-gnu:$deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  export CPATH="$deps/usr/include:${CPATH:-}"
  export LIBRARY_PATH="$deps/usr/lib:$deps/usr/lib/x86_64-linux-gnu:${LIBRARY_PATH:-}"
fi
if [[ -z "${STRETCH_NCCL_INCLUDE_DIR:-}" ]]; then
  nccl="${NCCL_HOME:-$("$python" -c 'import os, nvidia.nccl as n; print(os.path.dirname(n.__file__) if n.__file__ else list(n.__path__)[0])' 2>/dev/null || true)}"
  export STRETCH_NCCL_INCLUDE_DIR="$nccl/include"
  export STRETCH_NCCL_LIBRARY="$(ls "$nccl"/lib/libnccl.so* | head -1)"
fi
echo "==> torch: $STRETCH_TORCH_CMAKE_PREFIX"
echo "==> nccl:  $STRETCH_NCCL_INCLUDE_DIR, $STRETCH_NCCL_LIBRARY"
cmake --preset gpu -S "$root"
# Targets this configuration does not have (NCCL's tests without NCCL, say) are named and left out,
# so a list written for one machine builds on another.
wanted=()
if (( $# > 0 )); then
  known="$(cmake --build "$root/build-gpu" -- -t targets all | cut -d: -f1)"
  for t in "$@"; do
    if grep -qx -- "$t" <<< "$known"; then wanted+=("$t"); else echo "==> no target $t here; left out"; fi
  done
  (( ${#wanted[@]} > 0 )) || { echo "==> none of the targets $* exists" >&2; exit 1; }
fi
cmake --build "$root/build-gpu" -j "$(nproc)" ${wanted[@]:+--target "${wanted[@]}"}
