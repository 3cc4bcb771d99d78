# 64-bit ARM Linux (aarch64) with Debian's g++-aarch64-linux-gnu; tests run under
# qemu-aarch64 (qemu-user). See debian-cross.cmake and docs/arm.md.
#
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
set(GEXEC_CROSS_TRIPLE aarch64-linux-gnu)
set(GEXEC_CROSS_PROCESSOR aarch64)
set(GEXEC_CROSS_QEMU aarch64)
include(${CMAKE_CURRENT_LIST_DIR}/debian-cross.cmake)
