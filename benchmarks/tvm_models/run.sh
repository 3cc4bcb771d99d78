#!/usr/bin/env bash
# gexec against TVM's graph executor on the conformance models, both measured in this
# run on this machine: bash benchmarks/tvm_models/run.sh [BUILD_DIR]
# BUILD_DIR (default build-bench) gets a Release build; the models are generated there
# by tests/conformance/make_models.sh (cached).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/deps.sh
build=${1:-build-bench}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGEXEC_BUILD_TESTS=OFF -DGEXEC_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target gexec_bench_tvm_models
models="$build/conformance"
bash tests/conformance/make_models.sh "$models"
if [ -f "$models/SKIPPED" ]; then
  echo "SKIPPED: $(cat "$models/SKIPPED")"
  exit 0
fi
"$models/venv/bin/python" benchmarks/tvm_models/time_tvm.py "$models" "$build/tvm_times.json"
"$build/benchmarks/gexec_bench_tvm_models" "$models" "$build/tvm_times.json"
