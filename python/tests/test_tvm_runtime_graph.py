"""TVM v0.19's tests/python/runtime/test_runtime_graph.py on gexec: the models are compiled
by the relay-era TVM of GEXEC_TVM_PYTHON (the conformance venv's python) in a subprocess,
and run here by gexec, with the tests' logic and assertions unchanged. Where a test built
a model in-process (tvm.build, relay.build) it loads what the subprocess exported.

Not ported: check_remote (TVM's RPC server and client, which gexec does not have).
Without GEXEC_TVM_PYTHON the tests that need a compiled model are SKIPPED, saying why."""

import json
import os
import subprocess
import tempfile

import numpy as np
import pytest

import gexec
from gexec import runtime
from gexec.contrib import graph_executor

# The target generate_models.py compiles the conformance models for (plain "llvm" needs a
# stock LLVM; some TVM wheels ship one whose default triple is another machine's).
_TARGET = "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=x86-64"

# What the tests build, as TVM's tests build it, exported for gexec.
_TVM_BUILD = r"""
import os, sys
import numpy as np
import tvm
from tvm import te, relay, runtime
out, target = sys.argv[1], sys.argv[2]

# test_graph_simple: B = A + 1 for n = 4, one function named myadd
n = 4
A = te.placeholder((n,), name="A")
B = te.compute(A.shape, lambda *i: A(*i) + 1.0, name="B")
s = te.create_schedule(B.op)
tvm.build(s, [A, B], target, name="myadd").export_library(os.path.join(out, "myadd.so"))

# test_graph_simple's check_sharing: z = x + y, x given as a parameter
x = relay.var("x", shape=(1, 10))
y = relay.var("y", shape=(1, 10))
func = relay.Function([x, y], relay.add(x, y))
params = {"x": np.ones((1, 10)).astype("float32")}
graph, lib, params = relay.build(func, target=target, params=params)
open(os.path.join(out, "sharing.json"), "w").write(graph)
lib.export_library(os.path.join(out, "sharing.so"))
open(os.path.join(out, "sharing.params"), "wb").write(runtime.save_param_dict(params))

# test_load_unexpected_params: z = x + y, no parameters
mod = tvm.IRModule()
x = relay.var("x", shape=(1, 10))
y = relay.var("y", shape=(1, 10))
mod["main"] = relay.Function([x, y], relay.add(x, y))
graph_module = relay.build(mod, target=target, params={})
open(os.path.join(out, "unexpected.json"), "w").write(graph_module.get_graph_json())
graph_module.get_lib().export_library(os.path.join(out, "unexpected.so"))
open(os.path.join(out, "unexpected.params"), "wb").write(runtime.save_param_dict(graph_module.get_params()))
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tvm_python = os.environ.get("GEXEC_TVM_PYTHON")
    if not tvm_python or not os.path.exists(tvm_python):
        pytest.skip("GEXEC_TVM_PYTHON is not set or absent (the conformance venv's python, with relay-era TVM): "
                    "the models of TVM's test_runtime_graph.py are compiled by it")
    if os.uname().machine != "x86_64":
        pytest.skip("the models are compiled for x86-64")
    out = tmp_path_factory.mktemp("tvm_runtime_graph")
    r = subprocess.run([tvm_python, "-c", _TVM_BUILD, str(out), _TARGET], capture_output=True, text=True)
    assert r.returncode == 0, "compiling with TVM failed:\n" + r.stderr[-4000:]
    return out


def _relay_build(built, name):
    """What relay.build returned (graph, lib, params), from the files the subprocess wrote."""
    graph = (built / (name + ".json")).read_text()
    lib = runtime.load_module(built / (name + ".so"))
    params = runtime.load_param_dict((built / (name + ".params")).read_bytes())
    return graph, lib, params


def test_graph_simple(built):
    n = 4

    node0 = {"op": "null", "name": "x", "inputs": []}
    node1 = {
        "op": "tvm_op",
        "name": "add",
        "inputs": [[0, 0, 0]],
        "attrs": {"func_name": "myadd", "flatten_data": "1", "num_inputs": "1", "num_outputs": "1"},
    }
    nodes = [node0, node1]
    arg_nodes = [0]
    node_row_ptr = [0, 1, 2]
    outputs = [[1, 0, 0]]
    shape = (4,)
    attrs = {
        "shape": ["list_shape", [shape, shape]],
        "dltype": ["list_str", ["float32", "float32"]],
        "storage_id": ["list_int", [0, 1]],
    }
    graph = {
        "nodes": nodes,
        "arg_nodes": arg_nodes,
        "node_row_ptr": node_row_ptr,
        "heads": outputs,
        "attrs": attrs,
    }
    graph = json.dumps(graph)

    def check_verify():
        mlib = runtime.load_module(built / "myadd.so")  # tvm.build(s, [A, B], "llvm", name="myadd")
        mod = graph_executor.create(graph, mlib, gexec.cpu(0))
        a = np.random.uniform(size=(n,)).astype("float32")  # A.dtype
        mod.run(x=a)
        out = mod.get_output(0, gexec.nd.empty((n,)))
        np.testing.assert_equal(out.numpy(), a + 1)

    def check_sharing():
        x_in = np.ones((1, 10)).astype("float32")
        graph, lib, params = _relay_build(built, "sharing")  # relay.build(func, target="llvm", params={"x": x_in})

        mod_shared = graph_executor.create(graph, lib, gexec.cpu(0))
        mod_shared.load_params(runtime.save_param_dict(params))
        num_mods = 10
        mods = [graph_executor.create(graph, lib, gexec.cpu(0)) for _ in range(num_mods)]

        for mod in mods:
            mod.share_params(mod_shared, runtime.save_param_dict(params))

        a = np.random.uniform(size=(1, 10)).astype("float32")
        for mod in mods:
            mod.run(y=a)
            out = mod.get_output(0, gexec.nd.empty((1, 10)))
            np.testing.assert_equal(out.numpy(), x_in + a)

        # Explicitly delete the shared module and verify correctness.
        del mod_shared
        for mod in mods:
            mod.run(y=a)
            out = mod.get_output(0, gexec.nd.empty((1, 10)))
            np.testing.assert_equal(out.numpy(), x_in + a)
            del mod

    check_verify()
    check_sharing()


def test_load_unexpected_params(built):
    # Test whether graph_executor.load_params works if parameters
    # are provided that are not an expected input.
    graph_json, lib, params = _relay_build(built, "unexpected")  # relay.build(mod, target="llvm", params={})
    rt_mod = graph_executor.create(graph_json, lib, gexec.cpu(0))

    new_params = params  # graph_module.get_params()
    new_params.update({"y_unknown": np.ones((1,)).astype("float32")})
    rt_mod.load_params(runtime.save_param_dict(new_params))


def test_save_load_file():
    p = np.random.randn(10)
    params = {"x": p}

    with tempfile.NamedTemporaryFile() as fp:
        runtime.save_param_dict_to_file(params, fp.name)
        params_loaded = runtime.load_param_dict_from_file(fp.name)

        assert "x" in params_loaded
        np.testing.assert_equal(p, params_loaded["x"].numpy())
