#!/usr/bin/env bash
# Builds gexec and runs the bundled MLP with its kernel library: bash scripts/example.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
build=${GEXEC_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${GEXEC_BUILD_TYPE:-RelWithDebInfo} >/dev/null
cmake --build "$build" -j "$(nproc)" --target gexec_run_model
"$build/examples/gexec_run_model" --graph examples/mlp/graph.json --lib "$build/tests/kernels/libgexec_test_kernels.so" \
  --params examples/mlp/params.bin --input x=0.5,-1,2,0.25 --repeat 5
