#!/usr/bin/env bash
# Builds tests/relax_static over the Relax suite's system-library models (a program each,
# and one linking all of them, static_all_models) and checks what
# a static deployment promises, as tests/static_deploy/run.sh does for graph models:
#
#   bash tests/relax_static/run.sh BUILD_DIR RELAX_DIR [TOOLCHAIN_FILE] [cmake args...]
#
# each program is static (no program interpreter, no dynamic section); neither gexec nor
# the kernels call the dynamic loader (no dlopen, dlsym, dladdr, dlinfo among the
# undefined symbols of the program's own objects); run alone in an empty folder with an
# empty environment (under qemu-user when cross-built) it opens no file but what the
# kernel tells about the machine (/sys, /proc), and it reproduces TVM's VM's outputs.
# Exits 77 (skipped) when RELAX_DIR has no static models (the suite was SKIPPED: no TVM).
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
out=$1 relax=$2 toolchain=${3:-}
shift $(($# < 3 ? $# : 3))
if [ -f "$relax/SKIPPED" ]; then
  echo "SKIPPED: $(cat "$relax/SKIPPED")"
  exit 77
fi
if [ ! -f "$relax/static/manifest.txt" ]; then
  echo "SKIPPED: $relax/static/manifest.txt was not made (tests/relax/make_models.sh)"
  exit 77
fi
relax=$(cd "$relax" && pwd)
args=(-DGEXEC_SOURCE_DIR="$src" -DRELAX_DIR="$relax" "$@")
[ -z "$toolchain" ] || args+=(-DCMAKE_TOOLCHAIN_FILE="$toolchain")
if command -v ccache >/dev/null; then args+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
# Only what the programs need of gexec's project: its headers and CMake functions.
args+=(-DGEXEC_BUILD_TESTS=OFF -DGEXEC_BUILD_TOOLS=OFF -DGEXEC_BUILD_COMPILED=OFF -DGEXEC_BUILD_C_API=OFF -DGEXEC_INSTALL=OFF)
mkdir -p "$out"
out=$(cd "$out" && pwd)
log=$out/build.log
{ cmake -S "$src/tests/relax_static" -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=Release "${args[@]}" && cmake --build "$out"; } >"$log" 2>&1 ||
  { tail -40 "$log" >&2; echo "FAIL: building tests/relax_static (the whole log: $log)" >&2; exit 1; }

cache() { sed -n "s/^$1:[A-Z]*=//p" "$out/CMakeCache.txt"; }
nm=$(cache CMAKE_NM)
readelf=$(cache CMAKE_READELF)
emulator=$(cache GEXEC_QEMU)
fail() { echo "FAIL: $*" >&2; exit 1; }
alone=$(mktemp -d)
trap 'rm -rf "$alone"' EXIT
cd "$alone"
while read -r name _; do
  [ -n "$name" ] || continue
  bin=$out/static_$name
  # Outputs are read into variables first: `grep -q` in a pipeline under pipefail would
  # fail the pipeline when it stops reading early.
  headers=$("$readelf" -l "$bin")
  dynamic=$("$readelf" -d "$bin")
  if [[ $headers == *INTERP* ]]; then fail "$bin asks for a program interpreter"; fi
  [[ $dynamic == *"no dynamic section"* ]] || fail "$bin has a dynamic section"
  own=$(find "$out/CMakeFiles/relax_static_main.dir" "$out/CMakeFiles/static_$name.dir" -name '*.o'; ls "$out"/gexec_models/"static_$name"/*/libkernels.a)
  # shellcheck disable=SC2086
  undefined=$("$nm" -u $own 2>/dev/null | awk '{ print $NF }' | sort -u)
  for symbol in dlopen dlsym dladdr dladdr1 dlinfo dlclose dlmopen dl_iterate_phdr; do
    if grep -qx "$symbol" <<<"$undefined"; then fail "the program's own code calls $symbol"; fi
  done
  echo "$bin: static, no dynamic section, its own code calls no dynamic-loader function; $(stat -c %s "$bin") bytes"

  cp "$bin" "$alone/"
  trace=$alone.trace
  rc=0
  if [ -n "$toolchain" ]; then
    env -i "$emulator" -strace "./static_$name" 2>"$trace" || rc=$?
  elif command -v strace >/dev/null; then
    env -i "$(command -v strace)" -f -qq -o "$trace" -e trace=open,openat "./static_$name" || rc=$?
  else
    env -i "./static_$name" || rc=$?
    : >"$trace"
    echo "(strace is not installed: the files it opens are not checked)"
  fi
  opened=$(grep -oE 'open(at)?\((AT_FDCWD, ?)?"[^"]*"' "$trace" | sed 's/.*"\(.*\)"/\1/' | sort -u || true)
  rm -f "$trace" "$alone/static_$name"
  echo "files it opened: ${opened:-none}" | tr '\n' ' '
  echo
  while read -r path; do
    [ -z "$path" ] || [[ $path == /sys/* || $path == /proc/* ]] || fail "static_$name opened $path"
  done <<<"$opened"
  [ "$rc" = 0 ] || fail "static_$name exited with $rc"
done < <(cat "$relax/static/manifest.txt"; echo all_models)  # and the program linking every model
