#!/usr/bin/env bash
# Installs the Debian 12 packages gexec builds and tests with, when they are missing.
set -euo pipefail
packages=(cmake ninja-build ccache g++ clang libclang-rt-14-dev libboost-json1.81-dev libboost1.81-dev libdlpack-dev doctest-dev
          libcli11-dev libbenchmark-dev python3-venv pkg-config valgrind cargo rustc golang-go default-jdk-headless
          g++-aarch64-linux-gnu g++-arm-linux-gnueabihf qemu-user)  # the arm stage: cross compilers, qemu-aarch64 and qemu-arm
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The arm stage's aarch64 JVM (binding_java_aarch64): Debian's openjdk-17-jre-headless:arm64
# unpacked into GEXEC_JAVA_AARCH64_JRE (CMake's default below) without installing it.
jre=${GEXEC_JAVA_AARCH64_JRE:-/opt/gexec/aarch64-jre}
if [ ! -f "$jre/complete" ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo sh "$(dirname "$0")/../bindings/java/fetch_aarch64_jre.sh" "$jre"
fi
