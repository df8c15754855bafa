# The Python package (python/zen: pure Python over libzen's C API through ctypes).
#  - build tree: build/python/zen holds links to the sources plus _install.py pointing at build/lib, so
#    PYTHONPATH=build/python is the one variable a developer needs (docs/python.md);
#  - cmake --install: the package goes to the site-packages of the install prefix (the directory the
#    interpreter already searches when there is one, e.g. /usr/local/lib/python3.11/dist-packages on
#    Debian; else <prefix>/lib/python3.X/site-packages), with _install.py pointing at the installed
#    libzen; the install prints the directory.
# ZEN_PYTHON is the interpreter (Debian's /usr/bin/python3, which has python3-torch and python3-mpi4py).
option(ZEN_WITH_PYTHON "Stage and install the Python package (python/zen)" ON)
if(EXISTS /usr/bin/python3)
  set(_zen_py_default /usr/bin/python3)
else()
  find_program(_zen_py_default NAMES python3)
endif()
set(ZEN_PYTHON "${_zen_py_default}" CACHE FILEPATH "Python interpreter of the Python package and its tests")
if(NOT ZEN_WITH_PYTHON OR NOT ZEN_PYTHON)
  set(ZEN_PYTHON_ENABLED OFF)
  return()
endif()
set(ZEN_PYTHON_ENABLED ON)

file(GLOB _zen_py_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/zen/*.py)
set(_zen_py_stage ${PROJECT_BINARY_DIR}/python/zen)
file(MAKE_DIRECTORY ${_zen_py_stage})
# Links, not copies: an edit of python/zen/*.py is live in the build tree at once.
file(GLOB _zen_py_stale ${_zen_py_stage}/*.py)
foreach(f ${_zen_py_stale})
  get_filename_component(n ${f} NAME)
  if(NOT n STREQUAL "_install.py" AND NOT EXISTS ${PROJECT_SOURCE_DIR}/python/zen/${n})
    file(REMOVE ${f})
  endif()
endforeach()
foreach(f ${_zen_py_sources})
  get_filename_component(n ${f} NAME)
  file(CREATE_LINK ${f} ${_zen_py_stage}/${n} SYMBOLIC)
endforeach()
file(RELATIVE_PATH _zen_py_rel ${_zen_py_stage} ${CMAKE_LIBRARY_OUTPUT_DIRECTORY})
file(WRITE ${_zen_py_stage}/_install.py
  "\"\"\"Where libzen is, relative to this package (written by CMake for the build tree).\"\"\"\nLIBDIR = \"${_zen_py_rel}\"\n")

# Install: the destination depends on the prefix given at install time (cmake --install --prefix P),
# so the install script (cmake/zen_python_install.cmake.in) asks the interpreter then.
configure_file(${PROJECT_SOURCE_DIR}/cmake/zen_python_install.cmake.in ${PROJECT_BINARY_DIR}/zen_python_install.cmake @ONLY)
install(SCRIPT ${PROJECT_BINARY_DIR}/zen_python_install.cmake)
