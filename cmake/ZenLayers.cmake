# The library's layers, enforced by the build (docs/architecture.md, "Layers").
#
# zen_layer(TARGET BELOW <targets...>) declares a library target as a layer that may use exactly the
# zen targets listed in BELOW (its layers below; linked PUBLIC here, the one place where zen targets
# link each other). Each declared layer gets a layer check, `<target>_layer_check`: a shared object
# made of the whole of the layer's archive, linked with -Wl,--no-undefined against only the layers
# below (and the third-party libraries the layer itself names). A function of a higher layer called
# from a lower one (a wrong include) is then an undefined symbol, and the normal build fails at that
# link. zen_check_layers() (called once at the end of configuration) refuses a layer that links a zen
# target outside its BELOW list, so the list cannot be bypassed by a later target_link_libraries.
# Target zen_layer_checks builds every check; tests/layers proves a wrong reference fails.
#
# The checks need every symbol resolvable at a shared link. GCC's sanitizers link their runtimes into
# shared objects; clang's ASan runtime and libFuzzer's coverage hooks come only with the executable,
# so fuzzer builds and clang sanitizer builds skip the link checks (zen_check_layers still runs).
set_property(GLOBAL PROPERTY ZEN_LAYERS "")
if(ZEN_BUILD_FUZZERS OR (ZEN_SANITIZE AND NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU"))
  set(ZEN_LAYER_LINK_CHECKS OFF)
else()
  set(ZEN_LAYER_LINK_CHECKS ON)
endif()
set(ZEN_LAYER_CHECK_SOURCE ${CMAKE_CURRENT_LIST_DIR}/layer_check.cpp)
if(NOT TARGET zen_layer_checks)
  add_custom_target(zen_layer_checks ALL)
endif()

# The check's link: the whole archive of `target`, --no-undefined, against what `target` links.
# Also used by tests/layers for its deliberately wrong layer (EXCLUDE_FROM_ALL there).
function(zen_add_layer_check target)
  cmake_parse_arguments(A "EXCLUDE_FROM_ALL" "" "" ${ARGN})
  set(check ${target}_layer_check)
  if(A_EXCLUDE_FROM_ALL)
    add_library(${check} SHARED EXCLUDE_FROM_ALL ${ZEN_LAYER_CHECK_SOURCE})
  else()
    add_library(${check} SHARED ${ZEN_LAYER_CHECK_SOURCE})
    add_dependencies(zen_layer_checks ${check})
  endif()
  # The layer's archive comes in whole (every object must resolve), then the layer's own link
  # interface: the layers below it and its third-party libraries, nothing else.
  target_link_options(${check} PRIVATE -Wl,--no-undefined
                      -Wl,--whole-archive $<TARGET_FILE:${target}> -Wl,--no-whole-archive)
  target_link_libraries(${check} PRIVATE ${target})
  set_target_properties(${check} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/layer_check)
endfunction()

function(zen_layer target)
  cmake_parse_arguments(A "" "" "BELOW" ${ARGN})
  foreach(b ${A_BELOW})
    target_link_libraries(${target} PUBLIC ${b})
  endforeach()
  set_property(TARGET ${target} PROPERTY ZEN_LAYER_BELOW "${A_BELOW}")
  set_property(GLOBAL APPEND PROPERTY ZEN_LAYERS ${target})
  get_target_property(type ${target} TYPE)
  if(NOT ZEN_LAYER_LINK_CHECKS)
    return()
  elseif(type STREQUAL "STATIC_LIBRARY")
    zen_add_layer_check(${target})
  elseif(type STREQUAL "SHARED_LIBRARY")
    target_link_options(${target} PRIVATE -Wl,--no-undefined)  # a shared layer checks itself
  endif()
endfunction()

# Every declared layer links no zen target (zen_*) beyond its BELOW list.
function(zen_check_layers)
  get_property(layers GLOBAL PROPERTY ZEN_LAYERS)
  foreach(t ${layers})
    get_target_property(below ${t} ZEN_LAYER_BELOW)
    get_target_property(libs ${t} LINK_LIBRARIES)
    get_target_property(ilibs ${t} INTERFACE_LINK_LIBRARIES)
    foreach(l ${libs} ${ilibs})
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" l "${l}")
      if(l IN_LIST layers AND NOT l IN_LIST below)
        message(FATAL_ERROR "zen layers: ${t} links ${l}, which is not among the layers below it (${below}); "
                            "see cmake/ZenLayers.cmake and docs/architecture.md")
      endif()
    endforeach()
  endforeach()
endfunction()
