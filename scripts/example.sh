#!/usr/bin/env bash
# Builds gexec's digit classifier (examples/digits: a two-layer perceptron trained on
# scikit-learn's 8x8 digits) with the sample kernel library it calls, and runs it over
# the 60 committed test images: predictions beside labels, accuracy, latency.
#   bash scripts/example.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
build=${GEXEC_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${GEXEC_BUILD_TYPE:-RelWithDebInfo} >/dev/null
cmake --build "$build" -j "$(nproc)" --target gexec_digits gexec_test_kernels
"$build/examples/gexec_digits" --model-dir examples/digits --lib "$build/tests/kernels/libgexec_test_kernels.so" \
  --check examples/digits/expected.json
