"""What TVM v0.19's own graph-executor tests (tests/python/runtime/test_runtime_graph*.py,
test_runtime_module_based_interface.py, relay/test_backend_graph_executor.py) expect of
the runtime's Python API, each checked against results computed here with numpy."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import numpy as np
import pytest

import gexec
from gexec.contrib import graph_executor
from gexec.contrib.debugger import debug_executor
from conftest import graph_json


@pytest.fixture(scope="module")
def lib(kernels_lib):
    return gexec.runtime.load_module(str(kernels_lib))


def _mlp(conformance_dir):
    d = conformance_dir / "mlp"
    inputs = gexec.runtime.load_param_dict_from_file(d / "inputs.bin")
    want = gexec.runtime.load_param_dict_from_file(d / "outputs.bin")["0"].numpy()
    return d, inputs, want


# ---- values set_input converts as TVM's copyfrom ----------------------------------------

@pytest.mark.parametrize("kernel,dtype,pairs", [
    # TVM's test_add_op_scalar and test_add_op_scalar_int (tests/python/relay/test_backend_graph_executor.py)
    ("test_add", "float32", [(np.array(10.0, dtype="float32"), np.array(1.0, dtype="float32")),
                             (np.float32(10.0), np.float32(1.0)), (10.0, 1.0), (3, 4), (2.5, np.float64(0.25))]),
    ("test_add_int32", "int32", [(np.array(10.0, dtype="int32"), np.array(1.0, dtype="int32")),
                                 (np.int32(10), np.int32(1)), (10, 1), (np.int64(-7), 3)]),
])
def test_number_for_a_0d_input_is_0d(lib, kernel, dtype, pairs):
    m = graph_executor.create(graph_json([("sum", kernel, ["x", "y"])], ["x", "y"], shape=(), dtype=dtype), lib,
                              gexec.cpu(0))
    for x, y in pairs:
        want = np.asarray(x).astype(dtype) + np.asarray(y).astype(dtype)
        m.set_input("x", x)
        m.set_input(1, y)
        m.run()
        out = m.get_output(0).numpy()
        assert out.shape == () and out.dtype == np.dtype(dtype) and out == want
        m.run(x=y, y=x)
        assert m.get_output(0).numpy() == want
    assert gexec.nd.array(np.float32(10)).shape == () and gexec.nd.array(np.float32(10)).numpy() == 10


def test_numpy_arrays_of_another_dtype_are_converted(lib):
    x = np.random.uniform(-2, 2, size=(2, 3))  # float64
    m = graph_executor.create(graph_json([("inc", "test_add_one", ["x"])], ["x"]), lib, gexec.cpu(0))
    m.set_input("x", x)
    m.run()
    assert np.array_equal(m.get_output(0).numpy(), x.astype(np.float32) + np.float32(1))
    ints = np.arange(6, dtype=np.int64).reshape(2, 3)
    m.run(x=ints)
    assert np.array_equal(m.get_output(0).numpy(), ints.astype(np.float32) + 1)
    # a float array for an int input would be truncated: refused, saying how to convert it
    mi = graph_executor.create(graph_json([("sum", "test_add_int32", ["a", "b"])], ["a", "b"], dtype="int32"), lib,
                               gexec.cpu(0))
    with pytest.raises(ValueError) as e:
        mi.set_input("a", x)
    assert e.value.code == "dtype_mismatch" and ".astype(np.int32)" in str(e.value)
    mi.set_input("a", ints)  # int64 -> int32
    mi.set_input("b", np.ones((2, 3), np.int16))
    mi.run()
    assert np.array_equal(mi.get_output(0).numpy(), (ints + 1).astype(np.int32))
    # zero-copy uses the array's own memory: its dtype must match
    with pytest.raises(ValueError) as e:
        m.set_input_zero_copy("x", x)
    assert e.value.code == "dtype_mismatch"


# ---- get_input_info as TVM lists it -----------------------------------------------------

def test_input_info_lists_the_parameters_of_a_single_file_model(conformance_dir):
    d, inputs, want = _mlp(conformance_dir)
    graph = json.loads((d / "graph.json").read_text())
    arg_names = [graph["nodes"][i]["name"] for i in graph["arg_nodes"]]
    shapes = {graph["nodes"][i]["name"]: graph["attrs"]["shape"][1][i] for i in graph["arg_nodes"]}
    dtypes = {graph["nodes"][i]["name"]: graph["attrs"]["dltype"][1][i] for i in graph["arg_nodes"]}
    assert len(arg_names) > 1  # data and the weights

    def check(m, names):
        shape_dict, dtype_dict = m.get_input_info()
        assert isinstance(shape_dict, gexec.container.Map) and isinstance(dtype_dict, gexec.container.Map)
        assert list(shape_dict) == names and list(dtype_dict) == names
        for name in names:
            assert isinstance(shape_dict[name], gexec.runtime.container.ShapeTuple)
            assert shape_dict[name] == gexec.runtime.container.ShapeTuple(shapes[name]) == shapes[name]
            assert isinstance(dtype_dict[name], gexec.runtime.container.String) and dtype_dict[name] == dtypes[name]

    # a single-file library's factory sets its parameters as inputs: TVM lists them
    lib = gexec.runtime.load_module(d / "model.so")
    check(graph_executor.GraphModule(lib["default"](gexec.cpu(0))), arg_names)
    check(gexec.Model.load(d / "model.so").instantiate(), arg_names)
    # graph + kernels: every input until load_params loads the weights (TVM's param_names_)
    m = graph_executor.create((d / "graph.json").read_text(), gexec.runtime.load_module(d / "lib.so"), gexec.cpu(0))
    check(m, arg_names)
    m.load_params((d / "params.bin").read_bytes())
    check(m, ["data"])
    check(gexec.Model.load((d / "graph.json", d / "lib.so", d / "params.bin")).instantiate(), ["data"])
    out_shapes, out_dtypes = m.get_output_info()
    assert isinstance(out_shapes, gexec.container.Map) and list(out_shapes.values()) == [want.shape]
    assert all(isinstance(v, gexec.runtime.ShapeTuple) for v in out_shapes.values())
    assert list(out_dtypes.values()) == [str(want.dtype)]
    params = lib["get_graph_params"]()
    assert isinstance(params, gexec.container.Map) and sorted(params) == sorted(arg_names[1:])


def test_containers():
    s = gexec.runtime.container.ShapeTuple([1, 3, 224, 224])
    assert s == (1, 3, 224, 224) and s == [1, 3, 224, 224] and s != [1, 3] and s != (1, 3, 224, 225)
    assert s[1] == 3 and len(s) == 4 and hash(s) == hash((1, 3, 224, 224)) and isinstance(s, tuple)
    assert gexec.runtime.ShapeTuple(np.array([2, 3])[:1].tolist()) == [2]
    with pytest.raises(TypeError):
        gexec.runtime.ShapeTuple([1.5])
    assert gexec.runtime.String("float32") == "float32" and isinstance(gexec.runtime.String("x"), str)
    assert gexec.container.Map({"a": 1})["a"] == 1


# ---- the debug executor ------------------------------------------------------------------

# TVM's test_runtime_graph_debug.py graph: x -> add (func myadd, here test_add_one), shape (4,)
_DEBUG_GRAPH = json.dumps({
    "nodes": [{"op": "null", "name": "x", "inputs": []},
              {"op": "tvm_op", "name": "add", "inputs": [[0, 0, 0]],
               "attrs": {"func_name": "test_add_one", "flatten_data": "1", "num_inputs": "1", "num_outputs": "1"}}],
    "arg_nodes": [0], "node_row_ptr": [0, 1, 2], "heads": [[1, 0, 0]],
    "attrs": {"shape": ["list_shape", [[4], [4]]], "dltype": ["list_str", ["float32", "float32"]],
              "storage_id": ["list_int", [0, 1]]},
})


def test_debug_datum(lib, tmp_path, capsys):
    mod = debug_executor.create(_DEBUG_GRAPH, lib, gexec.cpu(0), dump_root=str(tmp_path))
    a = np.random.uniform(size=(4,)).astype(np.float32)
    mod.set_input(x=a)
    nodes = mod.debug_datum.get_graph_nodes()
    assert len(nodes) == 2 and nodes[0]["op"] == "param" and nodes[1]["op"] == "test_add_one"
    assert nodes[1]["inputs"] == ["x"] and nodes[1]["shape"] == [4] and nodes[1]["attrs"]["T"] == "type: float32"
    assert mod.debug_datum.get_graph_node_output_num(nodes[1]) == 1
    mod.run()
    capsys.readouterr()

    debug_lines = mod.debug_datum.get_debug_result().split("\n")

    def split_debug_line(i):  # as TVM's test_end_to_end_graph_simple reads the table
        parts = re.split(r"  [ ]*", debug_lines[i])
        assert parts[-1] == ""
        return parts[:-1]

    assert split_debug_line(0) == ["Node Name", "Ops", "Time(us)", "Time(%)", "Shape", "Inputs", "Outputs",
                                   "Measurements(us)"]
    row = split_debug_line(2)
    assert row[:2] == ["add", "test_add_one"] and float(row[2]) > 0 and row[4] == "(4,)"
    total = split_debug_line(3)
    assert total[0] == "Total_time" and total[2] == row[2]
    tensors = mod.debug_datum.get_output_tensors()
    assert list(tensors) == ["x____topo-index:0____output-num:0", "add____topo-index:1____output-num:0"]
    assert np.array_equal(tensors["x____topo-index:0____output-num:0"].numpy(), a)
    assert np.array_equal(tensors["add____topo-index:1____output-num:0"].numpy(), a + np.float32(1))
    assert np.array_equal(mod.get_output(0, gexec.nd.empty((4,))).numpy(), a + np.float32(1))
    # a second run's tensors replace the first's
    b = a * 2
    mod.run(x=b)
    capsys.readouterr()
    assert np.array_equal(mod.debug_datum.get_output_tensors()["add____topo-index:1____output-num:0"].numpy(),
                          b + np.float32(1))
    mod.exit()


def test_debug_create_of_a_single_file_library(conformance_dir, capsys):
    # TVM's test_debug_graph_executor (test_runtime_module_based_interface.py) and
    # test_multiple_output (test_runtime_graph_debug.py), over a TVM-compiled model
    d, inputs, want = _mlp(conformance_dir)
    lib = gexec.runtime.load_module(d / "model.so")
    dev = gexec.cpu()
    gmod = lib["debug_create"]("default", dev)
    gmod["set_input"]("data", gexec.nd.array(inputs["data"].numpy()))
    gmod["run"]()
    assert np.array_equal(gmod["get_output"](0).numpy(), want)

    graph_json_str = lib["get_graph_json"]()
    m = debug_executor.GraphModuleDebug(lib["debug_create"]("default", dev), [dev], graph_json_str, None)
    graph = json.loads(graph_json_str)
    nodes = m.debug_datum.get_graph_nodes()
    assert len(nodes) == len(graph["nodes"])
    eids = np.cumsum([0] + [int(n.get("attrs", {}).get("num_outputs", 1)) for n in graph["nodes"]])
    for n, eid in zip(nodes, eids):
        assert n["shape"] == graph["attrs"]["shape"][1][eid]
    m.set_input("data", inputs["data"].numpy())
    m.run(number=1)
    capsys.readouterr()
    assert np.array_equal(m.get_output(0).numpy(), want)
    assert "Total_time" in m.debug_datum.get_debug_result()
    m.exit()
    with pytest.raises(ValueError):
        lib["debug_create"]("not_the_model", dev)


def test_num_threads():
    # TVM's test_num_threads, with the environment variables gexec reads
    code = "import gexec; print(gexec.runtime.num_threads())"
    base = {k: v for k, v in os.environ.items() if k not in ("GEXEC_NUM_THREADS", "TVM_NUM_THREADS")}

    def reported(**env):
        out = subprocess.run([sys.executable, "-c", code], env=dict(base, **env), capture_output=True, text=True,
                             check=True)
        return int(out.stdout)

    assert reported(TVM_NUM_THREADS="3") == 3
    assert reported(GEXEC_NUM_THREADS="2", TVM_NUM_THREADS="3") == 2
    assert 1 <= reported() <= len(os.sched_getaffinity(0))


# ---- inputs never set --------------------------------------------------------------------

def test_inputs_never_set_run_as_zeros(lib, tmp_path):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    g = graph_json([("inc", "test_add_one", ["x"])], ["x"])
    m = graph_executor.create(g, lib, gexec.cpu(0))  # TVM's API: runs them (here as zeros)
    m.run()
    assert np.array_equal(m.get_output(0).numpy(), np.zeros((2, 3), np.float32) + 1)
    m.set_input("x", x)
    m.run()
    assert np.array_equal(m.get_output(0).numpy(), x + 1)
    strict = graph_executor.create(g, lib, gexec.cpu(0), zero_unset_inputs=False)
    with pytest.raises(ValueError) as e:
        strict.run()
    assert '"x"' in str(e.value) and "zero_unset_inputs=True" in str(e.value) and "model_options" not in str(e.value)

    # gexec's Model: refused unless asked for
    w = np.full((2, 3), 0.5, np.float32)
    gw = graph_json([("sum", "test_add", ["x", "w"])], ["x", "w"])
    (tmp_path / "g.json").write_text(gw)
    gexec.runtime.save_param_dict_to_file({"w": w}, tmp_path / "p.params")
    files = (tmp_path / "g.json", lib.path, tmp_path / "p.params")
    with pytest.raises(ValueError) as e:
        gexec.Model.load(files).instantiate().run()
    assert "zero_unset_inputs=True" in str(e.value)
    m = gexec.Model.load(files, zero_unset_inputs=True).instantiate()
    m.run()
    assert np.array_equal(m.get_output(0).numpy(), np.zeros((2, 3), np.float32) + w)

    # TVM's test_compile_return_empty_tuple: an input, no outputs; and a graph of no nodes
    empty_tuple = json.dumps({"nodes": [{"op": "null", "name": "x", "inputs": []}], "arg_nodes": [0], "heads": [],
                              "node_row_ptr": [0, 1], "attrs": {"shape": ["list_shape", [[16]]],
                                                                "dltype": ["list_str", ["float32"]],
                                                                "storage_id": ["list_int", [0]]}})
    no_nodes = json.dumps({"nodes": [], "arg_nodes": [], "heads": [], "node_row_ptr": [0],
                           "attrs": {"shape": ["list_shape", []], "dltype": ["list_str", []],
                                     "storage_id": ["list_int", []]}})
    for g in (empty_tuple, no_nodes):
        m = graph_executor.create(g, lib, gexec.cpu(0))
        m.run()
        assert m.get_num_outputs() == 0


def test_single_file_model_with_inputs_never_set(conformance_dir):
    d, inputs, want = _mlp(conformance_dir)
    data = inputs["data"].numpy()
    lib = gexec.runtime.load_module(d / "model.so")
    m = graph_executor.GraphModule(lib["default"](gexec.cpu(0)))
    m.set_input("data", np.zeros_like(data))
    m.run()
    zeros_out = m.get_output(0).numpy()
    fresh = graph_executor.GraphModule(lib["default"](gexec.cpu(0)))
    fresh.run()  # data never set: as zeros
    assert np.array_equal(fresh.get_output(0).numpy(), zeros_out)
    fresh.set_input("data", data)
    fresh.run()
    assert np.array_equal(fresh.get_output(0).numpy(), want)
    strict = gexec.runtime.load_module(d / "model.so", zero_unset_inputs=False)
    with pytest.raises(ValueError) as e:
        graph_executor.GraphModule(strict["default"](gexec.cpu(0))).run()
    assert '"data"' in str(e.value)


# ---- errors ------------------------------------------------------------------------------

def test_missing_files_are_file_not_found(tmp_path, kernels_lib):
    missing = tmp_path / "missing.so"
    calls = [lambda: gexec.runtime.load_module(missing), lambda: gexec.runtime.load_module(str(missing)),
             lambda: gexec.Model.load(missing),
             lambda: gexec.Model.load((tmp_path / "g.json", kernels_lib, tmp_path / "p.params")),
             lambda: gexec.runtime.load_param_dict_from_file(missing)]
    for call in calls:
        with pytest.raises(FileNotFoundError) as e:
            call()
        assert e.value.filename.startswith(str(tmp_path)) and "No such file" in str(e.value)
    with pytest.raises(ValueError):  # TVM's load_module raises ValueError for it
        gexec.runtime.load_module(missing)


def _other_machine_libraries(kernels_lib, tmp_path):
    """Libraries for aarch64: this machine's kernels with e_machine changed, and one the
    cross compiler builds where there is one."""
    patched = tmp_path / "patched_aarch64.so"
    shutil.copy(kernels_lib, patched)
    with open(patched, "r+b") as f:
        f.seek(18)
        f.write((183).to_bytes(2, "little"))  # EM_AARCH64
    libs = [patched]
    cc = shutil.which("aarch64-linux-gnu-gcc")
    if cc:
        (tmp_path / "k.c").write_text("int kernel(int x) { return x + 1; }\n")
        subprocess.run([cc, "-shared", "-fPIC", "-o", str(tmp_path / "real_aarch64.so"), str(tmp_path / "k.c")],
                       check=True)
        libs.append(tmp_path / "real_aarch64.so")
    return libs


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the libraries are made for aarch64 on x86-64")
def test_library_for_another_machine_is_named(kernels_lib, tmp_path):
    for path in _other_machine_libraries(kernels_lib, tmp_path):
        for call in (lambda: gexec.runtime.load_module(path), lambda: gexec.Model.load(path)):
            with pytest.raises(gexec.Error) as e:
                call()
            message = str(e.value)
            assert "built for aarch64, this process is x86-64" in message and "No such file" not in message


def test_command_line_usage_examples_run(conformance_dir, tmp_path):
    import gexec.__main__ as main
    if not os.path.exists(os.path.join(os.path.dirname(gexec.__file__), "bin", "gexec-run")):
        pytest.skip("this build of the package has no gexec-run (built without CLI11)")
    d, inputs, want = _mlp(conformance_dir)
    np.save(tmp_path / "img.npy", inputs["data"].numpy())
    examples = [line.split() for line in main.__doc__.splitlines() if line.strip().startswith("python -m gexec model.so")]
    assert examples
    for words in examples:
        args = [w.replace("model.so", str(d / "model.so")).replace("@img.npy", "@%s" % (tmp_path / "img.npy"))
                .replace("out.npz", str(tmp_path / "out.npz")) for w in words[3:]]
        r = subprocess.run([sys.executable, "-m", "gexec", *args], capture_output=True, text=True, cwd=tmp_path)
        assert r.returncode == 0, "%s: %s" % (shlex.join(words), r.stderr)
    with np.load(tmp_path / "out.npz") as out:
        assert np.array_equal(out[out.files[0]], want)
