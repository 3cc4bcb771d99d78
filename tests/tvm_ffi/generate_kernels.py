"""Kernels compiled by today's TVM (the TVM-FFI ABI), graphs calling them, and what
gexec must make of them.

    python generate_kernels.py OUT_DIR

Compiles TIR kernels with TVM from PyPI into two libraries: OUT_DIR/kernels.so, one
module exported as a plain shared library, and OUT_DIR/kernels_bin.so, the same
kernels split over an LLVM module and a C-source module it imports, exported as one
file carrying __tvm_ffi__library_bin and __tvm_ffi__library_ctx. Writes graph JSONs
(TVM's graph executor format) calling them, inputs as .npy, the outputs numpy
computes, and OUT_DIR/manifest.json listing the cases: outputs to match, or the
error (code and message parts) gexec must report.
"""

import json
import os
import sys

import numpy as np
import tvm
from tvm.script import tirx as T

ROWS, COLS = 32, 64  # 8 KiB of float32: more than TVM keeps on the stack, so workspace is allocated


@T.prim_func
def add_one(A: T.Buffer((ROWS, COLS), "float32"), B: T.Buffer((ROWS, COLS), "float32")):
    for i, j in T.grid(ROWS, COLS):
        B[i, j] = A[i, j] + T.float32(1)


