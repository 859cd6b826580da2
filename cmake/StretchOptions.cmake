# Build options. The third-party integrations default to AUTO: on when the package is found.
# Setting one to ON makes a missing package a configure error; OFF skips it even when present.
set(_stretch_tristate AUTO ON OFF)
foreach(opt STRETCH_WITH_TORCH STRETCH_WITH_GLOO STRETCH_WITH_NCCL STRETCH_WITH_REDIS
            STRETCH_WITH_MPI STRETCH_BUILD_GUI)
  set(${opt} AUTO CACHE STRING "AUTO (on when found), ON (required) or OFF")
  set_property(CACHE ${opt} PROPERTY STRINGS ${_stretch_tristate})
  string(TOUPPER "${${opt}}" _value)
  if(NOT _value IN_LIST _stretch_tristate)
    message(FATAL_ERROR "${opt}=${${opt}}: expected one of AUTO, ON, OFF")
  endif()
  set(${opt} ${_value})
endforeach()

option(STRETCH_BUILD_TESTS "Build the GoogleTest/rapidcheck test suite" ON)
option(STRETCH_BUILD_BENCH "Build the Google Benchmark benchmarks" ON)
set(STRETCH_BUILD_FUZZERS AUTO CACHE STRING
    "Build libFuzzer targets with clang++: AUTO (when clang++ is found), ON or OFF")
option(STRETCH_WARNINGS_AS_ERRORS "Treat compiler warnings as errors" OFF)
set(STRETCH_TEST_OPTIMIZATION -O1 CACHE STRING
    "Optimization flags for the test executables' own code (empty: the build type's)")

# ccache makes repeated CI and developer builds cheap; use it when present.
find_program(STRETCH_CCACHE ccache)
if(STRETCH_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${STRETCH_CCACHE})
endif()
