#!/usr/bin/env bash
# gexec-run over the Relax suite (tests/relax/make_models.sh), as a user runs a model
# today's TVM deployed: a function that runs as a graph, one that is interpreted (a
# dynamic batch), nn.Module's weights bound from a file, --info, per-node dumps
# (--dump-dir, --compare-dump) of a function run as a graph, and the refusals of a
# wrong shape (exit 1 with the argument named) and of an option a function call cannot
# honour. Outputs are compared with TVM's VM's exactly (--expected, no tolerance).
# Exits 77 (skipped) where the models could not be built.
#
#   bash tests/relax/run_cli.sh SUITE_DIR GEXEC_RUN PYTHON
# PYTHON: the suite's venv (numpy), for the values the per-node dump is checked against.
set -euo pipefail
dir=$1 run=$2 py=$3
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

# Per-node dumps of a function run as a graph: every file against values computed
# without gexec (the arguments, the weights TVM bound as constants, numpy's MLP and TVM's
# output), then --compare-dump against the dump (arguments from it), and against one
# with a single element changed, which names that node.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$("$run" "$dir/mlp_constants.so" -i "x=@$dir/mlp_constants_in0.npy" --dump-dir "$tmp/nodes" 2>&1) || { echo "$out"; exit 1; }
expect "wrote 12 node outputs of main() to $tmp/nodes" "$out" "--dump-dir writes every node's outputs"
"$py" - "$dir" "$tmp/nodes" <<'PY' || exit 1
import os, sys
import numpy as np
d, nodes = sys.argv[1], sys.argv[2]
m = np.load(os.path.join(d, "mlp.npz"))  # the same x, w1, b1, w2, b2 as mlp_constants
x, w1, b1, w2, b2 = (m["in%d" % i] for i in range(5))
files = sorted(os.listdir(nodes))
def node(i):
    found = [f for f in files if f.startswith("%02d_" % i)]
    assert len(found) == 1, (i, files)
    return found[0], np.load(os.path.join(nodes, found[0]))
h = np.maximum(x @ w1.T + b1, 0)
exact = {0: x, 1: w1, 2: w1.T, 4: b1, 7: w2, 8: w2.T, 10: b2, 11: np.load(os.path.join(d, "mlp_constants_out0.npy"))}
close = {3: x @ w1.T, 5: x @ w1.T + b1, 6: h, 9: h @ w2.T}
assert len(files) == 12, files
for i in range(12):
    name, got = node(i)
    want = exact.get(i, close.get(i))
    assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, got.shape, want.dtype, want.shape)
    if i in exact:
        assert np.array_equal(got, want), "%s differs from the value computed without gexec" % name
    else:
        assert np.allclose(got, want, rtol=1e-5, atol=1e-5), "%s: max abs diff %g" % (name, np.abs(got - want).max())
print("the 12 node outputs are the arguments', the weights', numpy's and TVM's")
a = np.load(os.path.join(nodes, "06_relu_0.npy"))
a[2, 5] += np.float32(0.001)
np.save(os.path.join(os.path.dirname(nodes), "relu_changed.npy"), a)
PY
out=$("$run" "$dir/mlp_constants.so" --compare-dump "$tmp/nodes" 2>&1) || { echo "$out"; exit 1; }
expect "MATCH: 12 of 12 node outputs compared, all agree bit for bit" "$out" "--compare-dump against the function's own dump"
cp -r "$tmp/nodes" "$tmp/changed"
mv "$tmp/relu_changed.npy" "$tmp/changed/06_relu_0.npy"
status=0
out=$("$run" "$dir/mlp_constants.so" -i "x=@$dir/mlp_constants_in0.npy" --compare-dump "$tmp/changed" 2>&1) || status=$?
[ "$status" = 2 ] || { echo "$out"; echo "FAIL: --compare-dump against a changed dump exited with $status, not 2"; exit 1; }
expect "FIRST DIVERGENCE at node 6 (relu), output 0: float32[4, 32]" "$out" "--compare-dump names the node whose dump was changed"
expect "1 of 128 elements beyond atol 0 rtol 0, the first at flat index 69" "$out" "--compare-dump names the element changed"
status=0
out=$("$run" "$dir/dynamic_batch.so" -i "x=@$dir/dynamic_batch_in0.npy" -i "w=@$dir/dynamic_batch_in1.npy" --dump-dir "$tmp/dyn" 2>&1) || status=$?
[ "$status" = 1 ] || { echo "$out"; echo "FAIL: --dump-dir of an interpreted function exited with $status, not 1"; exit 1; }
expect "--dump-dir: function \"main\" is interpreted (argument \"x\" has no static shape" "$out" "per-node dumps of an interpreted function are refused with the reason"
[ ! -e "$tmp/dyn" ] || { echo "FAIL: a refused --dump-dir wrote $tmp/dyn"; exit 1; }

status=0
out=$("$run" "$dir/mlp_constants.so" -i "x=@$dir/mlp_constants_in0.npy" --trace /nonexistent/t.json 2>&1) || status=$?
[ "$status" = 1 ] || { echo "$out"; echo "FAIL: --trace exited with $status, not 1"; exit 1; }
expect "(the model is a Relax VM executable)" "$out" "an option a function call cannot honour is refused"
echo "PASS: gexec-run ran the Relax suite's functions"
