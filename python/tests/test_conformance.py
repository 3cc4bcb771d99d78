"""Every TVM-compiled conformance model, in both export forms, through the TVM-named
Python API: outputs bit-identical to the ones TVM computed (outputs.bin)."""

import json

import numpy as np
import pytest

import gexec
from gexec.contrib import graph_executor

FORMS = ["single_file", "three_files", "model_single", "model_three"]


def _models(manifest):
    return manifest["models"]


def _load(d, form):
    if form == "single_file":
        lib = gexec.runtime.load_module(str(d / "model.so"))
        return graph_executor.GraphModule(lib["default"](gexec.cpu(0)))
    if form == "three_files":
        lib = gexec.runtime.load_module(str(d / "lib.so"))
        m = graph_executor.create((d / "graph.json").read_text(), lib, gexec.cpu(0))
        m.load_params(bytearray((d / "params.bin").read_bytes()))
        return m
    if form == "model_single":
        return gexec.Model.load(d / "model.so").instantiate()
    return gexec.Model.load((d / "graph.json", d / "lib.so", d / "params.bin")).instantiate()


def _same_bits(got, want):
    return got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()


def test_manifest_lists_models(manifest):
    assert manifest["models"], "the manifest lists no model"


@pytest.mark.parametrize("form", FORMS)
def test_every_model_bit_identical_to_tvm(conformance_dir, manifest, form):
    failures = []
    for name in _models(manifest):
        d = conformance_dir / name
        info = json.loads((d / "info.json").read_text())
        inputs = gexec.runtime.load_param_dict_from_file(d / "inputs.bin")
        outputs = gexec.runtime.load_param_dict_from_file(d / "outputs.bin")
        m = _load(d, form)
        shapes, dtypes = m.get_input_info()
        # As TVM's: the parameters a single-file library sets are listed, those loaded are not
        graph = json.loads((d / "graph.json").read_text())
        arg_names = [graph["nodes"][i]["name"] for i in graph["arg_nodes"]]
        assert list(shapes) == (arg_names if form in ("single_file", "model_single") else info["input_names"]), name
        for i in info["input_names"]:
            assert shapes[i] == tuple(info["inputs"][i]["shape"]), name
            assert dtypes[i] == info["inputs"][i]["dtype"], name
            m.set_input(i, inputs[i].numpy())  # numpy in, as TVM's users do
        m.run()
        assert m.get_num_outputs() == len(outputs) == info["num_outputs"], name
        for k in range(m.get_num_outputs()):
            got, want = m.get_output(k).numpy(), outputs[str(k)].numpy()
            if not _same_bits(got, want):
                failures.append("%s output %d: max |diff| %s" % (name, k, np.max(np.abs(got.astype(np.float64) - want))))
    assert not failures, "\n".join(failures)


def test_inputs_as_ndarray_and_run_kwargs(conformance_dir, manifest):
    for name in _models(manifest):
        d = conformance_dir / name
        inputs = gexec.runtime.load_param_dict_from_file(d / "inputs.bin")
        outputs = gexec.runtime.load_param_dict_from_file(d / "outputs.bin")
        m = _load(d, "single_file")
        m.run(**{k: gexec.nd.array(v.numpy()) for k, v in inputs.items()})
        for k in range(m.get_num_outputs()):
            out = gexec.nd.empty(outputs[str(k)].shape, outputs[str(k)].dtype)
            assert m.get_output(k, out) is out
            assert _same_bits(out.numpy(), outputs[str(k)].numpy()), name


def test_graph_json_and_params_of_single_file(conformance_dir):
    d = conformance_dir / "mlp"
    lib = gexec.runtime.load_module(d / "model.so")
    assert json.loads(lib["get_graph_json"]()) == json.loads((d / "graph.json").read_text())
    embedded = lib["get_graph_params"]()
    on_disk = gexec.runtime.load_param_dict((d / "params.bin").read_bytes())
    assert sorted(embedded) == sorted(on_disk)
    for k in on_disk:
        assert _same_bits(embedded[k].numpy(), on_disk[k].numpy())
    # a module made from the embedded graph and lib.so, with the embedded parameters
    m = graph_executor.create(lib["get_graph_json"](), gexec.runtime.load_module(d / "lib.so"), [gexec.cpu(0)])
    m.load_params(gexec.runtime.save_param_dict(embedded))
    inputs = gexec.runtime.load_param_dict_from_file(d / "inputs.bin")
    m.run(data=inputs["data"])
    want = gexec.runtime.load_param_dict_from_file(d / "outputs.bin")["0"].numpy()
    assert _same_bits(m.get_output(0).numpy(), want)


@pytest.mark.parametrize("planner,policy", [("liveness", "sequential"), ("as_compiled", "parallel"), ("liveness", "parallel")])
def test_planners_and_policies_by_name(conformance_dir, manifest, planner, policy):
    for name in _models(manifest):
        d = conformance_dir / name
        inputs = gexec.runtime.load_param_dict_from_file(d / "inputs.bin")
        outputs = gexec.runtime.load_param_dict_from_file(d / "outputs.bin")
        m = gexec.Model.load(d / "model.so", num_threads=2, planner=planner, policy=policy).instantiate()
        m.run(**inputs)
        for k in range(m.get_num_outputs()):
            assert _same_bits(m.get_output(k).numpy(), outputs[str(k)].numpy()), (name, k)
