"""Where the tests find their artifacts:
GEXEC_CONFORMANCE_DIR  the TVM-compiled models (tests/conformance/make_models.sh, made by
                       the g++ build's ctest into <build>/conformance)
GEXEC_TEST_KERNELS     tests/kernels' libgexec_test_kernels.so (the g++ build's tests/kernels)
GEXEC_RELAX_DIR        the Relax models today's TVM built (tests/relax/make_models.sh, made by the
                       g++ build's ctest into <build>/relax)
Tests that need one of them are skipped, saying why, when it is not there; with
GEXEC_TESTS_REQUIRE_ARTIFACTS=1 (the test command sets it) they fail instead."""

import json
import os
import pathlib

import pytest


def _missing(why):
    if os.environ.get("GEXEC_TESTS_REQUIRE_ARTIFACTS") == "1":
        pytest.fail(why + " (GEXEC_TESTS_REQUIRE_ARTIFACTS=1)", pytrace=False)
    pytest.skip(why)


def _env_path(name):
    v = os.environ.get(name)
    return pathlib.Path(v) if v else None


@pytest.fixture(scope="session")
def conformance_dir():
    d = _env_path("GEXEC_CONFORMANCE_DIR")
    if d is None:
        _missing("GEXEC_CONFORMANCE_DIR is not set (the TVM-compiled models of <build>/conformance)")
    if not (d / "manifest.json").is_file():
        _missing("no conformance models in %s (manifest.json missing)" % d)
    return d


@pytest.fixture(scope="session")
def manifest(conformance_dir):
    return json.loads((conformance_dir / "manifest.json").read_text())


@pytest.fixture(scope="session")
def relax_dir():
    d = _env_path("GEXEC_RELAX_DIR")
    if d is None:
        _missing("GEXEC_RELAX_DIR is not set (the Relax models of <build>/relax)")
    if (d / "SKIPPED").is_file():
        pytest.skip("the Relax models were not built: " + (d / "SKIPPED").read_text().strip())
    if not (d / "manifest.json").is_file():
        _missing("no Relax models in %s (manifest.json missing)" % d)
    return d


@pytest.fixture(scope="session")
def kernels_lib():
    p = _env_path("GEXEC_TEST_KERNELS")
    if p is None:
        _missing("GEXEC_TEST_KERNELS is not set (libgexec_test_kernels.so of the g++ build)")
    if not p.is_file():
        _missing("%s does not exist" % p)
    return p


def graph_json(ops, inputs, shape=(2, 3), dtype="float32", params=()):
    """A TVM graph: `inputs` (names of arg nodes, params among them) then `ops`, each
    (name, func_name, [input names]) with one output of `shape`/`dtype`; the last op is
    the output."""
    nodes, index = [], {}
    for name in inputs:
        index[name] = len(nodes)
        nodes.append({"op": "null", "name": name, "inputs": []})
    for name, func, args in ops:
        index[name] = len(nodes)
        nodes.append({"op": "tvm_op", "name": name, "inputs": [[index[a], 0, 0] for a in args],
                      "attrs": {"func_name": func, "num_inputs": str(len(args)), "num_outputs": "1",
                                "flatten_data": "0"}})
    n = len(nodes)
    return json.dumps({
        "nodes": nodes,
        "arg_nodes": list(range(len(inputs))),
        "heads": [[n - 1, 0, 0]],
        "node_row_ptr": list(range(n + 1)),
        "attrs": {"shape": ["list_shape", [list(shape)] * n], "dltype": ["list_str", [dtype] * n],
                  "storage_id": ["list_int", list(range(n))]},
    })


# The target the relay-era TVM compiles the ported TVM tests' models for (plain "llvm"
# needs a stock LLVM; some TVM wheels ship one whose default triple is another machine's).
TVM_TARGET = "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=x86-64"


def tvm_build(tmp_path_factory, script, name):
    """The folder where ``script`` (run by GEXEC_TVM_PYTHON, the conformance venv's python
    with relay-era TVM, as ``python -c script OUT TARGET``) wrote what a ported TVM test
    builds. Without that python the test is SKIPPED, saying why (failed under
    GEXEC_TESTS_REQUIRE_ARTIFACTS=1)."""
    import subprocess
    tvm_python = os.environ.get("GEXEC_TVM_PYTHON")
    if not tvm_python or not os.path.exists(tvm_python):
        _missing("GEXEC_TVM_PYTHON is not set or absent (the conformance venv's python, with relay-era TVM): "
                 "the models of TVM's tests are compiled by it")
    if os.uname().machine != "x86_64":
        pytest.skip("the models are compiled for x86-64")
    out = tmp_path_factory.mktemp(name)
    r = subprocess.run([tvm_python, "-c", script, str(out), TVM_TARGET], capture_output=True, text=True)
    assert r.returncode == 0, "compiling with TVM failed:\n" + r.stderr[-4000:]
    return out
