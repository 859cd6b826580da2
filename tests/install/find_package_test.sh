#!/bin/sh
# install_find_package (tests/install/CMakeLists.txt): `cmake --install` of the build tree under a
# temporary prefix, moved elsewhere afterwards (the package must be relocatable), then
# examples/find_package, copied out of the source tree, configured and built against it with
# find_package(Stretch) and run alone and under the installed `stretch launch` with two ranks.
# Fails when a file of the package, a header or a dependency it names is missing.
#
# Arguments: CMAKE BUILD_DIR SOURCE_DIR GENERATOR MAKE_PROGRAM CXX_COMPILER
set -eu
cmake=$1 build=$2 source=$3 generator=$4 make_program=$5 cxx=$6

work=$(mktemp -d "${TMPDIR:-/tmp}/stretch-find-package.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
. "$(dirname "$0")/consumer.sh"

# The default install: every component (runtime, dev, python).
"$cmake" --install "$build" --prefix "$work/staged" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log"; fail "cmake --install $build exited non-zero"; }
mv "$work/staged" "$work/prefix"
prefix=$work/prefix
libdir=$(cd "$prefix" && dirname "$(find . -path '*/cmake/Stretch/StretchConfig.cmake')" | sed 's|^\./||; s|/cmake/Stretch$||')
for file in bin/stretch bin/stretch-agent "$libdir/cmake/Stretch/StretchConfig.cmake" \
  "$libdir/cmake/Stretch/StretchConfigVersion.cmake" "$libdir/cmake/Stretch/StretchTargets.cmake" \
  "$libdir/libstretch_engine.a" "$libdir/libstretch_launcher.a" \
  include/stretch/runtime/engine/engine.hpp include/stretch/runtime/comm/init_distributed.hpp; do
  [ -f "$prefix/$file" ] || fail "not installed: $file"
done
# Relocatable: nothing installed names the build or source tree or the staging prefix.
if grep -rlF -e "$build" -e "$source" -e "$work/staged" "$prefix/$libdir/cmake/Stretch"; then
  fail "the CMake package above names the build tree, the source tree or the install prefix"
fi

build_consumer "$prefix"

program=$work/consumer-build/train_linear
alone=$("$program" 2>&1) || { echo "$alone"; fail "train_linear exited non-zero"; }
echo "$alone"
echo "$alone" | grep -q "^elastic global batch 16, world sizes 1,2,4$" || fail "no elastic plan"
echo "$alone" | grep -q "^ok rank 0 of 1: micro batch 4 x accumulation 4" || fail "no training alone"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
launched=$(cd "$work" && "$prefix/bin/stretch" launch --num_gpus 2 --master_port "$port" \
  "$program" 2>&1) || { echo "$launched"; fail "stretch launch exited non-zero"; }
echo "$launched"
for rank in 0 1; do
  echo "$launched" | grep -q "^ok rank $rank of 2: micro batch 4 x accumulation 2" ||
    fail "rank $rank of 2 did not train under stretch launch"
done
echo "PASS: find_package(Stretch) from a relocated install builds, trains alone and under launch"
