#!/usr/bin/env python3
"""Writes the generated seeds of fuzz_graph and fuzz_executor: graphs too large to keep
in the repository, made the same way each time.

    python3 tests/fuzz/make_graph_seeds.py OUTPUT-DIR

fanout-50000.json: one input read by 50,000 nodes, every one of them a graph output, so
that 50,000 values are live at once (what made planning cubic): fuzz_graph's seed.
fanout-5000.json: the same with 5,000 nodes, fuzz_executor's seed (it plans the graph with
every allocator and runs it under the sanitizers, 90 s at 50,000; planning 50,000 values is
tested in test_policies and measured by gexec_bench_planner).
"""

import json
import os
import sys


def fanout(n):
    nodes = [{"op": "null", "name": "x", "inputs": []}]
    attrs = {"func_name": "f", "num_inputs": "1", "num_outputs": "1", "flatten_data": "0"}
    nodes += [{"op": "tvm_op", "name": "o%d" % i, "attrs": attrs, "inputs": [[0, 0, 0]]} for i in range(n)]
    m = n + 1
    return {
        "nodes": nodes,
        "arg_nodes": [0],
        "heads": [[i, 0, 0] for i in range(1, m)],
        "node_row_ptr": list(range(m + 1)),
        "attrs": {
            "shape": ["list_shape", [[4]] * m],
            "dltype": ["list_str", ["float32"] * m],
            "storage_id": ["list_int", list(range(m))],
        },
    }


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for n in (50000, 5000):
        with open(os.path.join(out, "fanout-%d.json" % n), "w") as f:
            json.dump(fanout(n), f, separators=(",", ":"))


if __name__ == "__main__":
    main()
