#!/usr/bin/env bash
# Builds tests/static_deploy for one model and checks what a static deployment promises:
#
#   bash tests/static_deploy/run.sh BUILD_DIR MODEL_DIR [TOOLCHAIN_FILE] [cmake args...]
#
# the program is static (no program interpreter, no dynamic section), has no dlopen in
# it, and run alone in an empty folder with an empty environment (under qemu-user, with
# no target libraries, when cross-built) it reproduces TVM's outputs. Exits 77 (skipped)
# when MODEL_DIR has no static/ (generate_models.py --system-lib).
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
out=$1 model=$2 toolchain=${3:-}
shift $(($# < 3 ? $# : 3))
if [ ! -f "$model/static/kernels.tar" ]; then
  echo "SKIPPED: $model/static/kernels.tar was not made (generate_models.py --system-lib)"
  exit 77
fi
model=$(cd "$model" && pwd)
args=(-DGEXEC_SOURCE_DIR="$src" -DMODEL_DIR="$model" "$@")
[ -z "$toolchain" ] || args+=(-DCMAKE_TOOLCHAIN_FILE="$toolchain")
if command -v ccache >/dev/null; then args+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S "$src/tests/static_deploy" -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=Release "${args[@]}" >/dev/null
cmake --build "$out" >/dev/null
bin=$out/static_model

cache() { sed -n "s/^$1:[A-Z]*=//p" "$out/CMakeCache.txt"; }
nm=$(cache CMAKE_NM)
readelf=$(cache CMAKE_READELF)
emulator=$(cache GEXEC_QEMU)
fail() { echo "FAIL: $*" >&2; exit 1; }
if "$readelf" -l "$bin" | grep -q "INTERP"; then fail "$bin asks for a program interpreter"; fi
"$readelf" -d "$bin" | grep -q "no dynamic section" || fail "$bin has a dynamic section"
if "$nm" "$bin" | grep -qw "dlopen"; then fail "$bin contains dlopen"; fi
echo "$bin: static, no dynamic section, no dlopen; $(stat -c %s "$bin") bytes"

alone=$(mktemp -d)
trap 'rm -rf "$alone"' EXIT
cp "$bin" "$alone/"
cd "$alone"
if [ -n "$toolchain" ]; then
  env -i "$emulator" ./static_model
else
  env -i ./static_model
fi
