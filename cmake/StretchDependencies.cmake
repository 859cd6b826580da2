# Finds every dependency once and records what was found for the configure summary.
# Core modules need only fmt, spdlog, nlohmann_json and CLI11 (Debian packages); everything else
# is optional and confined to its own module (docs/architecture.md, "third-party rooms").

set(STRETCH_SUMMARY_LINES "")
macro(stretch_summary name state detail)
  list(APPEND STRETCH_SUMMARY_LINES "${name}|${state}|${detail}")
endmacro()

function(stretch_require_package pkg debian_pkg)
  find_package(${pkg} ${ARGN} QUIET)
  if(NOT ${pkg}_FOUND)
    message(FATAL_ERROR
      "Required package ${pkg} was not found. On Debian 12 install it with:\n"
      "  sudo apt-get install ${debian_pkg}\n"
      "or run scripts/bootstrap.sh, which installs every missing package.")
  endif()
endfunction()

stretch_require_package(fmt libfmt-dev)
stretch_require_package(spdlog libspdlog-dev)
stretch_require_package(nlohmann_json nlohmann-json3-dev)
stretch_require_package(CLI11 libcli11-dev)
stretch_summary("fmt / spdlog" "found" "required")
stretch_summary("nlohmann_json" "found" "required")
stretch_summary("CLI11" "found" "required")
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)

if(STRETCH_BUILD_TESTS)
  stretch_require_package(GTest libgtest-dev)
  stretch_require_package(rapidcheck librapidcheck-dev)
  stretch_summary("GoogleTest / rapidcheck" "found" "tests enabled")
else()
  stretch_summary("tests" "off" "STRETCH_BUILD_TESTS=OFF")
endif()

if(STRETCH_BUILD_BENCH)
  find_package(benchmark QUIET)
  if(benchmark_FOUND)
    stretch_summary("Google Benchmark" "found" "${benchmark_VERSION}")
  else()
    set(STRETCH_BUILD_BENCH OFF)
    stretch_summary("Google Benchmark" "off" "libbenchmark-dev not found")
  endif()
endif()

# resolve_optional(<OPTION> <found-bool> <what> <detail-if-found> <hint-if-missing>)
function(stretch_resolve_optional option found what detail hint)
  if(${option} STREQUAL "OFF")
    set(${option}_ENABLED OFF PARENT_SCOPE)
    stretch_summary("${what}" "off" "${option}=OFF")
  elseif(${found})
    # "found": the modules that use it are built when they exist (see docs/architecture.md).
    set(${option}_ENABLED ON PARENT_SCOPE)
    stretch_summary("${what}" "found" "${detail}")
  elseif(${option} STREQUAL "ON")
    message(FATAL_ERROR "${option}=ON but ${what} was not found: ${hint}")
  else()
    set(${option}_ENABLED OFF PARENT_SCOPE)
    stretch_summary("${what}" "off" "not found (${hint})")
  endif()
  set(STRETCH_SUMMARY_LINES "${STRETCH_SUMMARY_LINES}" PARENT_SCOPE)
endfunction()

# LibTorch (engine). Looked up only when not switched off: its CMake config is slow.
set(_torch_found FALSE)
if(NOT STRETCH_WITH_TORCH STREQUAL "OFF")
  find_package(Torch CONFIG QUIET)
  set(_torch_found ${Torch_FOUND})
endif()
stretch_resolve_optional(STRETCH_WITH_TORCH _torch_found "LibTorch" "${Torch_DIR}"
                         "install libtorch-dev")
if(STRETCH_WITH_TORCH_ENABLED)
  # Checkpoint checksums (SHA-256). libssl-dev comes with libtorch-dev's dependencies.
  find_package(OpenSSL REQUIRED COMPONENTS Crypto)
else()
  # Without the engine, runtime/checkpoint verifies checkpoints' digests only when it is found
  # (the launcher's resume step); their sizes always.
  find_package(OpenSSL QUIET COMPONENTS Crypto)
endif()

# Gloo (CPU collectives).
find_path(STRETCH_GLOO_INCLUDE_DIR gloo/config.h)
find_library(STRETCH_GLOO_LIBRARY gloo)
set(_gloo_found FALSE)
if(STRETCH_GLOO_INCLUDE_DIR AND STRETCH_GLOO_LIBRARY)
  set(_gloo_found TRUE)
endif()
stretch_resolve_optional(STRETCH_WITH_GLOO _gloo_found "Gloo" "${STRETCH_GLOO_LIBRARY}"
                         "install libgloo-dev")

# hiredis (RedisStore, the rendezvous store for large jobs).
find_path(STRETCH_HIREDIS_INCLUDE_DIR hiredis/hiredis.h)
find_library(STRETCH_HIREDIS_LIBRARY hiredis)
set(_redis_found FALSE)
if(STRETCH_HIREDIS_INCLUDE_DIR AND STRETCH_HIREDIS_LIBRARY)
  set(_redis_found TRUE)
