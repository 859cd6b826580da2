#!/usr/bin/env bash
# One GPU check in one call (docs/gpu.md): what the machine is, which std::filesystem symbols its
# LibTorch exports, the build with the `gpu` preset (scripts/gpu_build.sh), then the multi-rank
# CUDA tests (launches, live recovery), the checkpoint tests, and the rest of the suite, each with its log in OUT (default
# /tmp/stretch-gpu-check). Debian packages the GPU image lacks are unpacked under .deps first
# (`for f in *.deb; do dpkg -x $f .deps; done`).
#
#   OUT=/some/dir scripts/gpu_check.sh
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-/tmp/stretch-gpu-check}"
mkdir -p "$out"
cd "$root"
python="${PYTHON:-python3}"
script_start=$(date +%s)

{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  "$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  gcc --version | head -1
  nproc
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt"

torchlib="$("$python" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')"
for lib in "$torchlib"/libtorch.so "$torchlib"/libtorch_cpu.so "$torchlib"/libc10.so; do
  [[ -e "$lib" ]] || continue
  echo "== $lib"
  nm -D --defined-only "$lib" | c++filt | grep -c 'std::filesystem' || true
  nm -D --defined-only "$lib" | c++filt | grep 'std::filesystem' | head -40
done > "$out/libtorch_filesystem_symbols.txt" 2>&1
head -5 "$out/libtorch_filesystem_symbols.txt"

start=$(date +%s)
if ! scripts/gpu_build.sh > "$out/build.log" 2>&1; then
  tail -40 "$out/build.log"
  echo "gpu_check: the build failed after $(( $(date +%s) - start )) s (log: $out/build.log)"
  exit 1
fi
echo "gpu_check: built in $(( $(date +%s) - start )) s"

deps="${DEPS:-$root/.deps}"
export LD_LIBRARY_PATH="$deps/usr/lib:$deps/usr/lib/x86_64-linux-gnu:$deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
jobs="$(nproc)"
# 1. Multi-rank CUDA first: ranks sharing the GPU over staged Gloo (the GPT job at 2 ranks, live
#    recovery with a kill -9 against --recovery restart), the backend choice and staging, NCCL.
first='Cuda|Nccl|Gpu|StagedBackend|CommChoice|TorchDeviceStaging|JobCommunication|GptExample'
ctest --test-dir build-gpu -j "$jobs" --timeout 300 --output-on-failure -R "$first" \
  > "$out/ctest_multirank_cuda.log" 2>&1
grep -E 'tests passed|tests failed|\(Failed\)|\(Timeout\)|Not Run' "$out/ctest_multirank_cuda.log"
# 2. Checkpoints between devices and world sizes.
second='Checkpoint|checkpoint|FsTrap|fs_trap'
ctest --test-dir build-gpu -j "$jobs" --timeout 300 --output-on-failure -R "$second" -E "$first" \
  > "$out/ctest_checkpoint_gpu.log" 2>&1
grep -E 'tests passed|tests failed|\(Failed\)|\(Timeout\)|Not Run' "$out/ctest_checkpoint_gpu.log"
# CHECK_BUDGET (seconds for this whole script, default 540) bounds the whole-suite run, so a
# device lease is never overrun: the suite gets what is left, less 15 s for the summary.
limit=$(( ${CHECK_BUDGET:-540} - ($(date +%s) - script_start) - 15 ))
(( limit < 30 )) && limit=30
echo "gpu_check: the whole suite gets ${limit} s"
# 3. The rest (what the first two ran is left out).
timeout "$limit" ctest --test-dir build-gpu -j "$jobs" --timeout 300 -LE slow -E "$first|$second" \
  > "$out/ctest_all.log" 2>&1
echo "gpu_check: suite: $(grep -c ' Passed ' "$out/ctest_all.log") passed, $(grep -c '\*\*\*Failed\|\*\*\*Exception\|\*\*\*Timeout' "$out/ctest_all.log") failed, $(grep -c '\*\*\*Skipped' "$out/ctest_all.log") skipped"
grep -E 'tests passed|tests failed|\*\*\*Failed|\*\*\*Exception|\*\*\*Timeout|Not Run' "$out/ctest_all.log" | head -60
echo "gpu_check: done after $(( $(date +%s) - start )) s"
