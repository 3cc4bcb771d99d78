#!/usr/bin/env bash
# The Go binding's tests (go test, cgo) against a built libgexec_c.
# usage: run_test.sh <gexec source dir> <dir of libgexec_c.so> <libgexec_test_kernels.so> [<build dir>]
# The build dir (default: a temporary one) holds GOPATH and GOCACHE, so the source tree
# stays clean; nothing is downloaded (GOPROXY=off). Exits 77 with "SKIP: <reason>" where
# go is absent, or where GEXEC_BINDING_SKIP gives a reason (CMake sets it in sanitizer
# builds). DLPack's header is looked for in /usr/include; CGO_CFLAGS may add to that.
set -euo pipefail
# shellcheck source=../arguments.sh
source "$(dirname "$0")/../arguments.sh"
go=${GO:-$(command -v go || true)}
if [ -z "$go" ] && [ -x /usr/lib/go/bin/go ]; then go=/usr/lib/go/bin/go; fi
if [ -z "$go" ] || [ ! -x "$go" ]; then
  echo "SKIP: go is not installed (Debian: apt-get install golang-go)"
  exit 77
fi
if [ -z "$build" ]; then
  build=$(mktemp -d)
  trap 'chmod -R u+w "$build"; rm -rf "$build"' EXIT
fi
mkdir -p "$build"
export GOPATH=$build/gopath GOCACHE=$build/gocache GOPROXY=off GOTOOLCHAIN=local GO111MODULE=on CGO_ENABLED=1
export CGO_CFLAGS="-g -O2 -I$src/include ${CGO_CFLAGS:-}"
export CGO_LDFLAGS="-L$libdir -Wl,-rpath,$libdir ${CGO_LDFLAGS:-}"
export GEXEC_SOURCE_DIR=$src GEXEC_TEST_KERNELS=$kernels
cd "$src/bindings/go"
"$go" version
"$go" test -count=1 -v .
