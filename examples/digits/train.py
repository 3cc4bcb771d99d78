#!/usr/bin/env python3
"""Trains the digit classifier of examples/digits and writes it as a TVM graph-executor model.

    python3 -m venv /tmp/exvenv && /tmp/exvenv/bin/pip install numpy scikit-learn
    /tmp/exvenv/bin/python examples/digits/train.py [output-dir]   # default: next to this file

The data is scikit-learn's bundled 8x8 digits (load_digits: 1,797 images, no download),
pixels scaled from 0..16 to 0..1. The model is a two-layer perceptron,

    x[1, 64] -> dense(w1[32, 64]) + b1[1, 32] -> relu -> dense(w2[10, 32]) + b2[1, 10] -> softmax -> [1, 10]

trained with numpy (Adam, cross-entropy, a fixed seed and a fixed train/test split). It
calls only kernels of gexec's sample library (tests/kernels/test_kernels.c): test_dense,
test_add, test_relu and test_softmax. Biases are [1, N] because test_add adds tensors of
one shape; the batch is 1.

Written files:
  graph.json     the graph, in the format TVM's graph executor reads
  params.bin     w1, b1, w2, b2 in TVM's parameter-dict format (tvm.runtime.save_param_dict)
  samples.npy    the first 60 images of the test split, float32 [60, 64]
  labels.npy     their labels, int64 [60]
  sample.npy     the first of them alone, float32 [1, 64] (for examples/embed)
  expected.json  shapes, and what numpy's own forward pass of the saved float32 weights
                 predicts for each sample, with the probabilities and the accuracy

Regenerating gives identical bytes. Last run with Python 3.11, numpy 2.4.6 and
scikit-learn 1.9.1 (load_digits' data has not changed in years; numpy's PCG64 stream is
what fixes the split and the initial weights).
"""

import json
import os
import struct
import sys

# One BLAS thread: a sum split over threads can round differently from run to run.
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = "1"

import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

SEED = 0
HIDDEN = 32
TEST_SIZE = 360
NUM_SAMPLES = 60
EPOCHS = 40
BATCH = 32
LEARNING_RATE = 0.005
WEIGHT_DECAY = 1e-4
# Weights are rounded to multiples of 2**-12 before they are saved: a BLAS that rounds
# the last bit of a sum differently still gives the same file, and float32 holds them
# exactly.
GRID = 2.0 ** -12


def load_data():
    digits = load_digits()
    x = digits.data.astype(np.float64) / 16.0
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(SEED).permutation(len(y))
    test, train = order[:TEST_SIZE], order[TEST_SIZE:]
    return x[train], y[train], x[test], y[test]


def train(x, y):
    """Adam on mini-batches; returns float64 weights and biases."""
    rng = np.random.default_rng(SEED + 1)
    params = {
        "w1": rng.normal(0.0, np.sqrt(2.0 / 64), (HIDDEN, 64)),
        "b1": np.zeros((1, HIDDEN)),
        "w2": rng.normal(0.0, np.sqrt(2.0 / HIDDEN), (10, HIDDEN)),
        "b2": np.zeros((1, 10)),
    }
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(p) for k, p in params.items()}
    beta1, beta2, eps, step = 0.9, 0.999, 1e-8, 0
    onehot = np.eye(10)[y]
    for _ in range(EPOCHS):
        order = rng.permutation(len(y))
        for start in range(0, len(y), BATCH):
            idx = order[start:start + BATCH]
            xb, tb = x[idx], onehot[idx]
            pre = xb @ params["w1"].T + params["b1"]
            h = np.maximum(pre, 0.0)
            logits = h @ params["w2"].T + params["b2"]
            p = np.exp(logits - logits.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            d_logits = (p - tb) / len(idx)
            d_h = d_logits @ params["w2"]
            d_pre = d_h * (pre > 0)
            grads = {
                "w2": d_logits.T @ h + WEIGHT_DECAY * params["w2"],
                "b2": d_logits.sum(axis=0, keepdims=True),
                "w1": d_pre.T @ xb + WEIGHT_DECAY * params["w1"],
                "b1": d_pre.sum(axis=0, keepdims=True),
            }
            step += 1
            for k in params:
                m[k] = beta1 * m[k] + (1 - beta1) * grads[k]
                v[k] = beta2 * v[k] + (1 - beta2) * grads[k] ** 2
                m_hat = m[k] / (1 - beta1 ** step)
                v_hat = v[k] / (1 - beta2 ** step)
                params[k] -= LEARNING_RATE * m_hat / (np.sqrt(v_hat) + eps)
    return {k: (np.round(p / GRID) * GRID).astype(np.float32) for k, p in params.items()}


def forward(params, x):
    """The graph's computation in float32, one sample at a time as the graph runs it."""
    probabilities = []
    for row in x.astype(np.float32):
        xr = row.reshape(1, 64)
        h = np.maximum(xr @ params["w1"].T + params["b1"], np.float32(0))
        logits = h @ params["w2"].T + params["b2"]
        e = np.exp(logits - logits.max())
        probabilities.append((e / e.sum())[0])
    return np.array(probabilities, dtype=np.float32)


def graph_json():
    """The graph in TVM's graph-executor JSON: inputs and parameters first, then one
    tvm_op node per kernel call, with TVM-style storage reuse between activations."""
    nodes, shapes, storage = [], [], []

    def null(name, shape):
        nodes.append({"op": "null", "name": name, "inputs": []})
        shapes.append(shape)
        storage.append(len(storage))
        return len(nodes) - 1

    def op(name, func, inputs, shape, storage_id):
        nodes.append({
            "op": "tvm_op", "name": name, "inputs": [[i, 0, 0] for i in inputs],
            "attrs": {"func_name": func, "num_inputs": str(len(inputs)), "num_outputs": "1", "flatten_data": "0"},
        })
        shapes.append(shape)
        storage.append(storage_id)
        return len(nodes) - 1

    x = null("x", [1, 64])
    w1, b1 = null("w1", [HIDDEN, 64]), null("b1", [1, HIDDEN])
    w2, b2 = null("w2", [10, HIDDEN]), null("b2", [1, 10])
    # Activations take storage ids 5 and 6 in turn: each step writes the one its
    # input does not hold, as TVM's planner reuses a buffer once its last reader ran.
    d1 = op("dense1", "test_dense", [x, w1], [1, HIDDEN], 5)
    a1 = op("add1", "test_add", [d1, b1], [1, HIDDEN], 6)
    r1 = op("relu1", "test_relu", [a1], [1, HIDDEN], 5)
    d2 = op("dense2", "test_dense", [r1, w2], [1, 10], 6)
    a2 = op("add2", "test_add", [d2, b2], [1, 10], 5)
    out = op("softmax", "test_softmax", [a2], [1, 10], 6)
    graph = {
        "nodes": nodes,
        "arg_nodes": [x, w1, b1, w2, b2],
        "heads": [[out, 0, 0]],
        "attrs": {
            "dltype": ["list_str", ["float32"] * len(nodes)],
            "storage_id": ["list_int", storage],
            "shape": ["list_shape", shapes],
        },
        "node_row_ptr": list(range(len(nodes) + 1)),
    }
    return dump_json(graph)


def dump_json(value):
    """JSON with one top-level key per line, and one line per element of a list of
    lists (nodes, probability rows): small diffs, readable files."""
    lines = []
    for i, (key, v) in enumerate(value.items()):
        comma = "," if i + 1 < len(value) else ""
        if isinstance(v, list) and v and isinstance(v[0], (list, dict)):
            rows = ",\n  ".join(json.dumps(row) for row in v)
            lines.append(f" {json.dumps(key)}: [\n  {rows}\n ]{comma}")
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(v)}{comma}")
    return "{\n" + "\n".join(lines) + "\n}\n"


