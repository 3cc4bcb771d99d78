#!/usr/bin/env bash
# Build the gexec conformance models with a real TVM from PyPI.
#
#   bash tests/conformance/make_models.sh OUT_DIR [generate_models.py options]
#
# Creates OUT_DIR/venv (Python 3.10 + pinned TVM), then runs
# generate_models.py OUT_DIR [options] (--target aarch64 --models mlp,... builds an
# ARM set; see generate_models.py). Idempotent: when OUT_DIR/manifest.json exists
# and OUT_DIR/.stamp matches a hash of this script, generate_models.py and the
# options, nothing is done. When no suitable Python or TVM can be installed, the
# reason is written to OUT_DIR/SKIPPED and the script exits 0, so callers can
# skip the conformance tests instead of failing.
#
# Why this TVM: Apache's own relay-era wheels (apache-tvm <= 0.14.dev) are no
# longer on PyPI; what remains there (0.25+) has no relay and no graph
# executor. hhb-tvm is a PyPI build of the TVM tree at 0.16.dev0 (relay,
# graph executor, relay.testing, LLVM 17) that installs from wheels alone.
# It is only published for CPython 3.8 and 3.10 on x86-64 Linux and needs
# numpy < 2. Its relay package imports tflite and its testing package imports
# pytest, so both are pinned too. Its LLVM defaults to a riscv64 triple, so
# generate_models.py names the x86-64 triple explicitly.
#
# Environment overrides: GEXEC_CONF_PYTHON (interpreter for the venv),
# GEXEC_CONF_VENV (the venv, instead of OUT_DIR/venv: sets of models for several
# targets share one).
set -euo pipefail

if [ $# -lt 1 ]; then
    echo "usage: $0 OUT_DIR [generate_models.py options]" >&2
    exit 2
fi

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$1"
OUT="$(cd "$1" && pwd)"
shift
OPTIONS=("$@")
VENV="${GEXEC_CONF_VENV:-$OUT/venv}"
PY_MINOR="3.10"

# Exact pins, installed with --no-deps so nothing else floats in.
PINS=(
    "hhb-tvm==3.2.3"
    "numpy==1.26.4"
    "scipy==1.15.3"
    "decorator==5.3.1"
    "attrs==26.1.0"
    "psutil==7.2.2"
    "typing_extensions==4.16.0"
    "tqdm==4.70.1"
    "tflite==2.18.0"
    "flatbuffers==25.12.19"
    "pytest==9.2.0"
    "iniconfig==2.3.1"
    "packaging==26.3"
    "pluggy==1.7.0"
    "exceptiongroup==1.3.1"
    "tomli==2.5.0"
    "Pygments==2.21.0"
)

log() { echo "[make_models] $*"; }

skip() {
    log "SKIPPED: $*"
    printf '%s\n' "$*" > "$OUT/SKIPPED"
    rm -f "$OUT/.stamp"
    exit 0
}


STAMP="$( (cat "$HERE/make_models.sh" "$HERE/generate_models.py"; printf '%s\n' "${OPTIONS[@]}") | sha256sum | cut -d' ' -f1)"
if [ -f "$OUT/manifest.json" ] && [ -f "$OUT/.stamp" ] && [ "$(cat "$OUT/.stamp")" = "$STAMP" ]; then
    log "up to date: $OUT (stamp $STAMP)"
    exit 0
fi
rm -f "$OUT/SKIPPED" "$OUT/.stamp" "$OUT/manifest.json"

START=$(date +%s)

case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) ;;
    *) skip "the pinned TVM wheel exists for Linux x86_64 only, not $(uname -s)-$(uname -m)" ;;
esac

CXX_FOUND=""
for c in "${CXX:-}" g++ c++ clang++; do
    if [ -n "$c" ] && command -v "$c" >/dev/null 2>&1; then CXX_FOUND="$c"; break; fi
done
[ -n "$CXX_FOUND" ] || skip "no C++ compiler (g++/c++) for TVM's export_library"

find_python() {
    local cand
    for cand in "${GEXEC_CONF_PYTHON:-}" "python$PY_MINOR" \
        "${PYENV_ROOT:-${HOME:-/root}/.pyenv}"/versions/"$PY_MINOR".*/bin/python \
        /root/.pyenv/versions/"$PY_MINOR".*/bin/python \
        /usr/local/bin/python"$PY_MINOR" /usr/bin/python"$PY_MINOR"; do
        [ -n "$cand" ] || continue
        command -v "$cand" >/dev/null 2>&1 || [ -x "$cand" ] || continue
        if "$cand" -c "import sys, venv; sys.exit(0 if sys.version_info[:2] == (3, 10) else 1)" \
            >/dev/null 2>&1; then
            echo "$cand"
            return 0
        fi
    done
    return 1
}

export PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
PINS_HASH="$(printf '%s\n' "${PINS[@]}" | sha256sum | cut -d' ' -f1)"

if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.gexec-pins" 2>/dev/null)" = "$PINS_HASH" ]; then
    log "reusing venv $VENV"
else
    PY="$(find_python)" || skip "no Python $PY_MINOR interpreter found (set GEXEC_CONF_PYTHON)"
    log "creating venv $VENV with $PY ($("$PY" -c 'import platform; print(platform.python_version())'))"
    rm -rf "$VENV"
    "$PY" -m venv "$VENV" </dev/null || skip "could not create a venv with $PY"
    log "installing ${#PINS[@]} pinned packages (${PINS[0]}, ${PINS[1]}, ...)"
    if ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
        --no-deps --only-binary=:all: "${PINS[@]}" </dev/null; then
        rm -rf "$VENV"
        skip "pip could not install the pinned TVM packages (${PINS[0]})"
    fi
    printf '%s\n' "$PINS_HASH" > "$VENV/.gexec-pins"
    log "installed in $(( $(date +%s) - START ))s"
fi

if ! "$VENV/bin/python" -c "import tvm; from tvm import relay; from tvm.contrib import graph_executor" \
    </dev/null >/dev/null 2>&1; then
    rm -f "$VENV/.gexec-pins"
    skip "TVM was installed but does not import (tvm, tvm.relay, tvm.contrib.graph_executor)"
fi

log "generating models into $OUT"
"$VENV/bin/python" "$HERE/generate_models.py" "$OUT" "${OPTIONS[@]}" </dev/null
printf '%s\n' "$STAMP" > "$OUT/.stamp"
log "done in $(( $(date +%s) - START ))s"