endif()
stretch_resolve_optional(STRETCH_WITH_REDIS _redis_found "hiredis (RedisStore)"
                         "${STRETCH_HIREDIS_LIBRARY}" "install libhiredis-dev")
find_program(STRETCH_REDIS_SERVER redis-server)

# NCCL + CUDA runtime (GPU collectives), usually under /usr/local/cuda.
find_path(STRETCH_NCCL_INCLUDE_DIR nccl.h HINTS /usr/local/cuda/include ENV CUDA_HOME
          PATH_SUFFIXES include)
find_library(STRETCH_NCCL_LIBRARY nccl HINTS /usr/local/cuda/lib64 ENV CUDA_HOME
             PATH_SUFFIXES lib64 lib)
find_package(CUDAToolkit QUIET)
set(_nccl_found FALSE)
if(STRETCH_NCCL_INCLUDE_DIR AND STRETCH_NCCL_LIBRARY AND CUDAToolkit_FOUND)
  set(_nccl_found TRUE)
endif()
stretch_resolve_optional(STRETCH_WITH_NCCL _nccl_found "NCCL + CUDA"
                         "${STRETCH_NCCL_LIBRARY}, CUDA ${CUDAToolkit_VERSION}"
                         "needs nccl.h, libnccl and the CUDA toolkit")

# Gloo, hiredis and NCCL have no CMake package: the backends link them as imported targets, which
# the installed CMake package defines again from the libraries it finds where it is used
# (cmake/StretchConfig.cmake.in), instead of naming this machine's files.
foreach(_lib GLOO:gloo REDIS:hiredis NCCL:nccl)
  string(REPLACE ":" ";" _lib "${_lib}")
  list(GET _lib 0 _option)
  list(GET _lib 1 _name)
  if(STRETCH_WITH_${_option}_ENABLED)
    string(TOUPPER ${_name} _upper)
    add_library(Stretch::${_name}_library UNKNOWN IMPORTED)
    set_target_properties(Stretch::${_name}_library PROPERTIES
      IMPORTED_LOCATION ${STRETCH_${_upper}_LIBRARY})
  endif()
endforeach()

# MPI (Monte Carlo over ranks: mpirun -n K stretch sim|plan); the C API from C++ (the project
# enables no C compiler), not the deprecated C++ bindings.
set(_mpi_found FALSE)
if(NOT STRETCH_WITH_MPI STREQUAL "OFF")
  set(MPI_CXX_SKIP_MPICXX ON)
  find_package(MPI COMPONENTS CXX QUIET)
  set(_mpi_found ${MPI_CXX_FOUND})
endif()
stretch_resolve_optional(STRETCH_WITH_MPI _mpi_found "MPI (stretch sim/plan over ranks)"
                         "MPI ${MPI_CXX_VERSION}" "install libopenmpi-dev")

# Qt 6 (desktop planner).
find_package(Qt6 COMPONENTS Widgets Charts QUIET)
set(_qt_found FALSE)
if(Qt6_FOUND AND Qt6Widgets_FOUND AND Qt6Charts_FOUND)
  set(_qt_found TRUE)
endif()
stretch_resolve_optional(STRETCH_BUILD_GUI _qt_found "Qt 6 GUI" "Qt ${Qt6_VERSION}"
                         "install qt6-base-dev qt6-charts-dev libqt6opengl6-dev")

# libFuzzer targets need clang++ with -fsanitize=fuzzer (the main build may use g++).
string(TOUPPER "${STRETCH_BUILD_FUZZERS}" _fuzz)
find_program(STRETCH_CLANGXX NAMES clang++ clang++-14)
set(_fuzz_found FALSE)
if(STRETCH_CLANGXX)
  set(_fuzz_found TRUE)
endif()
stretch_resolve_optional(_fuzz _fuzz_found "libFuzzer targets" "${STRETCH_CLANGXX}"
                         "install clang and libclang-rt-14-dev")
set(STRETCH_BUILD_FUZZERS_ENABLED ${_fuzz_ENABLED})

function(stretch_print_summary)
  message(STATUS "")
  message(STATUS "Stretch ${PROJECT_VERSION} configuration (${CMAKE_BUILD_TYPE}, ${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION})")
  foreach(line IN LISTS STRETCH_SUMMARY_LINES)
    string(REPLACE "|" ";" parts "${line}")
    list(GET parts 0 name)
    list(GET parts 1 state)
    list(GET parts 2 detail)
    string(LENGTH "${name}" len)
    math(EXPR pad "26 - ${len}")
    if(pad LESS 1)
      set(pad 1)
    endif()
    string(REPEAT " " ${pad} spaces)
    string(LENGTH "${state}" slen)
    math(EXPR spad "7 - ${slen}")
    string(REPEAT " " ${spad} sspaces)
    message(STATUS "  ${name}${spaces}${state}${sspaces}${detail}")
  endforeach()
  if(STRETCH_CCACHE)
    message(STATUS "  ccache                    found  ${STRETCH_CCACHE}")
  endif()
  message(STATUS "")
endfunction()