def param_dict_bytes(params):
    """tvm.runtime.save_param_dict's format: u64 magic, u64 reserved, the names (u64
    count, then u64 length + bytes each), u64 count, then one tensor record per name."""
    out = [struct.pack("<QQ", 0xF7E58D4F05049CB7, 0), struct.pack("<Q", len(params))]
    for name in params:
        out.append(struct.pack("<Q", len(name)) + name.encode())
    out.append(struct.pack("<Q", len(params)))
    for a in params.values():
        a = np.ascontiguousarray(a, dtype="<f4")
        # Tensor record: magic, reserved, DLDevice (CPU 1, id 0), ndim, DLDataType
        # (float 2, 32 bits, 1 lane), shape, byte size, bytes.
        out.append(struct.pack("<QQiii", 0xDD5E40F096B4A13F, 0, 1, 0, a.ndim))
        out.append(struct.pack("<BBH", 2, 32, 1))
        out.append(struct.pack(f"<{a.ndim}q", *a.shape))
        out.append(struct.pack("<q", a.nbytes) + a.tobytes())
    return b"".join(out)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    os.makedirs(out_dir, exist_ok=True)
    x_train, y_train, x_test, y_test = load_data()
    params = train(x_train, y_train)

    test_predicted = forward(params, x_test).argmax(axis=1)
    test_correct = int((test_predicted == y_test).sum())
    samples = x_test[:NUM_SAMPLES].astype(np.float32)
    labels = y_test[:NUM_SAMPLES]
    probabilities = forward(params, samples)
    predicted = probabilities.argmax(axis=1)
    top2 = np.sort(probabilities, axis=1)[:, -2:]

    with open(os.path.join(out_dir, "graph.json"), "w") as f:
        f.write(graph_json())
    with open(os.path.join(out_dir, "params.bin"), "wb") as f:
        f.write(param_dict_bytes(params))
    np.save(os.path.join(out_dir, "samples.npy"), samples)
    np.save(os.path.join(out_dir, "labels.npy"), labels)
    np.save(os.path.join(out_dir, "sample.npy"), samples[:1])

    correct = int((predicted == labels).sum())
    expected = {
        "input": {"name": "x", "shape": [1, 64], "dtype": "float32"},
        "output": {"shape": [1, 10], "dtype": "float32"},
        "params": {k: list(v.shape) for k, v in params.items()},
        "test_split": {"images": len(y_test), "correct": test_correct},
        "samples": NUM_SAMPLES,
        "correct": correct,
        "labels": [int(v) for v in labels],
        "predicted": [int(v) for v in predicted],
        # Rounded to 6 decimals; gexec's must agree within 1e-5 (float32 sums in
        # another order differ in the last bits, no more).
        "probabilities": [[round(float(p), 6) for p in row] for row in probabilities],
    }
    with open(os.path.join(out_dir, "expected.json"), "w") as f:
        f.write(dump_json(expected))
    print(f"test split: {test_correct}/{len(y_test)} ({100.0 * test_correct / len(y_test):.1f}%); "
          f"samples: {correct}/{NUM_SAMPLES}; smallest top-1 margin {float((top2[:, 1] - top2[:, 0]).min()):.4f}")


if __name__ == "__main__":
    main()
