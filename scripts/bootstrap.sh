#!/usr/bin/env bash
# Stretch set-up for a fresh Debian 12 machine, in one command:
#
#   scripts/bootstrap.sh example   install what the planner needs, build the `stretch` executable
#                                  (Release) without the optional integrations, plan the bundled
#                                  job
#   scripts/bootstrap.sh test      install what is missing, build everything (Release), run the
#                                  whole test suite
#   scripts/bootstrap.sh build     install what is missing and build everything (Release), no
#                                  tests
#
# `example` installs only the compiler, CMake and the header libraries `stretch` needs (no
# LibTorch, Gloo, Qt or MPI) and builds only the `stretch` target with those integrations off, so
# that the first result shows up in minutes; `test` and `build` install everything and build
# everything in the same build folder (the tests, benchmarks, the example training job, the
# desktop planner, and `stretch` again with Gloo, hiredis and MPI).
#
# Installs only Debian packages, by name, and only those not installed yet (root, or a user with
# sudo). Idempotent: with everything present it only rebuilds what changed.
# Environment: BUILD_DIR (default build), JOBS (default: number of cores),
#              RC_SEED (rapidcheck seed; default: a fresh one, printed), RC_EXTRA (more
#              rapidcheck settings, e.g. "max_success=2000"), CTEST_ARGS (extra ctest flags),
#              STRETCH_UNITY_BUILD (ON: `test` and `build` compile as a unity build too; `example`
#              always does).
set -euo pipefail

usage() {
  # The header comment above, without its leading "# ".
  awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
}

mode="${1:-}"
case "$mode" in
  example | test | build) ;;
  -h | --help) usage; exit 0 ;;
  *) usage >&2; echo "bootstrap.sh: expected 'example', 'test' or 'build', got '${mode}'" >&2; exit 2 ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
jobs="${JOBS:-$(nproc)}"

# What `example` needs: the compiler, CMake and the header libraries of the core.
packages=(
  cmake ninja-build g++ ccache pkg-config
  libfmt-dev libspdlog-dev nlohmann-json3-dev libcli11-dev
)
# What the full build and the test suite add. Gloo (CPU collectives) and hiredis (RedisStore),
# LibTorch (the training engine; OpenSSL for checkpoint digests, zlib for the example data) and
# Qt 6 (the desktop planner) are installed by default; NCCL stays optional (AUTO): the build uses
# it when present and says so in its configure summary.
[[ "$mode" == "example" ]] || packages+=(
  libgtest-dev libgmock-dev librapidcheck-dev libbenchmark-dev
  libgloo-dev libhiredis-dev libtorch-dev libssl-dev zlib1g-dev
  # Debian's LibTorch calls whatever libblas.so.3 provides; alone, that is the reference BLAS
  # (libblas3), whose sgemm took 77 % of a GPT step. OpenBLAS (OpenMP build: the threads LibTorch
  # already runs) becomes libblas.so.3 through the alternatives: 8x the GPT example's tokens/s.
  libopenblas0-openmp
  # The desktop planner (stretch-planner): Qt 6 Widgets and Charts (Charts' CMake package needs
  # the OpenGL module's).
  qt6-base-dev qt6-charts-dev libqt6opengl6-dev
  # Monte Carlo over MPI ranks (mpirun -n K stretch sim|plan --seeds N); optional in CMake.
  libopenmpi-dev
  # The Python package (`import stretch`, docs/python.md): pybind11 and the Python headers.
  pybind11-dev python3-dev
)
if [[ "$mode" == "test" ]]; then
  # libFuzzer smoke run (clang), and the live DeepSpeed reference check (python3 + numpy).
  # RedisStore's contract suite runs against a real redis-server on loopback.
  # python3-torch: the engine's interop and sampler tests load and compare with PyTorch.
  packages+=(clang libclang-rt-14-dev python3 python3-numpy redis-server python3-torch)
  # The Python package's tests; python3-venv: the offline `pip install .` into a venv.
  packages+=(python3-pytest python3-venv)
  # The Debian package's test (install_deb): dpkg-shlibdeps computes its Depends.
  packages+=(dpkg-dev)
  # Multi-node launch tests: network namespaces (iproute2), sshd inside them for the ssh, pdsh
  # and mpirun runners (skipped without root).
  packages+=(iproute2 openssh-server openssh-client pdsh openmpi-bin)
  # The slurm runner's test: munged, slurmctld and one slurmd per namespace host, salloc/srun.
  packages+=(slurmd slurmctld slurm-client munge)
  # The planner's HTML report is rendered in headless Chromium to check its charts.
  packages+=(chromium)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} > 0)); then
  echo "==> installing missing Debian packages: ${missing[*]}"
  sudo_cmd=()
  if [[ "$(id -u)" -ne 0 ]]; then
    if ! command -v sudo >/dev/null; then
      echo "bootstrap.sh: need root or sudo to install: ${missing[*]}" >&2
      exit 1
    fi
    sudo_cmd=(sudo)
  fi
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "==> all required Debian packages are installed"
fi

