"""TVM v0.19's tests/python/runtime/test_runtime_module_load.py on gexec: the relay-era TVM
of GEXEC_TVM_PYTHON builds the tests' kernels in a subprocess (tvm.build, saved as object
files and linked by tvm.contrib.cc.create_shared, as the tests do) and gexec loads and calls
them here, the tests' logic and assertions unchanged.

Not ported or SKIPPED, saying why: loading LLVM IR (load_module("test.ll"): TVM compiles it
with its LLVM JIT, a compiler, not a runtime); the "llvm -jit=mcjit" variant (the relay-era
TVM here refuses the target option "jit"); tvm.runtime.system_lib() (check_system_lib, and
test_device_module_dump's, which also needs GPU builds); the stackvm and device modules
of test_device_module_dump. Without GEXEC_TVM_PYTHON the tests are SKIPPED."""

import subprocess
import sys

import numpy as np
import pytest

import gexec
from conftest import tvm_build

_TVM_BUILD = r"""
import os, sys
import tvm
from tvm import te
from tvm.contrib import cc
out, target = sys.argv[1], sys.argv[2]
path = lambda name: os.path.join(out, name)

# test_dso_module_load: a[i + 1] = a[i] + 1 for i < n - 1, int64, saved as test.o, linked into test.so
dtype = "int64"
n = te.size_var("n")
Ab = tvm.tir.decl_buffer((n,), dtype)
i = te.var("i")
stmt = tvm.tir.For(i, 0, n - 1, tvm.tir.ForKind.SERIAL,
                   tvm.tir.BufferStore(Ab, tvm.tir.BufferLoad(Ab, [i]) + 1, [i + 1]))
mod = tvm.IRModule.from_expr(tvm.tir.PrimFunc([Ab], stmt).with_attr("global_symbol", "main"))
m = tvm.driver.build(mod, target=target)
m.save(path("test.o"))
cc.create_shared(path("test.so"), [path("test.o")])

# test_combine_module_llvm's check_llvm: myadd1 and myadd2 (B = A + 1, n = 12) in one library
nn = 12
n = tvm.runtime.convert(nn)
A = te.placeholder((n,), name="A")
B = te.compute(A.shape, lambda *i: A(*i) + 1.0, name="B")
s = te.create_schedule(B.op)
tvm.build(s, [A, B], target, name="myadd1").save(path("myadd1.o"))
tvm.build(s, [A, B], target, name="myadd2").save(path("myadd2.o"))
cc.create_shared(path("mylib.so"), [path("myadd1.o"), path("myadd2.o")])
"""

# runtime_py with gexec in place of TVM's runtime (TVM_USE_RUNTIME_LIB: its runtime alone)
runtime_py = """
import os
import sys

import gexec as tvm
import numpy as np
path_dso = sys.argv[1]
dtype = sys.argv[2]
ff = tvm.runtime.load_module(path_dso)
a = tvm.nd.array(np.zeros(10, dtype=dtype))
ff(a)
np.testing.assert_equal(a.numpy(), np.arange(a.shape[0]))
print("Finish runtime checking...")
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return tvm_build(tmp_path_factory, _TVM_BUILD, "tvm_runtime_module_load")


@pytest.mark.parametrize("target", ["llvm", "llvm -jit=mcjit"])
def test_dso_module_load(built, tmp_path, target):
    if target != "llvm":
        pytest.skip("the relay-era TVM here has no target option \"jit\" (it picks the JIT of an in-process module)")
    dtype = "int64"
    path_dso = str(built / "test.so")  # save_object([path_obj, ...]); cc.create_shared(path_dso, [path_obj])

    f1 = gexec.runtime.load_module(path_dso)
    # f2 = tvm.runtime.load_module(path_ll) is not ported: LLVM IR is compiled by TVM's JIT
    a = gexec.nd.array(np.zeros(10, dtype=dtype))
    f1(a)
    np.testing.assert_equal(a.numpy(), np.arange(a.shape[0]))

    path_runtime_py = tmp_path / "runtime.py"
    with open(path_runtime_py, "w") as fo:
        fo.write(runtime_py)

    proc = subprocess.run(
        [sys.executable, path_runtime_py, path_dso, dtype],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert proc.returncode == 0, f"{proc.args} exited with {proc.returncode}: {proc.stdout}"


def test_device_module_dump():
    pytest.skip("GPU builds (cuda, vulkan, opencl, metal), tvm.runtime.system_lib() and stackvm modules: "
                "none is here (the models are compiled for the CPU; gexec loads shared libraries)")


def test_combine_module_llvm(built):
    """Test combine multiple module into one shared lib."""
    nn = 12

    def check_llvm():
        dev = gexec.cpu(0)
        path_dso = built / "mylib.so"  # cc.create_shared(path_dso, [myadd1.o, myadd2.o])
        m = gexec.runtime.load_module(path_dso)
        fadd1 = m["myadd1"]
        fadd2 = m["myadd2"]
        a = gexec.nd.array(np.random.uniform(size=nn).astype("float32"), dev)  # A.dtype
        b = gexec.nd.array(np.zeros(nn, dtype="float32"), dev)
        fadd1(a, b)
        np.testing.assert_equal(b.numpy(), a.numpy() + 1)
        fadd2(a, b)
        np.testing.assert_equal(b.numpy(), a.numpy() + 1)

    # check_system_lib is not ported: tvm.runtime.system_lib() (see the module's docstring)
    check_llvm()
