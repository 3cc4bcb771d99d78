#!/usr/bin/env bash
# Per-call cost of run() from each language, in one run: C++ and the C API
# (gexec_bench_c_api, one process), then Rust (bindings/rust/examples/bench.rs) and Java
# (bindings/java/bench/Bench.java), each over the same libgexec_c and examples/mlp; each
# figure beside the C API's, and the C API's beside the C++ call (goal: within 20 ns).
# A language whose toolchain is absent is SKIPPED, saying so.
#
#   bash benchmarks/c_api/bindings.sh BUILD_DIR [repeats]
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$1" && pwd)
repeats=${2:-200}
libdir=$(dirname "$(find "$build" -maxdepth 2 -name 'libgexec_c.so' | head -n 1)")
kernels=$( (find "$build/tests/kernels" "$build/benchmarks/kernels" -name libgexec_test_kernels.so 2>/dev/null || true) | head -n 1)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

"$build/benchmarks/gexec_bench_c_api" "$repeats" | tee "$out/c"
cpp=$(sed -n 's/.*C++ executor.run(): *\([0-9.]*\) ns.*/\1/p' "$out/c")
c=$(sed -n 's/.*C API executor_run: *\([0-9.]*\) ns.*/\1/p' "$out/c")

cargo=$(command -v cargo || true)
if [ -z "$cargo" ]; then
  echo "Rust: SKIPPED (cargo is not installed)"
else
  (cd "$src/bindings/rust" && GEXEC_C_LIB_DIR=$libdir CARGO_TARGET_DIR=$build/bindings/rust/bench-target \
     "$cargo" run --offline --quiet --release --example bench -- "$src" "$kernels" "$repeats") | tee "$out/rust"
fi
if ! command -v javac >/dev/null; then
  echo "Java: SKIPPED (no JDK)"
else
  GEXEC_JAVA_BENCH=1 bash "$src/bindings/java/run_test.sh" "$src" "$libdir" "$kernels" "$build/bindings/java/bench-work" >"$out/java.log" 2>&1 ||
    { cat "$out/java.log" >&2; exit 1; }
  sed -n '/^Java, examples\/mlp/,+2p' "$out/java.log" | tee "$out/java"
fi

figure() { sed -n "s/.*$2 *\([0-9.]*\) ns.*/\1/p" "$out/$1" 2>/dev/null | head -n 1; }
rust=$(figure rust 'Executor::run():')
java=$(figure java 'Executor.run():')
line="run() per call, same run: C++ $cpp ns, C API $c ns ($(awk -v a="$c" -v b="$cpp" 'BEGIN { printf "%+.1f", a - b }') ns: goal within 20 ns)"
[ -z "$rust" ] || line+=", Rust $rust ns ($(awk -v a="$rust" -v b="$c" 'BEGIN { printf "%+.1f", a - b }') ns against C)"
[ -z "$java" ] || line+=", Java $java ns ($(awk -v a="$java" -v b="$c" 'BEGIN { printf "%+.1f", a - b }') ns against C)"
echo "$line"
