# Cross build for 64-bit ARM Linux with Debian's cross compiler
# (g++-aarch64-linux-gnu); tests run through qemu-user (qemu-aarch64) when it is
# installed. Used by scripts/arm64_check.sh.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
find_program(FLASHATTN_QEMU_AARCH64 qemu-aarch64)
if(FLASHATTN_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${FLASHATTN_QEMU_AARCH64} -L /usr/aarch64-linux-gnu)
endif()
