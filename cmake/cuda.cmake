# The CUDA backend: on by itself when nvcc is found (FLASHATTN_WITH_CUDA=AUTO),
# forced with ON, dropped with OFF.
set(FLASHATTN_WITH_CUDA AUTO CACHE STRING "Build the CUDA backend: AUTO, ON or OFF")
set(FLASHATTN_CUDA_HEAD_DIMS "64;96;128;192;256" CACHE STRING "Head dims to compile kernels for")
set(FLASHATTN_CUDA_DTYPES "bf16;fp16" CACHE STRING "Element types to compile kernels for")

set(FLASHATTN_CUDA OFF)
if(FLASHATTN_WITH_CUDA STREQUAL "AUTO")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(FLASHATTN_CUDA ON)
  endif()
elseif(FLASHATTN_WITH_CUDA)
  set(FLASHATTN_CUDA ON)
endif()

if(FLASHATTN_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    # sm80 kernels as machine code for Ampere and for Hopper, and as sm_80 PTX,
    # which the driver compiles for GPUs newer than the build (RTX 50, B200).
    set(CMAKE_CUDA_ARCHITECTURES "80;90a-real")
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  include(${CMAKE_CURRENT_LIST_DIR}/cutlass.cmake)
  message(STATUS "flashattn: CUDA backend ON (architectures ${CMAKE_CUDA_ARCHITECTURES}, head dims ${FLASHATTN_CUDA_HEAD_DIMS}, dtypes ${FLASHATTN_CUDA_DTYPES})")
else()
  message(STATUS "flashattn: CUDA backend OFF")
endif()
