#!/usr/bin/env bash
# What a static deployment costs: size, resident memory and start-up of a program with
# one TVM-compiled model linked in (runner.cpp, gexec_add_model, with
# gexec_small_terminate_handler: no demangler), against an empty
# static C++ program built alike (empty.cpp) and TVM's own runtime library.
#
#   bash benchmarks/footprint/run.sh OUT_DIR MODEL_DIR [AARCH64_MODEL_DIR]
#
# MODEL_DIR (x86-64, native) and AARCH64_MODEL_DIR (cross-built, run under qemu-aarch64)
# are conformance models with static/ (generate_models.py --system-lib; the test
# command uses resnet natively and mlp for aarch64: the size beyond kernels, parameters
# and graph hardly depends on the model). Both programs are built -Os (MinSizeRel), static, with
# --gc-sections and link-time optimisation (-flto), and measured stripped.
# Figures:
#   size      the runner's file, less its kernels (text and data of the objects in
#             kernels.tar), its parameters and its graph: what gexec, the C and C++
#             libraries and the program cost; that less the empty program (goal: 250 KB;
#             also from the sections' bytes, without the page padding that moves the
#             file's size in steps), and the bytes of gexec's own symbols (goal: 150
#             KB; counting the runner's main, into which link-time optimisation
#             inlines gexec's code that only main calls). Baseline: the empty program,
#             and libtvm_runtime.so of the TVM in the conformance venv (hhb-tvm, TVM
#             0.16.dev0, x86-64: the runtime a TVM deployment ships besides the model's
#             library).
#   memory    the runner's peak resident set (ru_maxrss) against what it must hold: its
#             weights, the executor's storage (activations) and its code (the file less
#             the embedded parameters and graph); goal <= 1.05x. The weights are read
#             where the program holds them when the embedded blob is aligned: with
#             GEXEC_RUN set (a gexec-run), the model's params.bin is embedded as
#             `gexec-run --convert-params` writes it (64-byte aligned); without, as TVM
#             wrote it, and the runner copies it once.
#   start-up  exec to the first output line, median of 20 runs, against the empty
#             program's exec to its first line and against the goal: the first run()
#             + 5 ms (native only: under qemu the figures would be the emulator's).
# With RELAX_TAR (and RELAX_TAR_AARCH64 for the aarch64 build) set to a Relax model's
# system-library objects (the Relax suite's static/tiny.tar), the same for a Relax runner
# (relax_runner.cpp, gexec_add_relax_model): its size beyond the model's objects (text
# and data of lib0.o and devc.o, the executable and its constants) less the empty program,
# gexec's own symbols, and its start-up natively. It carries the executable's reader, the
# interpreter, the translation to a graph and the liveness planner besides the executor;
# the goals above are the graph runner's.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
out=$1 x86_model=$2 arm_model=${3:-}
mkdir -p "$out"
out=$(cd "$out" && pwd)
x86_model=$(cd "$x86_model" && pwd)
[ -z "$arm_model" ] || arm_model=$(cd "$arm_model" && pwd)

build() {  # build DIR MODEL RELAX_TAR [cmake args...]
  local dir=$1 model=$2 relax_tar=$3
  shift 3
  local args=(-DGEXEC_SOURCE_DIR="$src" -DMODEL_DIR="$model" -DPARAMS_FILE="$(embedded_params "$dir" "$model")" -DRELAX_TAR="$relax_tar" "$@")
  if command -v ccache >/dev/null; then args+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
  cmake -S "$here" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=MinSizeRel "${args[@]}" >/dev/null
  cmake --build "$dir" >/dev/null
}
cache() { sed -n "s/^$2:[A-Z]*=//p" "$1/CMakeCache.txt"; }

embedded_params() {  # embedded_params DIR MODEL: the parameter file the runner embeds
  if [ -n "${GEXEC_RUN:-}" ]; then
    mkdir -p "$1"
    "$GEXEC_RUN" --convert-params "$2/static/params.bin" "$1/params.aligned.bin" >/dev/null
    echo "$1/params.aligned.bin"
  else
    echo "$2/static/params.bin"
  fi
}

