# cmake --install: headers, libzen.so and the static libraries, the command-line tools, a CMake
# package (find_package(zen CONFIG [COMPONENTS mpi fl cuda nccl]) -> zen::zen, ...) and zen.pc.
include(CMakePackageConfigHelpers)
set(zen_install_targets zen zen_static zen_capi_static zen_core zen_encode zen_comm zen_schemes zen_cuda)
if(ZEN_MPI_ENABLED)
  list(APPEND zen_install_targets zen_mpi)
endif()
install(TARGETS ${zen_install_targets} EXPORT zenTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# Component fl (also requested as orbit or trace): the trace, orbit and FL libraries.
set(zen_fl_targets zen_trace_lib zen_orbit zen_fl_learn zen_fl_sim zen_fl_loopback)
install(TARGETS ${zen_fl_targets} EXPORT zenFlTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT zenFlTargets NAMESPACE zen:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/zen)
# Component torch: the LibTorch adapter, where LibTorch was found.
if(TARGET zen_torch)
  install(TARGETS zen_torch EXPORT zenTorchTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT zenTorchTargets NAMESPACE zen:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/zen)
endif()
# zen::cuda, the device path, is in the main export set in every build, since libzen.so and libzen.a
# carry it (the C API reaches it; without CUDA it runs the device plans on host communicators).
# Components cuda and nccl say whether it was built with CUDA / NCCL.
if(TARGET zen_nccl_imported)
  install(TARGETS zen_nccl_imported EXPORT zenTargets)
endif()
set(ZEN_PKG_CUDA ${ZEN_CUDA_ENABLED})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/zen DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
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
foreach(tool zen_perf zen_model zen_micro zen_trace zen_orbit_cli zen_gpu_bench train_embedding)
  if(TARGET ${tool})
    install(TARGETS ${tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} OPTIONAL)  # a partial build installs what it built
  endif()
endforeach()
foreach(script cluster.sh)
  install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/${script} DESTINATION ${CMAKE_INSTALL_DATADIR}/zen/scripts)
endforeach()
