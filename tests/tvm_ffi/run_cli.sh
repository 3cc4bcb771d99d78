#!/usr/bin/env bash
# gexec-run over the TVM-FFI suite's kernels (tests/tvm_ffi/make_kernels.sh), as a user
# runs a model whose kernels today's TVM compiled: in both library forms, the outputs
# checked against numpy's with --expected, and a graph whose kernel fails its argument
# checks reported with TVM's message and exit status 1. Exits 77 (skipped) where the
# kernels could not be built.
#
#   bash tests/tvm_ffi/run_cli.sh SUITE_DIR GEXEC_RUN
set -euo pipefail
dir=$1 run=$2
if [ -f "$dir/SKIPPED" ]; then echo "SKIPPED: $(cat "$dir/SKIPPED")"; exit 77; fi
for lib in kernels.so kernels_bin.so; do
  out=$("$run" -g "$dir/all_kernels.json" -l "$dir/$lib" -i "x=@$dir/all_kernels_x.npy" -i "y=@$dir/all_kernels_y.npy" \
    --rtol 1e-5 --expected "0=@$dir/all_kernels_out0.npy" --expected "1=@$dir/all_kernels_out1.npy" 2>&1) || { echo "$out"; exit 1; }
  echo "$out"
  for i in 0 1; do grep -q "^MATCH output $i" <<<"$out" || { echo "FAIL ($lib): output $i not reported as matching numpy"; exit 1; }; done
  status=0
  out=$("$run" -g "$dir/wrong_shape.json" -l "$dir/$lib" -i "x=@$dir/wrong_shape_x.npy" 2>&1) || status=$?
  echo "$out"
  [ "$status" = 1 ] || { echo "FAIL ($lib): a failing kernel exited with $status, not 1"; exit 1; }
  grep -q 'node "bad_shape".*ValueError: Invalid A.shape\[0\]' <<<"$out" || { echo "FAIL ($lib): TVM's message is not reported"; exit 1; }
done
echo "PASS: gexec-run ran the TVM-FFI model in both library forms"
