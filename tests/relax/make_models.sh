#!/usr/bin/env bash
# Build the Relax suite's models with today's TVM from PyPI and record TVM's VM outputs.
#
#   bash tests/relax/make_models.sh OUT_DIR TVM_FFI_DIR [--target aarch64]
#
# Uses the TVM that tests/tvm_ffi/make_kernels.sh installed into TVM_FFI_DIR/venv (the
# same pinned apache-tvm; CTest runs that first, as a fixture). When that script could
# not install TVM (its TVM_FFI_DIR/SKIPPED), its reason is copied to OUT_DIR/SKIPPED and
# the script exits 0, so that the suite reports itself skipped. Idempotent: nothing is
# done when OUT_DIR/.stamp matches this script, the generator, the TVM installed and the
# target.
#
# --target aarch64 compiles the suite for 64-bit ARM (a cross build's set, run under
# qemu-user); GEXEC_RELAX_VENV names a venv with that TVM to use instead of
# TVM_FFI_DIR/venv (the arm stage passes the gcc stage's). Without such a venv, or
# without Debian's aarch64-linux-gnu-g++, the set is SKIPPED with the reason.
set -euo pipefail

if [ $# -ne 2 ] && { [ $# -ne 4 ] || [ "$3" != --target ]; }; then
    echo "usage: $0 OUT_DIR TVM_FFI_DIR [--target aarch64]" >&2
    exit 2
fi
TARGET=${4:-x86_64}
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$1"
OUT="$(cd "$1" && pwd)"
FFI="$(cd "$2" 2>/dev/null && pwd || echo "$2")"  # a cross build has none (GEXEC_RELAX_VENV)
log() { echo "[make_models] $*"; }

skip() {
    printf '%s\n' "$*" > "$OUT/SKIPPED"
    rm -f "$OUT/.stamp" "$OUT/manifest.txt"
    log "SKIPPED: $*"
    exit 0
}

rm -f "$OUT/SKIPPED"
VENV="${GEXEC_RELAX_VENV:-$FFI/venv}"
if [ "$TARGET" != x86_64 ]; then
    [ -x "$VENV/bin/python" ] || skip "no venv with apache-tvm 0.27 at $VENV (GEXEC_RELAX_VENV names one; the gcc stage's tests/tvm_ffi/make_kernels.sh makes it)"
    command -v "$TARGET-linux-gnu-g++" >/dev/null || skip "no $TARGET-linux-gnu-g++ to link the kernels TVM compiles for $TARGET"
elif [ -f "$FFI/SKIPPED" ]; then
    skip "$(cat "$FFI/SKIPPED")"
fi
PY="$VENV/bin/python"
[ -x "$PY" ] || { echo "[make_models] no $PY: run tests/tvm_ffi/make_kernels.sh $FFI first" >&2; exit 1; }

STAMP="$( (cat "$HERE/make_models.sh" "$HERE/generate_models.py" "$VENV/.gexec-pins" 2>/dev/null; echo "$TARGET") | sha256sum | cut -d' ' -f1)"
if [ -f "$OUT/manifest.txt" ] && [ "$(cat "$OUT/.stamp" 2>/dev/null)" = "$STAMP" ]; then
    log "up to date: $OUT (stamp $STAMP)"
    exit 0
fi
rm -f "$OUT/.stamp" "$OUT/manifest.txt" "$OUT/manifest.json"
START=$(date +%s)
log "building Relax models for $TARGET into $OUT"
"$PY" "$HERE/generate_models.py" "$OUT" --target "$TARGET" </dev/null
printf '%s\n' "$STAMP" > "$OUT/.stamp"
log "done in $(( $(date +%s) - START ))s"
