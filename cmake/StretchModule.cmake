# One helper to declare a module and one to declare a test executable, so every target is built
# the same way: explicit source lists, root-relative includes, the same warnings.

function(stretch_target_defaults target)
  target_compile_features(${target} PUBLIC cxx_std_20)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                             -Wold-style-cast -Wconversion -Wno-sign-conversion)
    if(STRETCH_WARNINGS_AS_ERRORS)
      target_compile_options(${target} PRIVATE -Werror)
    endif()
  endif()
endfunction()

# stretch_add_module(<name> SOURCES ... [PUBLIC_DEPS ...] [PRIVATE_DEPS ...])
# Declares library target stretch_<name>. Includes are root-relative ("runtime/config/...").
function(stretch_add_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "stretch_add_module(${name}): SOURCES is required")
  endif()
  set(target stretch_${name})
  add_library(${target} STATIC ${ARG_SOURCES})
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/generated>)
  target_link_libraries(${target} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  stretch_target_defaults(${target})
endfunction()

# stretch_add_test(<name> SOURCES ... [DEPS ...] LABELS <label>... [TIMEOUT s]
#                  [RUN_SERIAL | SERIAL_TESTS <gtest filter> | EXCLUDE_TESTS <gtest filter>])
# One GoogleTest executable; each TEST is registered with CTest and carries the labels
# (unit, property, integration, gpu, gui, slow). RUN_SERIAL runs every test of it alone on the
# machine; SERIAL_TESTS only those the filter matches (e.g. "Suite.TimedTest:Other.*").
# EXCLUDE_TESTS leaves the tests it matches unregistered: those that an add_test of their own
# runs longer (the `slow` trial sets), so that the suite does not run them twice.
function(stretch_add_test name)
  cmake_parse_arguments(ARG "RUN_SERIAL" "TIMEOUT;SERIAL_TESTS;EXCLUDE_TESTS" "SOURCES;DEPS;LABELS"
                        ${ARGN})
  if(ARG_SERIAL_TESTS AND ARG_EXCLUDE_TESTS)
    message(FATAL_ERROR "stretch_add_test(${name}): SERIAL_TESTS and EXCLUDE_TESTS together")
  endif()
  if(NOT ARG_LABELS)
    message(FATAL_ERROR "stretch_add_test(${name}): LABELS is required")
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} stretch_test_support GTest::gtest GTest::gmock
                                        GTest::gtest_main)
  stretch_target_defaults(${name})
  # The test code itself (not the libraries it tests) at STRETCH_TEST_OPTIMIZATION: compiled
  # at -O1 the test executables build in about 30 % less time than at the Release -O3, and
  # what they run fast is the libraries' code, built as configured.
  if(STRETCH_TEST_OPTIMIZATION)
    target_compile_options(${name} PRIVATE ${STRETCH_TEST_OPTIMIZATION})
  endif()
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  # One discovery per gtest filter: the serial tests and the others, or all but the excluded.
  if(ARG_SERIAL_TESTS)
    set(filters "${ARG_SERIAL_TESTS}" "-${ARG_SERIAL_TESTS}")
  elseif(ARG_EXCLUDE_TESTS)
    set(filters "-${ARG_EXCLUDE_TESTS}")
  else()
    set(filters "*")
  endif()
  foreach(filter IN LISTS filters)
    set(serial ${ARG_RUN_SERIAL})
    if(ARG_SERIAL_TESTS AND NOT filter MATCHES "^-")
      set(serial TRUE)
    endif()
    gtest_discover_tests(${name}
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
      TEST_FILTER "${filter}"
      PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT} RUN_SERIAL ${serial}
                 ENVIRONMENT "STRETCH_SOURCE_DIR=${PROJECT_SOURCE_DIR}"
      DISCOVERY_TIMEOUT 60)
  endforeach()
endfunction()
