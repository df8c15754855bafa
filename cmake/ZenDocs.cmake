# Reference docs from the public headers: `cmake --build build --target docs` -> build/docs/html.
# Doxygen's warnings are errors; the test doxygen_reference runs it in CI (scripts/deps.sh installs doxygen).
find_package(Doxygen QUIET)
if(DOXYGEN_FOUND)
  set(ZEN_DOXYGEN_OUT ${PROJECT_BINARY_DIR}/docs)
  configure_file(${PROJECT_SOURCE_DIR}/docs/Doxyfile.in ${PROJECT_BINARY_DIR}/Doxyfile @ONLY)
  add_custom_target(docs
    COMMAND ${CMAKE_COMMAND} -E make_directory ${ZEN_DOXYGEN_OUT}
    COMMAND ${DOXYGEN_EXECUTABLE} ${PROJECT_BINARY_DIR}/Doxyfile
    WORKING_DIRECTORY ${PROJECT_BINARY_DIR}
    COMMENT "Doxygen: reference docs in ${ZEN_DOXYGEN_OUT}/html (warnings are errors)"
    VERBATIM)
  if(ZEN_BUILD_TESTS)
    add_test(NAME doxygen_reference
      COMMAND ${CMAKE_COMMAND} --build ${PROJECT_BINARY_DIR} --target docs)
    set_tests_properties(doxygen_reference PROPERTIES TIMEOUT 300 LABELS docs)
  endif()
else()
  message(STATUS "zen: doxygen not found, no `docs` target (scripts/deps.sh installs it)")
endif()
