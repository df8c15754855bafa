# Find NCCL for the CUDA build (it is not in Debian). Searched in this order, the first hit wins:
#   1. NCCL_HOME (environment or cache variable: include/ and lib/ or lib64/);
#   2. pip's nvidia-nccl wheel (site-packages/nvidia/nccl/{include,lib}: where GPU machines with a
#      PyTorch venv have it), located by asking `python3` (ZEN_NCCL_PYTHON) where nvidia.nccl is;
#   3. the CUDA toolkit (ZEN_NCCL_CUDA_DIRS, default: CUDAToolkit's dirs and /usr/local/cuda).
# The library may be a bare libnccl.so.2 (the wheel ships no libnccl.so link).
# Sets NCCL_INCLUDE_DIR, NCCL_LIBRARY and ZEN_NCCL_FOUND; with ZEN_WITH_NCCL=ON, not finding NCCL
# is a configuration error (AUTO: a warning, and the NCCL backend is left out).
if(NOT DEFINED ZEN_NCCL_PYTHON)
  find_program(ZEN_NCCL_PYTHON NAMES python3)
endif()
if(NOT DEFINED ZEN_NCCL_CUDA_DIRS)
  set(ZEN_NCCL_CUDA_DIRS ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/include /usr/local/cuda/lib64)
endif()
set(_zen_nccl_home "$ENV{NCCL_HOME}")
if(NCCL_HOME)
  set(_zen_nccl_home "${NCCL_HOME}")
endif()
set(_zen_nccl_pip "")
if(ZEN_NCCL_PYTHON)
  execute_process(
    COMMAND ${ZEN_NCCL_PYTHON} -c
      "import importlib.util as u; s = u.find_spec('nvidia.nccl'); print(list(s.submodule_search_locations)[0] if s and s.submodule_search_locations else '')"
    OUTPUT_VARIABLE _zen_nccl_pip OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
endif()
foreach(_where home pip cuda)
  if(_where STREQUAL "home")
    if(NOT _zen_nccl_home)
      continue()
    endif()
    set(_inc ${_zen_nccl_home}/include)
    set(_lib ${_zen_nccl_home}/lib ${_zen_nccl_home}/lib64)
  elseif(_where STREQUAL "pip")
    if(NOT _zen_nccl_pip)
      continue()
    endif()
    set(_inc ${_zen_nccl_pip}/include)
    set(_lib ${_zen_nccl_pip}/lib)
  else()
    set(_inc ${ZEN_NCCL_CUDA_DIRS})
    set(_lib ${ZEN_NCCL_CUDA_DIRS})
  endif()
  find_path(NCCL_INCLUDE_DIR nccl.h PATHS ${_inc} NO_DEFAULT_PATH)
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 PATHS ${_lib} NO_DEFAULT_PATH)
endforeach()
if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
  set(ZEN_NCCL_FOUND ON)
  message(STATUS "zen: NCCL ${NCCL_LIBRARY} (headers ${NCCL_INCLUDE_DIR})")
else()
  set(ZEN_NCCL_FOUND OFF)
  set(_zen_nccl_msg "zen: NCCL not found (looked in NCCL_HOME='${_zen_nccl_home}', pip's nvidia.nccl='${_zen_nccl_pip}' and the CUDA toolkit ${ZEN_NCCL_CUDA_DIRS})")
  if(ZEN_WITH_NCCL STREQUAL "ON")
    message(FATAL_ERROR "${_zen_nccl_msg}; ZEN_WITH_NCCL=ON asks for it (AUTO builds without it)")
  else()
    message(WARNING "${_zen_nccl_msg}; the NCCL backend is not built")
  endif()
endif()
