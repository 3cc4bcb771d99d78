"""python -m gexec: the gexec-run command line shipped in the wheel."""

import os
import subprocess
import sys

import numpy as np
import pytest

import gexec


def _exe():
    exe = os.path.join(os.path.dirname(gexec.__file__), "bin", "gexec-run")
    if not os.path.exists(exe):
        pytest.skip("this build of the package has no gexec-run (built without CLI11)")
    return exe


def run(*args):
    return subprocess.run([sys.executable, "-m", "gexec", *map(str, args)], capture_output=True, text=True)


def test_help():
    _exe()
    r = run("--help")
    assert r.returncode == 0 and "--benchmark" in r.stdout and "python -m gexec" in r.stdout


def test_runs_a_model_and_compares(conformance_dir, tmp_path):
    _exe()
    d = conformance_dir / "mlp"
    inputs = gexec.runtime.load_param_dict_from_file(d / "inputs.bin")
    want = gexec.runtime.load_param_dict_from_file(d / "outputs.bin")["0"].numpy()
    np.save(tmp_path / "x.npy", inputs["data"].numpy())
    np.save(tmp_path / "want.npy", want)
    r = run(d / "model.so", "-i", "data=@%s" % (tmp_path / "x.npy"), "--output-dir", tmp_path / "out",
            "--expected", "0=@%s" % (tmp_path / "want.npy"), "--atol", "0")
    assert r.returncode == 0, r.stderr
    assert np.load(tmp_path / "out" / "output_0.npy").tobytes() == want.tobytes()
    np.save(tmp_path / "wrong.npy", want + 1)
    r = run(d / "model.so", "-i", "data=@%s" % (tmp_path / "x.npy"), "--expected", "0=@%s" % (tmp_path / "wrong.npy"))
    assert r.returncode == 2
    r = run(tmp_path / "missing.so")
    assert r.returncode == 1 and r.stderr


def test_bfloat16_input_from_uint16_npy(kernels_lib, tmp_path):
    # TVM 0.19's users hold bfloat16 as uint16 bits: such a .npy feeds a bfloat16 input bit
    # for bit (a graph whose output is its input, so the bits come back out).
    _exe()
    import json
    g = {"nodes": [{"op": "null", "name": "x", "inputs": []}], "arg_nodes": [0], "heads": [[0, 0, 0]],
         "node_row_ptr": [0, 1], "attrs": {"shape": ["list_shape", [[4]]], "dltype": ["list_str", ["bfloat16"]],
                                           "storage_id": ["list_int", [0]]}}
    (tmp_path / "g.json").write_text(json.dumps(g))
    bits = np.array([0x3F80, 0xC000, 0x7FC0, 0x0001], np.uint16)
    np.save(tmp_path / "x.npy", bits)
    r = run("-g", tmp_path / "g.json", "-l", kernels_lib, "-i", "x=@%s" % (tmp_path / "x.npy"),
            "--output-dir", tmp_path / "out", "--expected", "0=@%s" % (tmp_path / "x.npy"), "--atol", "0")
    assert r.returncode == 0, r.stdout + r.stderr
    out = np.load(tmp_path / "out" / "output_0.npy")
    assert out.view(np.uint16).tobytes() == bits.tobytes()
    np.save(tmp_path / "wide.npy", bits.astype(np.uint32))
    r = run("-g", tmp_path / "g.json", "-l", kernels_lib, "-i", "x=@%s" % (tmp_path / "wide.npy"))
    assert r.returncode == 1 and "dtype" in r.stderr


def test_npz_inputs_and_outputs_as_numpy_writes_and_reads_them(conformance_dir, tmp_path):
    _exe()
    d = conformance_dir / "mlp"
    inputs = {k: v.numpy() for k, v in gexec.runtime.load_param_dict_from_file(d / "inputs.bin").items()}
    want = gexec.runtime.load_param_dict_from_file(d / "outputs.bin")["0"].numpy()
    np.savez(tmp_path / "inputs.npz", **inputs)  # numpy's own archive (Zip64 local headers)
    r = run(d / "model.so", "-i", "@%s" % (tmp_path / "inputs.npz"), "--output", tmp_path / "out.npz")
    assert r.returncode == 0, r.stderr
    with np.load(tmp_path / "out.npz") as out:  # zipfile checks the CRC-32s
        assert len(out.files) == 1
        assert out[out.files[0]].tobytes() == want.tobytes()
    np.savez_compressed(tmp_path / "packed.npz", **inputs)
    r = run(d / "model.so", "-i", "@%s" % (tmp_path / "packed.npz"))
    assert r.returncode == 1 and "compressed" in r.stderr
    for name, value in inputs.items():
        value.tofile(tmp_path / (name + ".bin"))
    r = run(d / "model.so", *sum((["-i", "%s=@%s" % (n, tmp_path / (n + ".bin"))] for n in inputs), []), "--output", tmp_path / "raw.npz")
    assert r.returncode == 0, r.stderr
    with np.load(tmp_path / "raw.npz") as out:
        assert out[out.files[0]].tobytes() == want.tobytes()


def test_bundle_from_tvms_outputs_verifies(conformance_dir, tmp_path):
    # TVM's own outputs (outputs.bin, written by TVM when the model was built) as the
    # bundle's expected outputs; --verify runs the copied model on the bundled inputs.
    _exe()
    d = conformance_dir / "resnet"
    inputs = {k: v.numpy() for k, v in gexec.runtime.load_param_dict_from_file(d / "inputs.bin").items()}
    want = gexec.runtime.load_param_dict_from_file(d / "outputs.bin")["0"].numpy()
    np.savez(tmp_path / "inputs.npz", **inputs)
    np.savez(tmp_path / "tvm.npz", **{"0": want})
    bundle = tmp_path / "bundle"
    r = run(d / "model.so", "-i", "@%s" % (tmp_path / "inputs.npz"), "--atol", "1e-5", "--rtol", "1e-5",
            "--make-bundle", bundle, "--bundle-expected", tmp_path / "tvm.npz")
    assert r.returncode == 0, r.stderr
    r = run("--verify", bundle)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "VERIFIED" in r.stdout and "MATCH output 0" in r.stdout
    with np.load(bundle / "expected.npz") as e:
        assert e[e.files[0]].tobytes() == want.tobytes()
    np.savez(bundle / "expected.npz", **{e_name: want + 0.5 for e_name in ["0"]})
    r = run("--verify", bundle)  # the file changed since the bundle was made: its checksum says so first
    assert r.returncode == 2 and "MISMATCH file expected.npz" in r.stdout, r.stdout
