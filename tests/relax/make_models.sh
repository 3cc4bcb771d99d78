#!/usr/bin/env bash
# Build the Relax suite's models with today's TVM from PyPI and record TVM's VM outputs.
#
#   bash tests/relax/make_models.sh OUT_DIR TVM_FFI_DIR
#
# Uses the TVM that tests/tvm_ffi/make_kernels.sh installed into TVM_FFI_DIR/venv (the
# same pinned apache-tvm; CTest runs that first, as a fixture). When that script could
# not install TVM (its TVM_FFI_DIR/SKIPPED), its reason is copied to OUT_DIR/SKIPPED and
# the script exits 0, so that the suite reports itself skipped. Idempotent: nothing is
# done when OUT_DIR/.stamp matches this script, the generator and the TVM installed.
set -euo pipefail

if [ $# -ne 2 ]; then
    echo "usage: $0 OUT_DIR TVM_FFI_DIR" >&2
    exit 2
fi
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$1"
OUT="$(cd "$1" && pwd)"
FFI="$(cd "$2" && pwd)"
log() { echo "[make_models] $*"; }

rm -f "$OUT/SKIPPED"
if [ -f "$FFI/SKIPPED" ]; then
    cp "$FFI/SKIPPED" "$OUT/SKIPPED"
    rm -f "$OUT/.stamp"
    log "SKIPPED: $(cat "$OUT/SKIPPED")"
    exit 0
fi
PY="$FFI/venv/bin/python"
[ -x "$PY" ] || { echo "[make_models] no $PY: run tests/tvm_ffi/make_kernels.sh $FFI first" >&2; exit 1; }

STAMP="$(cat "$HERE/make_models.sh" "$HERE/generate_models.py" "$FFI/venv/.gexec-pins" 2>/dev/null | sha256sum | cut -d' ' -f1)"
if [ -f "$OUT/manifest.txt" ] && [ "$(cat "$OUT/.stamp" 2>/dev/null)" = "$STAMP" ]; then
    log "up to date: $OUT (stamp $STAMP)"
    exit 0
fi
rm -f "$OUT/.stamp" "$OUT/manifest.txt" "$OUT/manifest.json"
START=$(date +%s)
log "building Relax models into $OUT"
"$PY" "$HERE/generate_models.py" "$OUT" </dev/null
printf '%s\n' "$STAMP" > "$OUT/.stamp"
log "done in $(( $(date +%s) - START ))s"
