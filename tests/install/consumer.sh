# Sourced by find_package_test.sh and deb_test.sh: build_consumer PREFIX copies examples/find_package
# out of the source tree to $work/consumer and configures and builds it against PREFIX with
# find_package(Stretch) (CMAKE_PREFIX_PATH), failing with the log when either step fails. Uses the
# callers' cmake, source, generator, make_program, cxx, work and fail.
build_consumer() {
  cp -r "$source/examples/find_package" "$work/consumer"
  "$cmake" -S "$work/consumer" -B "$work/consumer-build" -G "$generator" \
    -DCMAKE_MAKE_PROGRAM="$make_program" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$1" >"$work/configure.log" 2>&1 ||
    { cat "$work/configure.log"; fail "the consumer project did not configure against $1"; }
  "$cmake" --build "$work/consumer-build" >"$work/build.log" 2>&1 ||
    { cat "$work/build.log"; fail "the consumer project did not build against $1"; }
}
