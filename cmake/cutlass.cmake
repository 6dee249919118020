# CUTLASS/CuTe headers, pinned, fetched from PyPI into third_party/cutlass the
# first time the CUDA backend is configured.
set(FLASHATTN_CUTLASS_VERSION 4.2.0.0)
set(FLASHATTN_CUTLASS_DIR ${PROJECT_SOURCE_DIR}/third_party/cutlass)
set(_fa_cutlass_stamp ${FLASHATTN_CUTLASS_DIR}/nvidia_cutlass-${FLASHATTN_CUTLASS_VERSION}.dist-info)
if(NOT EXISTS ${_fa_cutlass_stamp})
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  message(STATUS "flashattn: installing CUTLASS ${FLASHATTN_CUTLASS_VERSION} headers into ${FLASHATTN_CUTLASS_DIR}")
  file(REMOVE_RECURSE ${FLASHATTN_CUTLASS_DIR})
  execute_process(
    COMMAND ${Python3_EXECUTABLE} -m pip install --quiet --no-deps --target ${FLASHATTN_CUTLASS_DIR}
            nvidia-cutlass==${FLASHATTN_CUTLASS_VERSION}
    RESULT_VARIABLE _fa_rc)
  if(_fa_rc OR NOT EXISTS ${_fa_cutlass_stamp})
    message(FATAL_ERROR "flashattn: could not install nvidia-cutlass==${FLASHATTN_CUTLASS_VERSION} with pip")
  endif()
endif()
set(FLASHATTN_CUTLASS_INCLUDE ${FLASHATTN_CUTLASS_DIR}/cutlass_library/source/include)
