"""gexec.contrib.debugger.debug_executor: TVM's debug API, its dump folder, and the
per-node outputs against TVM's own debug executor's dump (when TVM's Python is given in
GEXEC_TVM_PYTHON: the conformance venv's)."""

import json
import os
import subprocess

import numpy as np
import pytest

import gexec
from gexec.contrib.debugger import debug_executor
from conftest import graph_json

X = np.arange(6, dtype=np.float32).reshape(2, 3)


def test_debug_run_dumps_every_node(kernels_lib, tmp_path, capsys):
    lib = gexec.runtime.load_module(str(kernels_lib))
    g = graph_json([("a", "test_add_one", ["x"]), ("b", "test_add_one", ["a"])], ["x"])
    m = debug_executor.create(g, lib, gexec.cpu(0), dump_root=str(tmp_path))
    assert m.dump_path == str(tmp_path / "_tvmdbg_device_CPU_0")
    m.run(x=X)
    table = capsys.readouterr().out
    assert "Node Name" in table and "test_add_one" in table and "Total_time" in table
    assert np.array_equal(m.get_output(0).numpy(), X + 2)
    d = tmp_path / "_tvmdbg_device_CPU_0"
    assert sorted(os.listdir(d)) == ["_tvmdbg_execution_trace.json", "_tvmdbg_graph_dump.json", "output_tensors.params"]
    dumped = gexec.runtime.load_param_dict_from_file(d / "output_tensors.params")
    assert list(dumped) == ["x____topo-index:0____output-num:0", "a____topo-index:1____output-num:0",
                            "b____topo-index:2____output-num:0"]
    for k, want in zip(dumped, (X, X + 1, X + 2)):
        assert np.array_equal(dumped[k].numpy(), want)
    graph = json.loads((d / "_tvmdbg_graph_dump.json").read_text())
    assert [n["op"] for n in graph["nodes"]] == ["param", "test_add_one", "test_add_one"]
    assert graph["nodes"][2]["inputs"] == ["a"] and graph["nodes"][1]["attrs"]["T"] == "type: float32"
    trace = json.loads((d / "_tvmdbg_execution_trace.json").read_text())
    assert [e["ph"] for e in trace["traceEvents"]] == ["B", "E"] * 3
    times = m.run_individual(number=2, repeat=3)
    assert len(times) == 3 and all(len(t) == 3 for t in times) and times[0] == [0, 0, 0] and min(times[1]) > 0
    r = m.run_individual_node(1, number=2, repeat=2)
    assert len(r.results) == 2 and r.min > 0
    with pytest.raises(IndexError):
        m.run_individual_node(9)
    report = m.profile(x=X)
    assert "test_add_one" in str(report) and report.run_time > 0
    assert np.array_equal(m.debug_get_output("a").numpy(), X + 1)
    with pytest.raises(ValueError):
        m.profile(collectors=["papi"])
    m.exit()
    assert not tmp_path.exists()


def test_default_dump_root_is_temporary(kernels_lib):
    lib = gexec.runtime.load_module(str(kernels_lib))
    m = debug_executor.create(graph_json([("a", "test_add_one", ["x"])], ["x"]), lib, [gexec.cpu(0)])
    assert os.path.basename(m.dump_root).startswith("tvmdbg_") and os.path.isdir(m.dump_path)
    m.exit()
    assert not os.path.exists(m.dump_root)
    with pytest.raises(TypeError):
        debug_executor.create("{}", "lib", gexec.cpu(0))


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


@pytest.mark.parametrize("model", ["mlp", "resnet", "mobilenet", "reshape_split", "int_scalar", "opt3_parallel"])
def test_node_dumps_equal_tvms(conformance_dir, tmp_path, model, capsys):
    tvm_python = os.environ.get("GEXEC_TVM_PYTHON")
    if not tvm_python or not os.path.exists(tvm_python):
        pytest.skip("GEXEC_TVM_PYTHON is not set (the conformance venv's python, with TVM)")
    d = conformance_dir / model
    subprocess.run([tvm_python, "-c", _TVM_DUMP, str(d), str(tmp_path / "tvm")], check=True, capture_output=True)
    lib = gexec.runtime.load_module(d / "lib.so")
    m = debug_executor.create((d / "graph.json").read_text(), lib, gexec.cpu(0), dump_root=str(tmp_path / "gexec"))
    m.load_params((d / "params.bin").read_bytes())
    m.run(number=1, **gexec.runtime.load_param_dict_from_file(d / "inputs.bin"))
    capsys.readouterr()
    theirs = gexec.runtime.load_param_dict_from_file(tmp_path / "tvm" / "_tvmdbg_device_CPU_0" / "output_tensors.params")
    ours = gexec.runtime.load_param_dict_from_file(tmp_path / "gexec" / "_tvmdbg_device_CPU_0" / "output_tensors.params")
    assert sorted(ours) == sorted(theirs)  # TVM writes them in its map's order
    differ = [k for k in theirs if ours[k].numpy().tobytes() != theirs[k].numpy().tobytes()]
    assert not differ, "per-node outputs differing from TVM's: %s" % differ[:5]