kernel_bytes() {  # kernel_bytes MODEL SIZE_TOOL [TAR]: text + data of the kernels' objects (MODEL/static/kernels.tar, or TAR)
  local objects
  objects=$(mktemp -d)
  tar -xf "${3:-$1/static/kernels.tar}" -C "$objects"
  "$2" -t "$objects"/*.o | awk 'END { print $1 + $2 }'
  rm -rf "$objects"
}

section_bytes() {  # section_bytes SIZE_TOOL PROGRAM: bytes of its sections in the file (not .bss, .tbss)
  "$1" -A "$2" | awk 'NR > 2 && $1 != ".bss" && $1 != ".tbss" && $1 != "Total" && $1 != "" { s += $2 } END { print s }'
}

owners() {  # owners NM PROGRAM: bytes of its symbols by owner, each address once
  "$1" -C -S --size-sort "$2" | python3 -c '
import collections, sys
owner = collections.Counter()
seen = set()  # aliases (the complete and base-object symbols of a constructor) are one piece of code
for line in sys.stdin:
    parts = line.rstrip("\n").split(" ", 3)
    if len(parts) < 4 or (parts[0], parts[1]) in seen:
        continue
    seen.add((parts[0], parts[1]))
    size, name = int(parts[1], 16), parts[3]
    if "tvmgen_" in name or name.endswith("__tvm_module_ctx") or name.startswith("__tvm_ffi_") or name.endswith("_compute_"):
        who = "kernels"
    elif name.startswith("gexec_embedded_"):
        who = "embedded files"
    elif "gexec::" in name or name == "main" or name.startswith(("TVMBackend", "TVMFuncCall", "TVMAPISetLastError", "gexec_terminate_handler")):
        who = "gexec"
    elif "boost::" in name:
        who = "Boost.JSON"
    elif "std::" in name or name.startswith(("__gnu_cxx", "__cxxabiv1", "operator ", "typeinfo", "vtable", "__cxa", "__gxx", "_Unwind")):
        who = "C++ library"
    else:
        who = "C library and the rest"
    owner[who] += size
print(", ".join("%s %d" % (k, v) for k, v in owner.most_common() if k not in ("kernels", "embedded files")))
'
}

sizes() {  # sizes MACHINE DIR MODEL
  local machine=$1 dir=$2 model=$3
  local runner empty kernels params graph beyond nm strip
  nm=$(cache "$dir" CMAKE_NM)
  strip=$(cache "$dir" CMAKE_STRIP)
  "$strip" -o "$dir/footprint_runner.stripped" "$dir/footprint_runner"
  "$strip" -o "$dir/footprint_empty.stripped" "$dir/footprint_empty"
  runner=$(stat -c %s "$dir/footprint_runner.stripped")
  empty=$(stat -c %s "$dir/footprint_empty.stripped")
  kernels=$(kernel_bytes "$model" "${nm%nm}size")  # binutils' size beside the toolchain's nm
  params=$(stat -c %s "$(cache "$dir" PARAMS_FILE)")
  graph=$(stat -c %s "$model/static/graph.json")
  beyond=$((runner - kernels - params - graph))
  echo "footprint size ($machine, -Os, static, --gc-sections, -flto, stripped), model $(basename "$model"):"
  echo "  runner file                              $runner bytes"
  echo "  its kernels (text+data), params, graph   $kernels + $params + $graph bytes"
  local part=$((beyond - empty)) own sections_part
  # The same from the sections' bytes: the file also holds the padding that aligns the
  # data segment to the page size the linker assumes (64 KiB on aarch64), which moves in
  # steps unrelated to the code.
  sections_part=$(( $(section_bytes "${nm%nm}size" "$dir/footprint_runner.stripped") - kernels - params - graph -
                    $(section_bytes "${nm%nm}size" "$dir/footprint_empty.stripped") ))
  own=$(owners "$nm" "$dir/footprint_runner")
  local gexec_bytes
  gexec_bytes=$(sed -n 's/.*\bgexec \([0-9]*\).*/\1/p' <<<"$own")
  echo "  runner beyond kernels, params and graph  $beyond bytes ($((beyond / 1024)) KiB)"
  echo "  empty static C++ program (baseline)      $empty bytes"
  echo "  beyond, less the empty program           $part bytes ($((part / 1000)) KB; goal <= 250 KB: $([ $part -le 250000 ] && echo met || echo NOT met);" \
       "$(awk -v a="$beyond" -v b="$empty" 'BEGIN { printf "%.2f", a / b }')x the empty program in all)"
  echo "  the same in sections (no page padding)   $sections_part bytes ($((sections_part / 1000)) KB; goal <= 250 KB: $([ $sections_part -le 250000 ] && echo met || echo NOT met))"
  echo "  gexec's own symbols                      ${gexec_bytes:-0} bytes ($((${gexec_bytes:-0} / 1000)) KB; goal <= 150 KB: $([ "${gexec_bytes:-0}" -le 150000 ] && echo met || echo NOT met))"
  echo "  the runner's symbols by owner (bytes):   $own"
}

