#!/usr/bin/env bash
# Builds gexec and runs its whole test suite: bash scripts/test.sh
# With g++ (everything, the TVM conformance suite included), then with clang
# (everything but the conformance suite, plus the fuzz targets over their seeds under
# ASan and UBSan), each with -Wall -Wextra -Werror.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
build=${GEXEC_BUILD_DIR:-build}
type=${GEXEC_BUILD_TYPE:-RelWithDebInfo}

CC=clang CXX=clang++ cmake -S . -B "$build-clang" -G Ninja -DCMAKE_BUILD_TYPE="$type" \
  -DGEXEC_BUILD_BENCHMARKS=OFF -DGEXEC_BUILD_FUZZERS=ON >/dev/null
cmake --build "$build-clang" -j "$(nproc)"
ctest --test-dir "$build-clang" --output-on-failure -j "$(nproc)" -LE conformance

CC=gcc CXX=g++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="$type" >/dev/null
cmake --build "$build" -j "$(nproc)"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
