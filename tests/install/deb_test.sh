#!/bin/sh
# install_deb (tests/install/CMakeLists.txt): `cpack -G DEB` of the build tree
# (cmake/StretchInstall.cmake), then the package's control data and files checked, the package
# unpacked under a temporary root (dpkg-deb -x: what `apt install ./stretch_*.deb` would put under
# /), and examples/find_package built against that tree and run, and the Python package imported
# from it. Exits 77 (skipped) without dpkg-deb or dpkg-shlibdeps.
#
# Arguments: CPACK CMAKE BUILD_DIR SOURCE_DIR GENERATOR MAKE_PROGRAM CXX_COMPILER
set -eu
cpack=$1 cmake=$2 build=$3 source=$4 generator=$5 make_program=$6 cxx=$7

for tool in dpkg-deb dpkg-shlibdeps; do
  command -v "$tool" >/dev/null || { echo "SKIP: no $tool"; exit 77; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/stretch-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
. "$(dirname "$0")/consumer.sh"

"$cpack" -G DEB --config "$build/CPackConfig.cmake" -B "$work/out" >"$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log"; fail "cpack -G DEB exited non-zero"; }
deb=$(ls "$work"/out/stretch_*_*.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || { cat "$work/cpack.log"; fail "no stretch_*.deb in $work/out"; }
echo "package: $(basename "$deb") ($(wc -c <"$deb") bytes)"

control=$(dpkg-deb -f "$deb" Package Version Architecture Depends)
echo "$control"
echo "$control" | grep -q "^Package: stretch$" || fail "the package is not named stretch"
depends=$(dpkg-deb -f "$deb" Depends)
# The -dev packages find_package needs, and the shared libraries dpkg-shlibdeps found.
for needed in libfmt-dev nlohmann-json3-dev libfmt9 libstdc++6; do
  echo "$depends" | grep -q "\(^\|, \)$needed\( \|,\|$\)" || fail "Depends lacks $needed: $depends"
done

dpkg-deb -x "$deb" "$work/root"
prefix=$work/root/usr
for file in bin/stretch bin/stretch-agent lib/cmake/Stretch/StretchConfig.cmake lib/cmake/Stretch/StretchTargets.cmake \
  lib/libstretch_engine.a include/stretch/runtime/engine/engine.hpp; do
  [ -f "$prefix/$file" ] || fail "not in the package: usr/$file"
done
"$prefix/bin/stretch" elastic --help >/dev/null 2>&1 || fail "the packaged stretch does not run"
"$prefix/bin/stretch-agent" agent --help >/dev/null 2>&1 || fail "the packaged stretch-agent does not run"

build_consumer "$prefix"
alone=$("$work/consumer-build/train_linear" 2>&1) || { echo "$alone"; fail "train_linear exited non-zero"; }
echo "$alone" | grep -q "^ok rank 0 of 1: micro batch 4 x accumulation 4" || fail "no training"

site=$(dirname "$(find "$prefix/lib" -path '*/dist-packages/stretch/__init__.py' | head -n 1)")
[ -d "$site" ] || fail "no Python package under usr/lib/python3.*/dist-packages"
batch=$(cd "$work" && PYTHONPATH=$(dirname "$site") python3 -c \
  'import stretch; print(stretch.__file__.startswith("'"$work"'"))' 2>&1) ||
  { echo "$batch"; fail "the packaged Python module does not import"; }
[ "$batch" = "True" ] || fail "python3 imported stretch from elsewhere than the package"
# The desktop app's own package, when the build has the GUI: its Depends name `stretch` of the same
# version and Qt's libraries, which the CLI's package must not need.
gui=$(ls "$work"/out/stretch-planner_*_*.deb 2>/dev/null | head -n 1)
if [ -n "$gui" ]; then
  version=$(dpkg-deb -f "$deb" Version)
  gui_depends=$(dpkg-deb -f "$gui" Depends)
  echo "$gui_depends" | grep -q "stretch (= $version)" ||
    fail "stretch-planner does not depend on stretch (= $version): $gui_depends"
  echo "$gui_depends" | grep -q "libqt6widgets6" || fail "stretch-planner's Depends lack Qt: $gui_depends"
  echo "$depends" | grep -q "libqt6" && fail "the CLI's package depends on Qt: $depends"
  dpkg-deb -x "$gui" "$work/root"
  QT_QPA_PLATFORM=offscreen "$prefix/bin/stretch-planner" --screenshot "$work/planner.png" --no-run \
    >"$work/planner.log" 2>&1 || { cat "$work/planner.log"; fail "the packaged stretch-planner failed"; }
  [ -s "$work/planner.png" ] || fail "the packaged stretch-planner wrote no screenshot"
  echo "stretch-planner: $(basename "$gui"), its window rendered"
fi
echo "PASS: the .deb holds the CLI, the CMake package and the Python module; a program builds against it"
