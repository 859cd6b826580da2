# `cmake --install` of the C++ side (docs/install.md): the `stretch` CLI, the runtime's static
# libraries, their headers and a CMake package, so that a user's program outside this tree writes
#
#   find_package(Stretch REQUIRED)
#   target_link_libraries(my_job PRIVATE Stretch::stretch)
#
# Components: `runtime` (the CLI), `dev` (libraries, headers, CMake package), `python`
# (python/CMakeLists.txt) and `gui` (the planner's desktop app, with Qt); a plain
# `cmake --install build` installs them all. Included by the
# top-level CMakeLists.txt after every module exists.

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(STRETCH_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/Stretch CACHE STRING
    "Where cmake --install puts StretchConfig.cmake, relative to the prefix")
# Headers keep the root-relative paths the code uses ("runtime/engine/engine.hpp") under their own
# folder, so that the prefix's include/ gets no top-level `runtime`.
set(STRETCH_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/stretch)

# The modules a program needs to train with the engine under `stretch launch` (live recovery,
# initDistributed, the backends' registration) or to use the launcher as a library, in layer
# order; those this build lacks (no LibTorch, Gloo, NCCL or hiredis) are left out. sim/, planner/
# and tools/ are for the CLI only.
set(_modules common checkpoint config comm live accel elasticity agent launcher comm_gloo comm_nccl
             comm_redis comm_builtin engine)
set(_targets "")
foreach(module IN LISTS _modules)
  if(TARGET stretch_${module})
    set_target_properties(stretch_${module} PROPERTIES EXPORT_NAME ${module})
    list(APPEND _targets stretch_${module})
  endif()
endforeach()

# Stretch::runtime, everything but the engine (no LibTorch); Stretch::stretch, everything. The
# JSON reader's header includes nlohmann/json.hpp, so the umbrella targets bring its include path.
add_library(stretch_package_runtime INTERFACE)
target_link_libraries(stretch_package_runtime INTERFACE stretch_launcher stretch_comm_builtin
                                                        nlohmann_json::nlohmann_json)
set_target_properties(stretch_package_runtime PROPERTIES EXPORT_NAME runtime)
add_library(stretch_package_all INTERFACE)
target_link_libraries(stretch_package_all INTERFACE stretch_package_runtime)
if(TARGET stretch_engine)
  target_link_libraries(stretch_package_all INTERFACE stretch_engine)
endif()
set_target_properties(stretch_package_all PROPERTIES EXPORT_NAME stretch)

install(TARGETS ${_targets} stretch_package_runtime stretch_package_all
  EXPORT StretchTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  INCLUDES DESTINATION ${STRETCH_INSTALL_INCLUDEDIR})

# Public headers of the installed modules; the backends' own headers only when they were built.
set(_header_excludes "")
foreach(module comm/gloo comm/nccl comm/redis engine)
  string(REPLACE "/" "_" target_module ${module})
  if(NOT TARGET stretch_${target_module})
    list(APPEND _header_excludes PATTERN "runtime/${module}" EXCLUDE)
  endif()
endforeach()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime
  DESTINATION ${STRETCH_INSTALL_INCLUDEDIR}
  COMPONENT dev
  FILES_MATCHING PATTERN "*.hpp" ${_header_excludes})

install(EXPORT StretchTargets
  NAMESPACE Stretch::
  DESTINATION ${STRETCH_INSTALL_CMAKEDIR}
  COMPONENT dev)

# What StretchConfig.cmake must find again for the static libraries' link lines.
set(STRETCH_PACKAGE_HAS_ENGINE OFF)
if(TARGET stretch_engine)
  set(STRETCH_PACKAGE_HAS_ENGINE ON)
endif()
set(STRETCH_PACKAGE_HAS_OPENSSL OFF)
if(TARGET OpenSSL::Crypto)
  set(STRETCH_PACKAGE_HAS_OPENSSL ON)
endif()
set(STRETCH_PACKAGE_HAS_CUDA ${STRETCH_WITH_NCCL_ENABLED})
foreach(_option GLOO REDIS NCCL)
  set(STRETCH_PACKAGE_HAS_${_option} OFF)
  if(STRETCH_WITH_${_option}_ENABLED)
    set(STRETCH_PACKAGE_HAS_${_option} ON)
  endif()
endforeach()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/StretchConfig.cmake.in
  ${PROJECT_BINARY_DIR}/package/StretchConfig.cmake
  INSTALL_DESTINATION ${STRETCH_INSTALL_CMAKEDIR})
# 0.x: a minor version may change the API, so only the same minor version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/package/StretchConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/package/StretchConfig.cmake
              ${PROJECT_BINARY_DIR}/package/StretchConfigVersion.cmake
  DESTINATION ${STRETCH_INSTALL_CMAKEDIR}
  COMPONENT dev)

# The CLI. Its build RPATH names the CUDA and MPI library folders; the installed copy keeps them
# (the linker's folders outside the system's), or `stretch` would not start where they are not on
# the loader's path.
# stretch-agent, the node agent alone, sits beside it: a local launch starts its agents with it.
set_target_properties(stretch stretch-agent PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
install(TARGETS stretch stretch-agent RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)

# The planner's desktop app, when Qt 6 was found (gui/): its own component, so that its Qt
# libraries stay out of the CLI's package.
if(TARGET stretch-planner)
  install(TARGETS stretch-planner RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT gui)
endif()

# `cpack -G DEB` in the build tree (docs/install.md): Debian packages of the same install under
# /usr. `stretch` holds the CLI, the libraries, headers, CMake package and the Python module
# (components runtime, dev and python); `stretch-planner` the desktop app (component gui), built
# only with Qt, depending on `stretch` of the same version. Depends are the shared libraries each
# package's programs load (dpkg-shlibdeps; the CUDA and NCCL libraries under /usr/local/cuda come
# from no Debian package and are left to the machine) and, for `stretch`, the -dev packages
# StretchConfig.cmake finds again.
set(CPACK_PACKAGE_NAME stretch)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "Stretch developers <stretch-dev@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Elastic distributed deep-learning training: DeepSpeed-style elasticity, live recovery, simulator")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(_deb_depends libfmt-dev nlohmann-json3-dev)
# What the package has -> the -dev package its CMake package then finds again.
foreach(_pair OPENSSL:libssl-dev ENGINE:libtorch-dev GLOO:libgloo-dev REDIS:libhiredis-dev)
  string(REPLACE ":" ";" _pair ${_pair})
  list(GET _pair 0 _has)
  list(GET _pair 1 _package)
  if(STRETCH_PACKAGE_HAS_${_has})
    list(APPEND _deb_depends ${_package})
  endif()
endforeach()
list(JOIN _deb_depends ", " CPACK_DEBIAN_MAIN_PACKAGE_DEPENDS)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ONE_PER_GROUP)
set(CPACK_DEBIAN_MAIN_PACKAGE_NAME stretch)
set(CPACK_DEBIAN_GUI_PACKAGE_NAME stretch-planner)
set(CPACK_DEBIAN_GUI_PACKAGE_DEPENDS "stretch (= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_GUI_DESCRIPTION
    "Stretch's planner as a desktop app: batch choices, GPU counts, checkpoint intervals and goodput under failures")
include(CPack)
cpack_add_component_group(main)
cpack_add_component(runtime GROUP main)
cpack_add_component(dev GROUP main)
cpack_add_component(python GROUP main)
if(TARGET stretch-planner)
  cpack_add_component_group(gui)
  cpack_add_component(gui GROUP gui)
endif()
