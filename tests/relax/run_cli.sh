#!/usr/bin/env bash
# gexec-run over the Relax suite (tests/relax/make_models.sh), as a user runs a model
# today's TVM deployed: a function that runs as a graph, one that is interpreted (a
# dynamic batch), nn.Module's weights bound from a file, --info, and the refusals of a
# wrong shape (exit 1 with the argument named) and of an option a function call cannot
# honour. Outputs are compared with TVM's VM's exactly (--expected, no tolerance).
# Exits 77 (skipped) where the models could not be built.
#
#   bash tests/relax/run_cli.sh SUITE_DIR GEXEC_RUN
set -euo pipefail
dir=$1 run=$2
if [ -f "$dir/SKIPPED" ]; then echo "SKIPPED: $(cat "$dir/SKIPPED")"; exit 77; fi
expect() {  # expect TEXT OUTPUT WHAT
  grep -qF -- "$1" <<<"$2" || { echo "$2"; echo "FAIL: $3 (no \"$1\")"; exit 1; }
}

out=$("$run" "$dir/mlp_constants.so" -i "x=@$dir/mlp_constants_in0.npy" --expected "0=@$dir/mlp_constants_out0.npy" 2>&1) || { echo "$out"; exit 1; }
expect "MATCH output_0 (max abs diff 0" "$out" "a graph function's output is TVM's"

for k in "" _1 _2; do
  out=$("$run" "$dir/dynamic_batch.so" --function main -i "x=@$dir/dynamic_batch${k}_in0.npy" -i "w=@$dir/dynamic_batch${k}_in1.npy" \
    --expected "output_0=@$dir/dynamic_batch${k}_out0.npy" 2>&1) || { echo "$out"; exit 1; }
  expect "MATCH output_0" "$out" "an interpreted function's output is TVM's (batch $k)"
done

for params in nn_mlp.params nn_mlp.safetensors; do
  out=$("$run" "$dir/nn_mlp.so" --params "$dir/$params" -i "x=@$dir/nn_mlp_in0.npy" --expected "0=@$dir/nn_mlp_out0.npy" 2>&1) ||
    { echo "$out"; exit 1; }
  expect "MATCH output_0" "$out" "weights bound from $params"
done

out=$("$run" "$dir/two_functions.so" --info 2>&1) || { echo "$out"; exit 1; }
expect "main(x: float32[4, 8]): a graph of" "$out" "--info lists a graph function with its argument"
expect "scale(x: float32[4, 8], s: float32[]): a graph of" "$out" "--info lists a second function"
out=$("$run" "$dir/dynamic_batch.so" --info 2>&1) || { echo "$out"; exit 1; }
expect "main(x, w): interpreted (argument \"x\" has no static shape" "$out" "--info says which function is interpreted, and why"

status=0
out=$("$run" "$dir/mlp_constants.so" -i "x=@$dir/dynamic_batch_1_in0.npy" 2>&1) || status=$?
[ "$status" = 1 ] || { echo "$out"; echo "FAIL: a wrong shape exited with $status, not 1"; exit 1; }
expect "--input x: $dir/dynamic_batch_1_in0.npy has shape [5, 16], the model wants [4, 16]" "$out" "a wrong shape names the argument"

status=0
out=$("$run" "$dir/mlp_constants.so" -i "x=@$dir/mlp_constants_in0.npy" --compare-dump /nonexistent 2>&1) || status=$?
[ "$status" = 1 ] || { echo "$out"; echo "FAIL: --compare-dump exited with $status, not 1"; exit 1; }
expect "(the model is a Relax VM executable)" "$out" "an option a function call cannot honour is refused"
echo "PASS: gexec-run ran the Relax suite's functions"
