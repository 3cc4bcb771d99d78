#!/usr/bin/env bash
# The built Triton backend needs no Boost library at run time and exports Triton's entry
# points (TRITONBACKEND_*) only.   check_exports.sh libtriton_gexec.so
set -euo pipefail
lib=$1
needed=$(readelf -d "$lib" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p')
echo "needs: $(echo "$needed" | tr '\n' ' ')"
if echo "$needed" | grep -i boost; then echo "FAIL: $lib needs a Boost library at run time" >&2; exit 1; fi
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^$' | sort -u)
others=$(echo "$exported" | grep -v '^TRITONBACKEND_' || true)
echo "exports: $(echo "$exported" | grep -c '^TRITONBACKEND_') TRITONBACKEND_* entry points, $(echo -n "$others" | grep -c . || true) other symbols"
if [ -n "$others" ]; then echo "FAIL: $lib exports more than Triton's entry points:" >&2; echo "$others" | head -20 >&2; exit 1; fi
echo "1 passed, 0 failed"
