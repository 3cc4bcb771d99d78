#!/bin/sh
# Instructions per node of executor creation from graph JSON, counted by callgrind over
# creation only (gexec_bench_load_graph --callgrind N brackets it with
# CALLGRIND_START/STOP_INSTRUMENTATION; valgrind instruments nothing before), beside
# the goal of 2,500.
#
#   benchmarks/load/callgrind.sh BUILD_DIR [N]      (N: nodes in the chain, default 10000)
set -eu
build=${1:?usage: callgrind.sh BUILD_DIR [N]}
n=${2:-10000}
goal=2500
bench=$(find "$build" -name gexec_bench_load_graph -type f | head -n 1)
if ! command -v valgrind >/dev/null 2>&1; then
  echo "SKIPPED: valgrind is not installed (apt-get install -y valgrind)"
  exit 0
fi
if [ -z "$bench" ]; then
  echo "no gexec_bench_load_graph under $build: build it first (cmake --build $build --target gexec_bench_load_graph)" >&2
  exit 1
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Instructions counted between the markers of `$bench $1 $n`.
count() {
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out/cg.out" "$bench" "$1" "$n" >"$out/log" 2>&1 || {
    cat "$out/log" >&2
    exit 1
  }
  sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$out/cg.out" | head -n 1
}
count2() {  # count2 ARG1 ARG2: as count, with two arguments before n
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out/cg.out" "$bench" "$1" "$2" "$n" >"$out/log" 2>&1 || {
    cat "$out/log" >&2
    exit 1
  }
  sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$out/cg.out" | head -n 1
}
total=$(count --callgrind)
three=$(count2 --callgrind-times 3)
one=$(count2 --callgrind-times 1)
parse=$(count --callgrind-parse)
stream=$(count --callgrind-stream)
awk -v t="$total" -v p="$parse" -v s="$stream" -v n="$n" -v g="$goal" -v a="$three" -v b="$one" 'BEGIN {
  per = t / n
  printf "creation of a %d-node chain: %d instructions, %.0f per node (goal <= %d: %s, %.2fx the goal)\n", n, t, per, g, per <= g ? "met" : "NOT met", per / g
  again = (a - b) / 2 / n
  printf "a creation after the first (3 creations and a run, less 1 and a run, halved): %.0f per node (goal <= %d: %s)\n", again, g, again <= g ? "met" : "NOT met"
  printf "of which parse_graph (the JSON scanned into the compact graph, checked): %.0f per node\n", p / n
  printf "baseline, Boost.JSON streaming parser alone over the same text: %.0f per node (creation %.2fx that)\n", s / n, t / s
}'
