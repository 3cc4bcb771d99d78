#!/usr/bin/env bash
# Builds gexec's examples and runs the bundled MLP: bash scripts/example.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
build=${GEXEC_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${GEXEC_BUILD_TYPE:-RelWithDebInfo} >/dev/null
cmake --build "$build" -j "$(nproc)" --target gexec_inspect
"$build/examples/gexec_inspect" --graph examples/mlp/graph.json --params examples/mlp/params.bin