relax_sizes() {  # relax_sizes MACHINE DIR TAR: the Relax runner's size beyond its model's objects
  local machine=$1 dir=$2 tar=$3 nm strip runner empty objects beyond part sections_part own gexec_bytes
  nm=$(cache "$dir" CMAKE_NM)
  strip=$(cache "$dir" CMAKE_STRIP)
  "$strip" -o "$dir/footprint_relax_runner.stripped" "$dir/footprint_relax_runner"
  runner=$(stat -c %s "$dir/footprint_relax_runner.stripped")
  empty=$(stat -c %s "$dir/footprint_empty.stripped")
  objects=$(kernel_bytes "" "${nm%nm}size" "$tar")
  beyond=$((runner - objects))
  part=$((beyond - empty))
  sections_part=$(( $(section_bytes "${nm%nm}size" "$dir/footprint_relax_runner.stripped") - objects -
                    $(section_bytes "${nm%nm}size" "$dir/footprint_empty.stripped") ))
  own=$(owners "$nm" "$dir/footprint_relax_runner")
  gexec_bytes=$(sed -n 's/.*\bgexec \([0-9]*\).*/\1/p' <<<"$own")
  echo "footprint size of a Relax runner ($machine, built alike), model $(basename "$tar" .tar):"
  echo "  runner file                              $runner bytes; the model's objects (text+data, the executable included) $objects bytes"
  echo "  beyond them, less the empty program      $part bytes ($((part / 1000)) KB); in sections (no page padding) $sections_part bytes ($((sections_part / 1000)) KB)"
  echo "  gexec's own symbols                      ${gexec_bytes:-0} bytes ($((${gexec_bytes:-0} / 1000)) KB)"
  echo "  the runner's symbols by owner (bytes):   $own"
}

startup() {  # startup LABEL COMMAND...: median ms from exec to the first output line
  python3 - "$@" <<'PY'
import statistics, subprocess, sys, time
label, cmd = sys.argv[1], sys.argv[2:]
times = []
for _ in range(20):
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, env={})
    p.stdout.readline()
    times.append((time.perf_counter() - t0) * 1000)
    p.communicate()
    if p.returncode != 0:
        sys.exit("%s exited with %d" % (label, p.returncode))
print("%s %.3f" % (label, statistics.median(times)))
PY
}

relax_x86=${RELAX_TAR:-} relax_arm=${RELAX_TAR_AARCH64:-}
[ -z "$relax_x86" ] || relax_x86=$(cd "$(dirname "$relax_x86")" && pwd)/$(basename "$relax_x86")
[ -z "$relax_arm" ] || relax_arm=$(cd "$(dirname "$relax_arm")" && pwd)/$(basename "$relax_arm")
build "$out/x86_64" "$x86_model" "$relax_x86"
sizes x86-64 "$out/x86_64" "$x86_model"

tvm_runtime=$(ls "$src"/build/conformance/venv/lib/python3*/site-packages/tvm/libtvm_runtime.so 2>/dev/null | head -1 || true)
beyond_x86=$(( $(stat -c %s "$out/x86_64/footprint_runner.stripped") - $(kernel_bytes "$x86_model" size) - $(stat -c %s "$(cache "$out/x86_64" PARAMS_FILE)") - $(stat -c %s "$x86_model/static/graph.json") ))
if [ -n "$tvm_runtime" ]; then
  tvm_bytes=$(stat -c %s "$tvm_runtime")
  echo "  baseline: TVM's libtvm_runtime.so (TVM 0.16.dev0 from hhb-tvm, x86-64, shared, needs libc/libstdc++ besides): $tvm_bytes bytes;" \
       "the static runner beyond its model is $(awk -v a="$beyond_x86" -v b="$tvm_bytes" 'BEGIN { printf "%.3f", a / b }')x that"