echo "==> configuring ($build_dir)"
generator=()
[[ -f "$build_dir/CMakeCache.txt" ]] || generator=(-G Ninja)
if [[ "$mode" == "example" ]]; then
  # The integrations the planner does not use stay off, even where their packages are installed.
  # A unity build (one translation unit per batch of sources) compiles the headers once per
  # batch: about half the time of a plain build on a fresh 2-core machine.
  options=(-DSTRETCH_WITH_TORCH=OFF -DSTRETCH_WITH_GLOO=OFF -DSTRETCH_WITH_NCCL=OFF
           -DSTRETCH_WITH_REDIS=OFF -DSTRETCH_BUILD_GUI=OFF -DSTRETCH_WITH_MPI=OFF
           -DSTRETCH_BUILD_TESTS=OFF -DSTRETCH_BUILD_BENCH=OFF -DSTRETCH_BUILD_FUZZERS=OFF
           -DCMAKE_UNITY_BUILD=ON)
else
  # Back to the defaults, should `example` have switched them off in this build folder.
  options=(-DSTRETCH_WITH_TORCH=AUTO -DSTRETCH_WITH_GLOO=AUTO -DSTRETCH_WITH_NCCL=AUTO
           -DSTRETCH_WITH_REDIS=AUTO -DSTRETCH_BUILD_GUI=AUTO -DSTRETCH_WITH_MPI=AUTO
           -DSTRETCH_BUILD_TESTS=ON -DSTRETCH_BUILD_BENCH=ON -DSTRETCH_BUILD_FUZZERS=AUTO
           -DCMAKE_UNITY_BUILD=${STRETCH_UNITY_BUILD:-OFF})
fi
cmake -S "$root" -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "${options[@]}"
if [[ "$mode" == "example" ]]; then
  # Only what `stretch plan` needs: the stretch executable and its libraries.
  echo "==> building the stretch executable with $jobs jobs"
  cmake --build "$build_dir" -j "$jobs" --target stretch
else
  echo "==> building with $jobs jobs"
  cmake --build "$build_dir" -j "$jobs"
fi

case "$mode" in
  example)
    # The bundled elastic job: batch choices, checkpoint interval, scale table, recommendation.
    echo "==> stretch plan (fixtures/plans/example.json)"
    "$build_dir/bin/stretch" plan
    ;;
  test)
    seed="${RC_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}"
    export RC_PARAMS="seed=$seed${RC_EXTRA:+ $RC_EXTRA}"
    echo "==> rapidcheck seed: $seed (replay a failure with RC_SEED=$seed scripts/bootstrap.sh test)"
    # shellcheck disable=SC2086
    ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" ${CTEST_ARGS:-}
    ;;
esac
