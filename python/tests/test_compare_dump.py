"""gexec.compare_dump and gexec-run --compare-dump against dumps written by TVM's own debug
executor for the conformance models (when TVM's Python is given in GEXEC_TVM_PYTHON: the
conformance venv's): equal on every node, and a dump changed at one node found there."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import gexec
from gexec.contrib import graph_executor

_TVM_DUMP = r"""
import sys, tvm
from tvm.contrib.debugger import debug_executor
d, out = sys.argv[1], sys.argv[2]
lib = tvm.runtime.load_module(d + "/lib.so")
m = debug_executor.create(open(d + "/graph.json").read(), lib, tvm.cpu(0), dump_root=out)
m.load_params(open(d + "/params.bin", "rb").read())
inputs = tvm.runtime.load_param_dict(open(d + "/inputs.bin", "rb").read())
m.run(number=1, **inputs)
"""


def tvm_dump(d, out):
    tvm_python = os.environ.get("GEXEC_TVM_PYTHON")
    if not tvm_python or not os.path.exists(tvm_python):
        pytest.skip("GEXEC_TVM_PYTHON is not set (the conformance venv's python, with TVM)")
    subprocess.run([tvm_python, "-c", _TVM_DUMP, str(d), str(out)], check=True, capture_output=True)
    return out


def module_of(d):
    lib = gexec.runtime.load_module(d / "lib.so")
    m = graph_executor.create((d / "graph.json").read_text(), lib, gexec.cpu(0))
    m.load_params((d / "params.bin").read_bytes())
    return m


@pytest.mark.parametrize("model", ["mlp", "resnet", "reshape_split", "int_scalar"])
def test_equal_to_tvms_dump_on_every_node(conformance_dir, tmp_path, model):
    d = conformance_dir / model
    dump = tvm_dump(d, tmp_path / "tvm")
    c = gexec.compare_dump(module_of(d), dump, atol=0, rtol=0)
    nodes = json.loads((d / "graph.json").read_text())["nodes"]
    assert c.equal, str(c)
    assert len(c.nodes) >= len(nodes)
    assert all(n["found"] and n["within"] and n["max_abs"] == 0 for n in c.nodes)
    assert [n["name"] for n in c.nodes if n["index"] == 0] == [n["name"] for n in nodes]
    graph_inputs = [n["name"] for i, n in enumerate(nodes) if n["op"] == "null"]
    assert c.inputs_from_dump and set(c.inputs_from_dump) <= set(graph_inputs)


def test_changed_dump_diverges_at_the_changed_node(conformance_dir, tmp_path):
    d = conformance_dir / "resnet"
    dump = tvm_dump(d, tmp_path / "tvm")
    file = dump / "_tvmdbg_device_CPU_0" / "output_tensors.params"
    tensors = gexec.runtime.load_param_dict_from_file(file)
    nodes = json.loads((d / "graph.json").read_text())["nodes"]
    ops = [i for i, n in enumerate(nodes) if n["op"] == "tvm_op" and n["attrs"]["func_name"] != "__nop"]
    target = ops[len(ops) // 2]
    key = "%s____topo-index:%d____output-num:0" % (nodes[target]["name"], target)
    changed = {k: v.numpy() for k, v in tensors.items()}
    flat = changed[key].reshape(-1)
    flat[7] += np.float32(0.125) * max(1.0, abs(float(flat[7])))
    gexec.runtime.save_param_dict_to_file(changed, str(file))

    c = gexec.compare_dump(module_of(d), dump, atol=1e-5, rtol=1e-5)
    first = c.first_divergence
    assert first is not None and first["node_id"] == target, str(c)
    assert first["func_name"] == nodes[target]["attrs"]["func_name"]
    assert first["mismatched"] == 1 and first["first_mismatch"] == 7
    assert first["max_ulps"] > 0 and first["max_abs"] >= 0.125
    assert len(first["inputs"]) == len(nodes[target]["inputs"])
    assert all(n["within"] for n in c.nodes if n["node_id"] != target)

    exe = os.path.join(os.path.dirname(gexec.__file__), "bin", "gexec-run")
    if not os.path.exists(exe):
        pytest.skip("this build of the package has no gexec-run (built without CLI11)")
    r = subprocess.run([sys.executable, "-m", "gexec", "-g", d / "graph.json", "-l", d / "lib.so", "-p", d / "params.bin",
                        "--compare-dump", dump, "--atol", "1e-5", "--rtol", "1e-5"], capture_output=True, text=True)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "FIRST DIVERGENCE at node %d (%s)" % (target, nodes[target]["name"]) in r.stdout
    assert "function: " + nodes[target]["attrs"]["func_name"] in r.stdout


def test_bad_arguments(kernels_lib, tmp_path):
    from conftest import graph_json
    m = graph_executor.create(graph_json([("a", "test_add_one", ["x"])], ["x"]), gexec.runtime.load_module(str(kernels_lib)),
                              gexec.cpu(0))
    with pytest.raises(gexec.Error, match="no such file or directory"):
        gexec.compare_dump(m, tmp_path / "none")
    with pytest.raises(TypeError):
        gexec.compare_dump("not a module", tmp_path)