fi

[ -z "$relax_x86" ] || relax_sizes x86-64 "$out/x86_64" "$relax_x86"

echo "footprint memory (x86-64, native), model $(basename "$x86_model"):"
read -r _ params _ in_place _ copied _ storage _ rss _ load_ms _ run_ms < <("$out/x86_64/footprint_runner" | sed -n 2p)
read -r _ _ _ _ _ _ _ _ _ empty_rss _ _ _ _ < <("$out/x86_64/footprint_empty" | sed -n 2p)
code=$(( $(stat -c %s "$out/x86_64/footprint_runner.stripped") - params - $(stat -c %s "$x86_model/static/graph.json") ))
need=$(( in_place + copied + storage + code ))
echo "  embedded parameter blob $params bytes ($( [ -n "${GEXEC_RUN:-}" ] && echo "written aligned by gexec-run --convert-params" || echo "as TVM wrote it")):" \
     "weights read where they lie $in_place bytes, copied $copied bytes; executor storage (activations) $storage bytes; code $code bytes"
echo "  peak resident set $rss KiB: $(awk -v r="$rss" -v m="$need" 'BEGIN { printf "%.2f", r * 1024 / m }')x the weights, activations and code" \
     "(goal <= 1.05x: $(awk -v r="$rss" -v m="$need" 'BEGIN { print (r * 1024 <= 1.05 * m) ? "met" : "NOT met" }')); the empty program's: $empty_rss KiB"

echo "footprint start-up (x86-64, native), exec to the first output line, median of 20:"
runner_ms=$(startup runner "$out/x86_64/footprint_runner" | cut -d' ' -f2)
empty_ms=$(startup empty "$out/x86_64/footprint_empty" | cut -d' ' -f2)
echo "  runner $runner_ms ms, empty program $empty_ms ms ($(awk -v a="$runner_ms" -v b="$empty_ms" 'BEGIN { printf "%.1f", a / b }')x);" \
     "inside the runner: model + executor $load_ms ms, the first run() $run_ms ms;" \
     "goal: to the first output <= the first run() + 5 ms: $(awk -v a="$runner_ms" -v r="$run_ms" 'BEGIN { print (a <= r + 5) ? "met" : "NOT met" }')"
if [ -n "$relax_x86" ]; then
  read -r _ relax_rss _ relax_load_ms _ relax_run_ms < <("$out/x86_64/footprint_relax_runner" | sed -n 2p)
  relax_ms=$(startup relax_runner "$out/x86_64/footprint_relax_runner" | cut -d' ' -f2)
  echo "  the Relax runner $relax_ms ms ($(awk -v a="$relax_ms" -v b="$empty_ms" 'BEGIN { printf "%.1f", a / b }')x the empty program);" \
       "inside it: load_executable + virtual_machine $relax_load_ms ms, the first call $relax_run_ms ms; peak resident set $relax_rss KiB"
fi

if [ -n "$arm_model" ]; then
  build "$out/aarch64" "$arm_model" "$relax_arm" -DCMAKE_TOOLCHAIN_FILE="$src/cmake/toolchains/aarch64-linux-gnu.cmake"
  sizes aarch64 "$out/aarch64" "$arm_model"
  [ -z "$relax_arm" ] || relax_sizes aarch64 "$out/aarch64" "$relax_arm"
  qemu=$(cache "$out/aarch64" GEXEC_QEMU)
  arm_output=$(env -i "$qemu" "$out/aarch64/footprint_runner")
  [[ $arm_output == "first output: "* ]] || { echo "the aarch64 runner failed under qemu" >&2; exit 1; }
  if [ -n "$relax_arm" ]; then
    arm_output=$(env -i "$qemu" "$out/aarch64/footprint_relax_runner")
    [[ $arm_output == "first output: "* ]] || { echo "the aarch64 Relax runner failed under qemu" >&2; exit 1; }
  fi
  echo "  (it runs under $(basename "$qemu"); start-up and memory under an emulator say nothing of a board, so none are given)"
fi
