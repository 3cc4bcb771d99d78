""".safetensors files written by the `safetensors` package from PyPI, read by gexec (and
gexec's read by it), beside TVM's parameter blob: gexec.runtime.load_param_dict(_from_file),
a model's load_params, and gexec-run --params / --convert-params."""

import os
import subprocess
import sys

import numpy as np
import pytest

import gexec
from gexec.contrib import graph_executor

st = pytest.importorskip("safetensors.numpy", reason="the safetensors package from PyPI is not installed (PyPI unreachable?)")


def gexec_run(*args):
    exe = os.path.join(os.path.dirname(gexec.__file__), "bin", "gexec-run")
    if not os.path.exists(exe):
        pytest.skip("this build of the package has no gexec-run (built without CLI11)")
    return subprocess.run([sys.executable, "-m", "gexec", *map(str, args)], capture_output=True, text=True)


def tensors():
    rng = np.random.default_rng(7)
    return {
        "conv.weight": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
        "bias": rng.standard_normal(4).astype(np.float16),
        "ids": np.array([[1, -2], [3, 2 ** 40]], np.int64),
        "mask": np.array([True, False, True]),
        "scale": np.array(2.5, np.float64),
        "codes": np.arange(7, dtype=np.uint8),
        "empty": np.zeros((0, 3), np.int32),
    }


@pytest.mark.parametrize("mmap", [False, True])
def test_reads_files_the_package_writes(tmp_path, mmap):
    want = tensors()
    path = tmp_path / "w.safetensors"
    st.save_file(want, str(path), metadata={"format": "np", "producer": "test"})
    got = gexec.runtime.load_param_dict_from_file(path, mmap=mmap)
    assert sorted(got) == sorted(want)
    for name, value in want.items():
        g = got[name].numpy()
        assert g.dtype == value.dtype and g.shape == value.shape, name
        assert g.tobytes() == value.tobytes(), name
    assert gexec.runtime.load_param_dict(path.read_bytes())["ids"].numpy().tolist() == want["ids"].tolist()


def test_the_package_reads_what_gexec_writes_and_conversions_are_exact(tmp_path):
    want = tensors()
    src = tmp_path / "a.safetensors"
    st.save_file(want, str(src))
    blob, back = tmp_path / "a.params", tmp_path / "b.safetensors"
    assert gexec_run("--convert-params", src, blob).returncode == 0
    assert gexec_run("--convert-params", blob, back).returncode == 0
    theirs = st.load_file(str(back))
    assert sorted(theirs) == sorted(want)
    for name, value in want.items():
        assert theirs[name].dtype == value.dtype and theirs[name].tobytes() == value.tobytes(), name
    # TVM's blob -> .safetensors -> TVM's blob: the same bytes
    again = tmp_path / "c.params"
    assert gexec_run("--convert-params", back, again).returncode == 0
    assert again.read_bytes() == blob.read_bytes()


def test_a_conformance_model_runs_on_safetensors_weights(conformance_dir, tmp_path):
    d = conformance_dir / "resnet"
    weights = tmp_path / "resnet.safetensors"
    r = gexec_run("--convert-params", d / "params.bin", weights)
    assert r.returncode == 0, r.stderr
    theirs = st.load_file(str(weights))
    ours = gexec.runtime.load_param_dict_from_file(d / "params.bin")
    assert sorted(theirs) == sorted(ours)
    assert all(theirs[k].tobytes() == ours[k].numpy().tobytes() for k in ours)
    lib = gexec.runtime.load_module(d / "lib.so")
    m = graph_executor.create((d / "graph.json").read_text(), lib, gexec.cpu(0))
    m.load_params(weights.read_bytes())
    m.run(**gexec.runtime.load_param_dict_from_file(d / "inputs.bin"))
    want = gexec.runtime.load_param_dict_from_file(d / "outputs.bin")["0"].numpy()
    np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-5, atol=1e-6)
    back = tmp_path / "resnet.params"
    # back to TVM's blob, byte for byte as TVM wrote it (unpadded: --align-params 0)
    assert gexec_run("--convert-params", weights, back, "--align-params", "0").returncode == 0
    assert back.read_bytes() == (d / "params.bin").read_bytes()
    # by default, written aligned: the same tensors, every one 64-byte aligned in the file
    aligned = tmp_path / "resnet.aligned.params"
    assert gexec_run("--convert-params", weights, aligned).returncode == 0
    again = gexec.runtime.load_param_dict_from_file(aligned)
    assert all(again[k].numpy().tobytes() == ours[k].numpy().tobytes() for k in ours)


def test_malformed_files_are_refused_with_the_offset(tmp_path):
    path = tmp_path / "bad.safetensors"
    st.save_file({"a": np.zeros(4, np.float32), "b": np.ones(2, np.float32)}, str(path))
    raw = bytearray(path.read_bytes())
    n = int.from_bytes(raw[:8], "little")
    header = raw[8:8 + n].decode()
    raw[8:8 + n] = header.replace('"F32"', '"C64"', 1).encode()
    path.write_bytes(bytes(raw))
    with pytest.raises(gexec.Error, match=r"at byte \d+: tensor \"[ab]\": dtype \"C64\" is not one gexec stores"):
        gexec.runtime.load_param_dict_from_file(path)
