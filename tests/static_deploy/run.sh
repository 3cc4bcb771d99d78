#!/usr/bin/env bash
# Builds tests/static_deploy for one model and checks what a static deployment promises:
#
#   bash tests/static_deploy/run.sh BUILD_DIR MODEL_DIR [TOOLCHAIN_FILE] [cmake args...]
#
# the program is static (no program interpreter, no dynamic section); neither gexec nor
# the kernels call the dynamic loader (no dlopen, dlsym, dladdr among the undefined
# symbols of the program's own objects: static glibc links its own dlopen in every
# program, for iconv, so the linked program cannot be asked); run alone in an empty
# folder with an empty environment (under qemu-user with no target libraries, when
# cross-built) it opens no file but what the kernel tells about the machine (/sys,
# /proc: gexec reads the CPU quota), as strace or qemu's -strace shows, and it
# reproduces TVM's outputs. Exits 77 (skipped) when MODEL_DIR has no static/
# (generate_models.py --system-lib).
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
# Outputs are read into variables first: `grep -q` in a pipeline under pipefail would
# fail the pipeline when it stops reading early.
headers=$("$readelf" -l "$bin")
dynamic=$("$readelf" -d "$bin")
if [[ $headers == *INTERP* ]]; then fail "$bin asks for a program interpreter"; fi
[[ $dynamic == *"no dynamic section"* ]] || fail "$bin has a dynamic section"
own=$(find "$out/CMakeFiles/static_model.dir" -name '*.o'; echo "$out/gexec/libgexec_boost_json.a"; ls "$out"/gexec_models/*/*/libkernels.a)
# shellcheck disable=SC2086
undefined=$("$nm" -u $own 2>/dev/null | awk '{ print $NF }' | sort -u)
for symbol in dlopen dlsym dladdr dlclose dlmopen; do
  if grep -qx "$symbol" <<<"$undefined"; then fail "the program's own code calls $symbol"; fi
done
echo "$bin: static, no dynamic section, its own code calls no dynamic-loader function; $(stat -c %s "$bin") bytes"

# gexec_small_terminate_handler: an uncaught gexec::error still names its type and
# message, then aborts (SIGABRT: status 134), with libstdc++'s demangler left out.
symbols=$("$nm" "$out/uncaught")
if grep -q __cxa_demangle <<<"$symbols"; then fail "$out/uncaught links libstdc++'s demangler"; fi
urc=0
if [ -n "$toolchain" ]; then
  said=$(env -i "$emulator" "$out/uncaught" 2>&1 >/dev/null) || urc=$?
else
  said=$(env -i "$out/uncaught" 2>&1 >/dev/null) || urc=$?
fi
[ "$urc" = 134 ] || fail "$out/uncaught exited with $urc, not 134 (SIGABRT)"
[[ $said == *"terminate called after throwing an instance of 'N5gexec"*"5errorE'"*"what():  gexec: invalid_graph: uncaught on purpose (1 argument)"* ]] ||
  fail "$out/uncaught said: $said"
echo "uncaught gexec::error with gexec_small_terminate_handler: aborted, saying: $(head -1 <<<"$said")"

alone=$(mktemp -d)
trap 'rm -rf "$alone"' EXIT
cp "$bin" "$alone/"
cd "$alone"
trace=$alone.trace
rc=0
if [ -n "$toolchain" ]; then
  env -i "$emulator" -strace ./static_model 2>"$trace" || rc=$?
elif command -v strace >/dev/null; then
  env -i "$(command -v strace)" -f -qq -o "$trace" -e trace=open,openat ./static_model || rc=$?
else
  env -i ./static_model || rc=$?
  : >"$trace"
  echo "(strace is not installed: the files it opens are not checked)"
fi
opened=$(grep -oE 'open(at)?\((AT_FDCWD, ?)?"[^"]*"' "$trace" | sed 's/.*"\(.*\)"/\1/' | sort -u || true)
rm -f "$trace"
echo "files it opened: ${opened:-none}" | tr '\n' ' '
echo
while read -r path; do
  [ -z "$path" ] || [[ $path == /sys/* || $path == /proc/* ]] || fail "the program opened $path"
done <<<"$opened"
exit $rc