@T.prim_func
def add_one_16(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        B[i] = A[i] + T.float32(1)


@T.prim_func
def add(A: T.Buffer((ROWS, COLS), "float32"), B: T.Buffer((ROWS, COLS), "float32"), C: T.Buffer((ROWS, COLS), "float32")):
    for i, j in T.grid(ROWS, COLS):
        C[i, j] = A[i, j] + B[i, j]


@T.prim_func
def scale_parallel(A: T.Buffer((ROWS, COLS), "float32"), B: T.Buffer((ROWS, COLS), "float32")):
    for i in T.parallel(ROWS):
        for j in range(COLS):
            B[i, j] = A[i, j] * T.float32(3) - T.float32(0.5)


@T.prim_func
def reverse_workspace(A: T.Buffer((ROWS, COLS), "float32"), B: T.Buffer((ROWS, COLS), "float32")):
    W = T.alloc_buffer((ROWS * COLS,), "float32")
    for i, j in T.grid(ROWS, COLS):
        W[i * COLS + j] = A[i, j]
    for i, j in T.grid(ROWS, COLS):
        B[i, j] = W[ROWS * COLS - 1 - (i * COLS + j)]


@T.prim_func
def row_sum(A: T.Buffer((ROWS, COLS), "float32"), B: T.Buffer((ROWS,), "float32")):
    for i in range(ROWS):
        B[i] = T.float32(0)
        for j in range(COLS):
            B[i] = B[i] + A[i, j]


# add_one_16 is the dispatch benchmark's (benchmarks/dispatch): a small kernel, so that
# the cost of calling it shows.
KERNELS = {"add_one": add_one, "add_one_16": add_one_16, "add": add, "scale_parallel": scale_parallel, "reverse_workspace": reverse_workspace, "row_sum": row_sum}


def module_of(names):
    return tvm.IRModule({n: KERNELS[n].with_attr("global_symbol", n) for n in names})


def runtime_module(built):
    return built.mod if hasattr(built, "mod") else built


def build_libraries(out):
    plain = os.path.join(out, "kernels.so")
    tvm.compile(module_of(KERNELS), target="llvm").export_library(plain)
    # The single-file form: an LLVM module importing a C-source module, linked into one library.
    host = runtime_module(tvm.compile(module_of(["add_one", "add_one_16", "add", "scale_parallel"]), target="llvm"))
    host.import_module(runtime_module(tvm.compile(module_of(["reverse_workspace", "row_sum"]), target="c")))
    single = os.path.join(out, "kernels_bin.so")
    host.export_library(single)
    return {"plain": "kernels.so", "single_file": "kernels_bin.so"}


class Graph:
    """A graph executor JSON, written the way TVM's graph codegen lays one out."""

    def __init__(self):
        self.nodes, self.shapes, self.dtypes, self.args = [], [], [], []

    def input(self, name, shape, dtype="float32"):
        self.args.append(len(self.nodes))
        self.nodes.append({"op": "null", "name": name, "inputs": []})
        self.shapes.append(list(shape))
        self.dtypes.append(dtype)
        return len(self.nodes) - 1

    def op(self, name, func, inputs, shape, dtype="float32"):
        self.nodes.append({"op": "tvm_op", "name": name, "inputs": [[i, 0, 0] for i in inputs],
                           "attrs": {"func_name": func, "num_inputs": str(len(inputs)), "num_outputs": "1", "flatten_data": "0"}})
        self.shapes.append(list(shape))
        self.dtypes.append(dtype)
        return len(self.nodes) - 1

    def json(self, heads):
        n = len(self.nodes)
        return json.dumps({
            "nodes": self.nodes,
            "arg_nodes": self.args,
            "heads": [[h, 0, 0] for h in heads],
            "attrs": {"dltype": ["list_str", self.dtypes], "shape": ["list_shape", self.shapes],
                      "storage_id": ["list_int", list(range(n))]},
            "node_row_ptr": list(range(n + 1)),
        }, indent=1)


def main(out):
    os.makedirs(out, exist_ok=True)
    libs = build_libraries(out)
    rng = np.random.default_rng(27)
    cases = []

    def save(name, array):
        np.save(os.path.join(out, name + ".npy"), array)
        return name + ".npy"

    def case(name, graph, heads, inputs, outputs=None, error=None):
        path = name + ".json"
        with open(os.path.join(out, path), "w") as f:
            f.write(graph.json(heads))
        for form, lib in libs.items():
            c = {"name": name + "/" + form, "graph": path, "library": lib,
                 "inputs": {k: save(name + "_" + k, v) for k, v in inputs.items()}}
            if outputs is not None:
                c["outputs"] = [save(name + "_out%d" % i, o) for i, o in enumerate(outputs)]
            if error is not None:
                c["error"] = error
            cases.append(c)

    x = rng.standard_normal((ROWS, COLS)).astype("float32")
    y = rng.standard_normal((ROWS, COLS)).astype("float32")

    g = Graph()
    gx = g.input("x", (ROWS, COLS))
    case("elementwise", g, [g.op("add_one_0", "add_one", [gx], (ROWS, COLS))], {"x": x}, [x + 1])

    # Every kernel in one graph: x -> +1 -> *3-0.5 (parallel) -> reversed (workspace) -> + y -> row sums.
    g = Graph()
    gx, gy = g.input("x", (ROWS, COLS)), g.input("y", (ROWS, COLS))
    a = g.op("add_one_0", "add_one", [gx], (ROWS, COLS))
    s = g.op("scale_parallel_0", "scale_parallel", [a], (ROWS, COLS))
    r = g.op("reverse_workspace_0", "reverse_workspace", [s], (ROWS, COLS))
    t = g.op("add_0", "add", [r, gy], (ROWS, COLS))
    o = g.op("row_sum_0", "row_sum", [t], (ROWS,))
    expected_t = ((x + 1) * 3 - 0.5).reshape(-1)[::-1].reshape(ROWS, COLS) + y
    case("all_kernels", g, [o, t], {"x": x, "y": y}, [expected_t.sum(axis=1, dtype="float64").astype("float32"), expected_t])

    # A graph whose tensors are not what the kernel was compiled for: the kernel's own
    # argument checks fail, with TVM's message.
    g = Graph()
    gx = g.input("x", (ROWS // 2, COLS))
    case("wrong_shape", g, [g.op("bad_shape", "add_one", [gx], (ROWS // 2, COLS))], {"x": x[: ROWS // 2]},
         error={"code": "kernel_failed", "contains": ['node "bad_shape"', "ValueError: Invalid A.shape[0]", "add_one(",
                                                      "expected %d" % ROWS]})
    g = Graph()
    gx = g.input("x", (ROWS, COLS), "float64")
    case("wrong_dtype", g, [g.op("bad_dtype", "add_one", [gx], (ROWS, COLS), "float64")], {"x": x.astype("float64")},
         error={"code": "kernel_failed", "contains": ['node "bad_dtype"', "TypeError: Mismatched A.dtype", "add_one(", "expected float32"]})
    g = Graph()
    gx = g.input("x", (ROWS, COLS))
    case("missing_kernel", g, [g.op("nowhere", "mul_two", [gx], (ROWS, COLS))], {"x": x},
         error={"code": "symbol_not_found", "contains": ['calls "mul_two"', "TVM-FFI kernel library", "__tvm_ffi_<func_name>"]})

    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump({"tvm_version": tvm.__version__, "cases": cases}, f, indent=1)
    # The same, a line per fact, for the C++ reader: "case NAME GRAPH LIBRARY", then
    # "input NAME FILE", "output FILE", "error CODE", "contains TEXT", and "end".
    with open(os.path.join(out, "manifest.txt"), "w") as f:
        for c in cases:
            f.write("case %s %s %s\n" % (c["name"], c["graph"], c["library"]))
            for k, v in c["inputs"].items():
                f.write("input %s %s\n" % (k, v))
            for o in c.get("outputs", []):
                f.write("output %s\n" % o)
            if "error" in c:
                f.write("error %s\n" % c["error"]["code"])
                for part in c["error"]["contains"]:
                    f.write("contains %s\n" % part)
            f.write("end\n")
    print("wrote %d cases to %s (TVM %s)" % (len(cases), out, tvm.__version__))


if __name__ == "__main__":
    main(sys.argv[1])
