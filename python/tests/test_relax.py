"""Relax VM executables from today's TVM (tests/relax/make_models.sh) through
gexec.relax.VirtualMachine as TVM's users call relax.VirtualMachine: every output of
every case bit-identical to TVM's VM, tuples as tuples, weights bound from a file, the
stateful calling convention, time_evaluator, and the errors."""

import json

import numpy as np
import pytest

import gexec


def _cases(relax_dir):
    return [c for c in json.loads((relax_dir / "manifest.json").read_text())["cases"] if "error" not in c]


def _flatten(value, out):
    if isinstance(value, tuple):
        for v in value:
            _flatten(v, out)
    else:
        out.append(value.numpy())
    return out


def test_every_case_bit_identical_to_tvm(relax_dir):
    cases = _cases(relax_dir)
    assert len(cases) >= 17
    for c in cases:
        params = relax_dir / c["params"] if "params" in c else None
        lib = gexec.runtime.load_module(relax_dir / c["library"])
        vm = gexec.relax.VirtualMachine(lib, gexec.cpu(), params=params)
        data = np.load(relax_dir / c["data"])
        args = [data["in%d" % i] for i in range(c["inputs"])]
        got = _flatten(vm[c["function"]](*args), [])
        assert len(got) == c["outputs"], c["name"]
        for i, g in enumerate(got):
            want = data["out%d" % i]
            assert g.dtype == want.dtype and g.shape == want.shape, c["name"]
            assert g.tobytes() == want.tobytes(), "%s output %d differs from TVM's VM" % (c["name"], i)


def test_tuples_stay_tuples_and_results_are_the_callers(relax_dir):
    vm = gexec.relax.VirtualMachine(gexec.runtime.load_module(relax_dir / "tuple_out.so"), gexec.cpu())
    data = np.load(relax_dir / "tuple_out.npz")
    first = vm["main"](data["in0"], data["in1"])
    assert isinstance(first, tuple) and isinstance(first[1], tuple)
    second = vm["main"](data["in1"], data["in0"])  # another call never overwrites the first's results
    assert np.array_equal(first[0].numpy(), data["out0"])
    assert np.array_equal(first[1][1].numpy(), data["out2"])
    assert second[0].shape == (4, 8)


def test_stateful_calls_and_time_evaluator(relax_dir):
    vm = gexec.relax.VirtualMachine(relax_dir / "mlp_constants.so", gexec.cpu())
    data = np.load(relax_dir / "mlp_constants.npz")
    vm.set_input("main", x=data["in0"])
    vm.invoke_stateful("main")
    assert np.array_equal(vm.get_outputs("main").numpy(), data["out0"])
    result = vm.time_evaluator("main", gexec.cpu(), number=5, repeat=3)(data["in0"])
    assert len(result.results) == 3 and all(t > 0 for t in result.results)
    assert vm.interpreted_because("main") == ""


def test_weights_bound_from_a_file(relax_dir):
    data = np.load(relax_dir / "nn_mlp.npz")
    for params in ("nn_mlp.params", "nn_mlp.safetensors"):
        vm = gexec.relax.VirtualMachine(relax_dir / "nn_mlp.so", gexec.cpu(), params=relax_dir / params)
        assert vm.input_names("forward") == ["x"]
        assert vm["forward"](data["in0"]).numpy().tobytes() == data["out0"].tobytes()


def test_errors(relax_dir):
    vm = gexec.relax.VirtualMachine(relax_dir / "mlp_constants.so", gexec.cpu())
    with pytest.raises(AttributeError, match="has no function 'nope'"):
        vm["nope"]
    with pytest.raises(gexec.Error, match=r"expect Tensor with shape \[4, 16\] but get \[4, 15\]"):
        vm["main"](np.zeros((4, 15), "float32"))
    with pytest.raises(gexec.Error, match="expect Tensor with dtype float32 but get float64"):
        vm["main"](np.zeros((4, 16), "float64"))
    with pytest.raises(gexec.Error, match=r"takes 1 arguments \(x\), got 2"):
        vm["main"](np.zeros((4, 16), "float32"), np.zeros((4, 16), "float32"))
    with pytest.raises(gexec.UnsupportedError, match="on the host"):
        gexec.relax.VirtualMachine(relax_dir / "mlp_constants.so", gexec.cuda(0))
    with pytest.raises(gexec.Error, match="exec_mode=\"compiled\""):
        gexec.relax.VirtualMachine(relax_dir / "compiled_mode.so", gexec.cpu())
    data = np.load(relax_dir / "mlp_constants.npz")
    assert np.array_equal(vm["main"](data["in0"]).numpy(), data["out0"])  # still usable
