# cmake --install: headers, libzen.so and the static libraries, the command-line tools, a CMake
# package (find_package(zen CONFIG) -> zen::zen) and zen.pc for pkg-config.
include(CMakePackageConfigHelpers)
set(zen_install_targets zen zen_static zen_capi_static zen_core zen_schemes)
if(ZEN_MPI_ENABLED)
  list(APPEND zen_install_targets zen_mpi)
endif()
install(TARGETS ${zen_install_targets} EXPORT zenTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# Headers of the installed libraries (the orbit/FL/trace modules and the CUDA path are not packaged yet).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/zen DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  PATTERN "fl" EXCLUDE PATTERN "orbit" EXCLUDE PATTERN "trace" EXCLUDE PATTERN "cuda" EXCLUDE)
install(FILES ${PROJECT_BINARY_DIR}/include/zen/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/zen)
install(EXPORT zenTargets NAMESPACE zen:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/zen)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/zenConfig.cmake.in
  ${PROJECT_BINARY_DIR}/zenConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/zen)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/zenConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/zenConfig.cmake ${PROJECT_BINARY_DIR}/zenConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/zen)

set(ZEN_PC_REQUIRES "eigen3")
set(ZEN_PC_CFLAGS "")
if(ZEN_MPI_ENABLED)
  set(ZEN_PC_REQUIRES "eigen3 mpi-c")
  set(ZEN_PC_CFLAGS "-DZEN_HAVE_MPI=1")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/zen.pc.in ${PROJECT_BINARY_DIR}/zen.pc @ONLY)
# Relocatable: paths are relative to the .pc file (lib/pkgconfig), whatever the install prefix.
install(FILES ${PROJECT_BINARY_DIR}/zen.pc DESTINATION lib/pkgconfig)

# Tools: executables, never part of the libraries.
foreach(tool zen_perf zen_model zen_micro zen_trace zen_orbit_cli)
  if(TARGET ${tool})
    install(TARGETS ${tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()
foreach(script cluster.sh)
  install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/${script} DESTINATION ${CMAKE_INSTALL_DATADIR}/zen/scripts)
endforeach()
