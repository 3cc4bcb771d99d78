#!/usr/bin/env bash
# Build the TVM-FFI suite's kernels and graphs with today's TVM from PyPI.
#
#   bash tests/tvm_ffi/make_kernels.sh OUT_DIR
#
# Creates OUT_DIR/venv (the interpreter's Python + pinned apache-tvm), then runs
# generate_kernels.py OUT_DIR. Idempotent: when OUT_DIR/manifest.txt exists and
# OUT_DIR/.stamp matches a hash of this script and generate_kernels.py, nothing is
# done. When no suitable Python or TVM can be installed (PyPI unreachable, another
# platform), the reason is written to OUT_DIR/SKIPPED and the script exits 0, so that
# the suite reports itself skipped instead of failing.
#
# Why this TVM: apache-tvm 0.27 is what PyPI offers today; from v0.21 on, TVM compiles
# kernels to the TVM-FFI ABI and has no graph executor. Its wheels need Python >= 3.10
# on x86-64 or aarch64 Linux, and numpy and ml_dtypes besides apache-tvm-ffi.
#
# Environment overrides: GEXEC_TVM_FFI_PYTHON (interpreter for the venv).
set -euo pipefail

if [ $# -ne 1 ]; then
    echo "usage: $0 OUT_DIR" >&2
    exit 2
fi

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$1"
OUT="$(cd "$1" && pwd)"
VENV="$OUT/venv"

# Exact pins, installed with --no-deps so nothing else floats in.
PINS=(
    "apache-tvm==0.27.0.post1"
    "apache-tvm-ffi==0.1.15.post2"
    "numpy==2.4.6"
    "ml_dtypes==0.6.0"
    "typing_extensions==4.16.0"
)

log() { echo "[make_kernels] $*"; }

skip() {
    log "SKIPPED: $*"
    printf '%s\n' "$*" > "$OUT/SKIPPED"
    rm -f "$OUT/.stamp"
    exit 0
}

STAMP="$(cat "$HERE/make_kernels.sh" "$HERE/generate_kernels.py" | sha256sum | cut -d' ' -f1)"
if [ -f "$OUT/manifest.txt" ] && [ -f "$OUT/.stamp" ] && [ "$(cat "$OUT/.stamp")" = "$STAMP" ]; then
    log "up to date: $OUT (stamp $STAMP)"
    exit 0
fi
rm -f "$OUT/SKIPPED" "$OUT/.stamp" "$OUT/manifest.txt" "$OUT/manifest.json"
START=$(date +%s)

case "$(uname -s)-$(uname -m)" in
    Linux-x86_64 | Linux-aarch64) ;;
    *) skip "apache-tvm's wheels exist for Linux x86_64 and aarch64 only, not $(uname -s)-$(uname -m)" ;;
esac
command -v "${CC:-cc}" >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || skip "no C compiler for TVM's export_library"

PY="${GEXEC_TVM_FFI_PYTHON:-python3}"
"$PY" -c "import sys, venv; sys.exit(0 if sys.version_info[:2] >= (3, 10) else 1)" >/dev/null 2>&1 ||
    skip "no Python >= 3.10 with venv ($PY; set GEXEC_TVM_FFI_PYTHON)"

export PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
PINS_HASH="$(printf '%s\n' "${PINS[@]}" | sha256sum | cut -d' ' -f1)"
if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.gexec-pins" 2>/dev/null)" = "$PINS_HASH" ]; then
    log "reusing venv $VENV"
else
    log "creating venv $VENV with $PY ($("$PY" -c 'import platform; print(platform.python_version())'))"
    rm -rf "$VENV"
    "$PY" -m venv "$VENV" </dev/null || skip "could not create a venv with $PY"
    log "installing ${#PINS[@]} pinned packages (${PINS[0]}, ...)"
    if ! "$VENV/bin/python" -m pip install --quiet --no-deps --only-binary=:all: "${PINS[@]}" </dev/null; then
        rm -rf "$VENV"
        skip "pip could not install the pinned TVM packages (${PINS[0]}): PyPI unreachable?"
    fi
    printf '%s\n' "$PINS_HASH" > "$VENV/.gexec-pins"
    log "installed in $(( $(date +%s) - START ))s"
fi

if ! "$VENV/bin/python" -c "import tvm; from tvm.script import tirx" </dev/null >/dev/null 2>&1; then
    rm -f "$VENV/.gexec-pins"
    skip "TVM was installed but does not import (tvm, tvm.script.tirx)"
fi

log "compiling kernels into $OUT"
"$VENV/bin/python" "$HERE/generate_kernels.py" "$OUT" </dev/null
printf '%s\n' "$STAMP" > "$OUT/.stamp"
log "done in $(( $(date +%s) - START ))s"
