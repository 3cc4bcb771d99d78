#!/usr/bin/env bash
# The Rust binding's tests (cargo test --offline) against a built libgexec_c.
# usage: run_test.sh <gexec source dir> <dir of libgexec_c.so> <libgexec_test_kernels.so> [<build dir>]
# The build dir (default: a temporary one) holds cargo's target dir, so the source tree
# stays clean. Exits 77 with "SKIP: <reason>" where cargo is absent, or where
# GEXEC_BINDING_SKIP gives a reason (CMake sets it in sanitizer builds).
set -euo pipefail
# shellcheck source=../arguments.sh
source "$(dirname "$0")/../arguments.sh"
cargo=${CARGO:-$(command -v cargo || true)}
if [ -z "$cargo" ] && [ -x "$HOME/.cargo/bin/cargo" ]; then cargo=$HOME/.cargo/bin/cargo; fi
if [ -z "$cargo" ] || [ ! -x "$cargo" ]; then
  echo "SKIP: cargo is not installed (Debian: apt-get install cargo rustc)"
  exit 77
fi
if [ -z "$build" ]; then
  build=$(mktemp -d)
  trap 'rm -rf "$build"' EXIT
fi
mkdir -p "$build"
export CARGO_TARGET_DIR=$build/target GEXEC_C_LIB_DIR=$libdir GEXEC_SOURCE_DIR=$src GEXEC_TEST_KERNELS=$kernels
cd "$src/bindings/rust"
echo "$("$cargo" --version), $(${RUSTC:-rustc} --version 2>/dev/null || echo rustc)"
"$cargo" test --offline ${CARGO_BUILD_JOBS:+-j "$CARGO_BUILD_JOBS"}
