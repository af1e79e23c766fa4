# Cross build for ARM64 Linux with Debian's g++-aarch64-linux-gnu (make test-arm64). Tests
# run under qemu-user (qemu-user-static): ctest and GoogleTest's test discovery call the
# binaries through CMAKE_CROSSCOMPILING_EMULATOR; QEMU_CPU in the environment picks the
# emulated CPU (max: dotprod + i8mm; cortex-a72: plain ARMv8.0 NEON).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Static binaries: qemu needs no arm64 loader or libraries on this machine.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static)
# The cross toolchain's own sysroot for libraries; headers-only packages (GoogleTest's
# sources) come from the build machine.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
