# 32-bit ARM Linux, hard-float ABI (armv7-a with VFPv3-D16, Debian's armhf), with
# Debian's g++-arm-linux-gnueabihf; tests run under qemu-arm (qemu-user). See
# debian-cross.cmake and docs/arm.md.
#
#   cmake -S . -B build-armhf -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/arm-linux-gnueabihf.cmake
set(GEXEC_CROSS_TRIPLE arm-linux-gnueabihf)
set(GEXEC_CROSS_PROCESSOR armv7l)
set(GEXEC_CROSS_QEMU arm)
include(${CMAKE_CURRENT_LIST_DIR}/debian-cross.cmake)
