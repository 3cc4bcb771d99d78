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
