"""The TVM-named API, function by function and argument by argument, over graphs of
tests/kernels' sample kernels, against values computed here with numpy."""

import gc
import os

import numpy as np
import pytest

import gexec
from gexec.contrib import graph_executor
from conftest import graph_json

X = np.arange(6, dtype=np.float32).reshape(2, 3)


@pytest.fixture
def lib(kernels_lib):
    return gexec.runtime.load_module(str(kernels_lib))


@pytest.fixture
def add_one(lib):
    return graph_executor.create(graph_json([("inc", "test_add_one", ["x"])], ["x"]), lib, gexec.cpu(0))


@pytest.fixture
def add_param(lib):
    """out = x + w, w a parameter."""
    return graph_executor.create(graph_json([("sum", "test_add", ["x", "w"])], ["x", "w"]), lib, gexec.cpu(0))


def params_w(value):
    return gexec.runtime.save_param_dict({"w": np.full((2, 3), value, np.float32)})


# ---- devices -------------------------------------------------------------------------

def test_devices():
    assert gexec.cpu() == gexec.cpu(0) == gexec.device("cpu", 0) == gexec.device("llvm") == gexec.device(1)
    assert gexec.cuda(1) == gexec.device("cuda", 1) == gexec.device("cuda:1") == gexec.device("gpu", 1)
    assert (gexec.cpu(0).device_type, gexec.cpu(0).device_id) == (1, 0)
    assert repr(gexec.cuda(2)) == "cuda(2)" and repr(gexec.cpu()) == "cpu(0)"
    assert gexec.cpu(0) != gexec.cpu(1) and len({gexec.cpu(0), gexec.cpu(0)}) == 1
    with pytest.raises(ValueError):
        gexec.device("tpu")
    with pytest.raises(TypeError):
        gexec.device(1.5)


def test_version():
    assert isinstance(gexec.__version__, str) and gexec.__version__.count(".") == 2
    assert gexec.__version__ == gexec._gexec.version


# ---- nd ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "int16", "int32", "int64",
                                   "uint8", "uint16", "uint32", "uint64", "bool"])
def test_nd_array_round_trip(dtype):
    a = (np.arange(24).reshape(2, 3, 4) % 7).astype(dtype)
    x = gexec.nd.array(a)
    assert x.shape == (2, 3, 4) and x.dtype == dtype and x.device == gexec.cpu(0)
    assert x.numpy().dtype == a.dtype and np.array_equal(x.numpy(), a)
    assert not np.shares_memory(x.numpy(), a)
    assert np.array_equal(np.from_dlpack(x), a)
    assert np.array_equal(x.numpy_view(), a)


def test_nd_array_inputs():
    assert np.array_equal(gexec.nd.array([[1, 2], [3, 4]]).numpy(), np.array([[1, 2], [3, 4]]))
    t = np.arange(12, dtype=np.float32).reshape(3, 4).T  # strided: copied compact
    assert np.array_equal(gexec.nd.array(t).numpy(), t)
    x = gexec.nd.array(X)
    y = gexec.nd.array(x)
    assert np.array_equal(y.numpy(), X) and y._data_ptr != x._data_ptr
    assert gexec.nd.array(X)._data_ptr % 64 == 0
    assert gexec.nd.array(np.zeros((0, 3), np.float32)).shape == (0, 3)  # numpy gives no element strides (0, 0)
    with pytest.raises(gexec.UnsupportedError, match="vulkan"):  # CUDA's arrays: test_cuda.py
        gexec.nd.array(X, gexec.device("vulkan", 0))
    with pytest.raises(TypeError):
        gexec.nd.array(X, "cpu")
    with pytest.raises(ValueError):
        gexec.nd.array(X, mem_scope="global.texture")


def test_nd_empty():
    e = gexec.nd.empty((2, 3))
    assert e.dtype == "float32" and e.shape == (2, 3) and not e.numpy().any()
    assert gexec.nd.empty(4, "int8").shape == (4,)
    assert gexec.nd.empty((2,), np.int64).dtype == "int64"
    assert gexec.nd.empty((0, 3)).numpy().shape == (0, 3)
    assert gexec.nd.empty((), "float64").shape == ()
    with pytest.raises(gexec.InvalidArgumentError) as e:
        gexec.nd.empty((2,), "complex64")
    assert e.value.code == "invalid_dtype"
    with pytest.raises(gexec.Error):
        gexec.nd.empty((-1, 2))
    with pytest.raises(gexec.UnsupportedError, match="vulkan"):
        gexec.nd.empty((2,), device=gexec.device("vulkan", 0))


def test_bfloat16_as_uint16_bits():
    e = gexec.nd.empty((3,), "bfloat16")
    assert e.dtype == "bfloat16" and e.numpy().dtype == np.uint16
    bits = np.array([0x3F80, 0xC000, 0x7FC0], np.uint16)  # 1.0, -2.0, NaN
    e.copyfrom(bits)
    assert np.array_equal(e.numpy(), bits)
    f8 = gexec.nd.empty((2,), "e4m3_float8")
    assert f8.dtype == "e4m3_float8" and f8.numpy().dtype == np.uint8
    assert gexec.nd.empty((2,), "int4").numpy().dtype == np.int8
    assert gexec.nd.empty((2,), "bool").numpy().dtype == np.bool_


def test_copyfrom_copyto():
    x = gexec.nd.empty((2, 3))
    assert x.copyfrom(X) is x and np.array_equal(x.numpy(), X)
    x.copyfrom(X.astype(np.float64) + 1)  # converted, as TVM's copyfrom does
    assert np.array_equal(x.numpy(), X + 1)
    x.copyfrom(X.tolist())
    assert np.array_equal(x.numpy(), X)
    y = gexec.nd.empty((2, 3))
    assert x.copyto(y) is y and np.array_equal(y.numpy(), X)
    z = x.copyto(gexec.cpu(0))
    assert np.array_equal(z.numpy(), X) and z._data_ptr != x._data_ptr
    y[:] = X * 2
    assert np.array_equal(y.numpy(), X * 2)
    with pytest.raises(ValueError):
        x.copyfrom(np.zeros((3, 2), np.float32))
    with pytest.raises(gexec.InvalidArgumentError):
        x.copyfrom(gexec.nd.empty((3, 2)))
    with pytest.raises(gexec.InvalidArgumentError):
        x.copyfrom(gexec.nd.empty((2, 3), "int32"))
    with pytest.raises(TypeError):
        x.copyto("cpu")
    with pytest.raises(TypeError):
        x.copyfrom(object())
    with pytest.raises(ValueError):
        y[0] = 1


def test_dlpack_device_and_capsule():
    x = gexec.nd.array(X)
    assert x.__dlpack_device__() == (1, 0)
    v = np.from_dlpack(x)
    assert v.__array_interface__["data"][0] == x._data_ptr  # shares memory
    w = x.numpy_view()
    w[0, 0] = 42
    assert x.numpy()[0, 0] == 42 and v[0, 0] == 42
    del x
    gc.collect()
    assert v[0, 0] == 42 and w[0, 0] == 42  # the capsule and the view kept the memory alive
    # a DLPack producer other than numpy (gexec's own NDArray) feeds nd.array
    assert np.array_equal(gexec.nd.array(gexec.nd.array(X)).numpy(), X)


def test_repr():
    assert "shape=(2, 3), cpu(0)" in repr(gexec.nd.array(X))


# ---- parameters ----------------------------------------------------------------------

def test_param_dict_bytes_and_files(tmp_path):
    params = {"a": np.arange(4, dtype=np.float32), "b": np.array([[1, 2]], np.int64), "c": gexec.nd.array(X)}
    blob = gexec.runtime.save_param_dict(params)
    assert isinstance(blob, bytearray) and blob[:8] == (0xF7E58D4F05049CB7).to_bytes(8, "little")
    back = gexec.runtime.load_param_dict(blob)
    assert list(back) == ["a", "b", "c"]
    for k in params:
        assert np.array_equal(back[k].numpy(), np.asarray(params[k].numpy() if k == "c" else params[k]))
    assert gexec.runtime.load_param_dict(bytes(blob)).keys() == back.keys()
    path = tmp_path / "p.params"
    gexec.runtime.save_param_dict_to_file(params, path)
    assert path.read_bytes() == bytes(blob)
    for mmap in (False, True):
        f = gexec.runtime.load_param_dict_from_file(str(path), mmap=mmap)
        assert np.array_equal(f["b"].numpy(), params["b"])
    with pytest.raises(gexec.Error) as e:
        gexec.runtime.load_param_dict(blob[:-3])
    assert e.value.code == "invalid_params"
    with pytest.raises(TypeError):
        gexec.runtime.load_param_dict("not bytes")
    with pytest.raises(TypeError):
        gexec.runtime.save_param_dict([("a", X)])
    with pytest.raises(FileNotFoundError):
        gexec.runtime.load_param_dict_from_file(tmp_path / "missing.params")


# ---- modules -------------------------------------------------------------------------

def test_load_module(lib, kernels_lib, tmp_path):
    assert isinstance(lib, gexec.runtime.Module) and os.path.samefile(lib.path, kernels_lib)
    assert lib.implements_function("test_add_one") and not lib.implements_function("nope")
    with pytest.raises(AttributeError):
        lib["default"]  # a kernel library has no embedded graph
    with pytest.raises(gexec.Error) as e:
        lib._lib.factory_create([(1, 0)], False)
    assert e.value.code == "invalid_module"
    with pytest.raises(AttributeError):
        lib.get_function("no_such_function")
    with pytest.raises(ValueError):
        gexec.runtime.load_module(tmp_path / "missing.so")
    bad = tmp_path / "bad.so"
    bad.write_bytes(b"not an ELF file")
    with pytest.raises(gexec.Error) as e:
        gexec.runtime.load_module(bad)
    assert e.value.code in ("io", "invalid_module")
    with pytest.raises(ValueError):
        gexec.runtime.load_module(kernels_lib, fmt="zip")


def test_kernels_called_from_python(lib):
    # As TVM's PackedFunc: lib["name"](NDArrays...), the kernel writing its output in place.
    add_one = lib["test_add_one"]
    assert "test_add_one" in repr(add_one)
    x = gexec.nd.array(np.array([1.5, -2.0, 0.25, 7.0], dtype="float32"))
    y = gexec.nd.empty((4,), "float32")
    assert add_one(x, y) is None
    assert np.array_equal(y.numpy(), np.array([2.5, -1.0, 1.25, 8.0], dtype="float32"))
    a = gexec.nd.array(np.arange(4, dtype="float32"))
    out = gexec.nd.empty((4,), "float32")
    lib.get_function("test_add")(x, a, out)
    assert np.array_equal(out.numpy(), x.numpy() + a.numpy())
    # The kernel's own checks come back as errors with its message.
    with pytest.raises(gexec.Error) as e:
        add_one(x, gexec.nd.empty((5,), "float32"))
    assert e.value.code == "kernel_failed" and "test_add_one" in str(e.value)
    with pytest.raises(gexec.Error):
        add_one(x)
    # What the packed ABI cannot pass is a TypeError naming the argument.
    with pytest.raises(TypeError, match="argument 1 is a list"):
        add_one(x, [1.0, 2.0])


def test_from_dlpack_shares_memory(add_one):
    # As tvm.nd.from_dlpack: an NDArray over the producer's memory (numpy's __dlpack__ here),
    # writes through either seen by the other, the memory kept alive by the NDArray.
    # 64-byte aligned, as set_output_zero_copy requires (numpy promises 16)
    raw = np.zeros(6 + 16, dtype="float32")
    skip = (-raw.ctypes.data % 64) // 4
    src = raw[skip : skip + 6].reshape(2, 3)
    del raw
    nd = gexec.nd.from_dlpack(src)
    assert isinstance(nd, gexec.nd.NDArray) and nd.shape == (2, 3) and nd.dtype == "float32"
    src[1, 2] = 42.0
    assert nd.numpy()[1, 2] == 42.0
    # an executor's output written in place into it (set_output_zero_copy), and the producer sees it
    add_one.set_input("x", X)
    add_one.set_output_zero_copy(0, nd)
    add_one.run()
    assert np.array_equal(src, X + 1)
    del src
    import gc
    gc.collect()
    assert np.array_equal(nd.numpy(), X + 1)
    ro = np.zeros(3, dtype="float32")
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        gexec.nd.from_dlpack(ro)


def test_time_evaluator(lib):
    # As TVM's Module.time_evaluator: a function timing the kernel on the arguments it is
    # given, `repeat` figures in seconds per call; the kernel really ran on them.
    x = gexec.nd.array(np.array([1.5, -2.0, 0.25, 7.0], dtype="float32"))
    y = gexec.nd.empty((4,), "float32")
    r = lib.time_evaluator("test_add_one", gexec.cpu(0), number=3, repeat=4)(x, y)
    assert isinstance(r, gexec.runtime.BenchmarkResult) and len(r.results) == 4 and r.min > 0
    assert r.mean == pytest.approx(sum(r.results) / 4) and r.min <= r.median <= r.max
    assert np.array_equal(y.numpy(), x.numpy() + 1)
    with pytest.raises(AttributeError):
        lib.time_evaluator("no_such_kernel", gexec.cpu(0))
    # TVM pauses after measurement i when i % repeats_to_cooldown == 0, the last included:
    # 3 measurements with a 100 ms cooldown after each take >= 0.3 s; after every second, >= 0.2 s.
    import time
    for every, least in ((1, 0.3), (2, 0.2)):
        t0 = time.perf_counter()
        lib.time_evaluator("test_add_one", gexec.cpu(0), number=1, repeat=3, cooldown_interval_ms=100,
                           repeats_to_cooldown=every)(x, y)
        assert least <= time.perf_counter() - t0 < least + 0.1 + 0.5  # (0.5: a loaded machine's slack)
    # Calling the module calls its entry function, the kernel "__tvm_main__" names (test_add).
    a = gexec.nd.array(np.arange(4, dtype="float32"))
    out = gexec.nd.empty((4,), "float32")
    lib(x, a, out)
    assert np.array_equal(out.numpy(), x.numpy() + a.numpy())


_ADD_ONE_C = r"""
#include <stdint.h>
typedef struct { int32_t device_type, device_id; } Dev;
typedef struct { uint8_t code, bits; uint16_t lanes; } DType;
typedef struct { void* data; Dev device; int32_t ndim; DType dtype; int64_t* shape; int64_t* strides; uint64_t byte_offset; } Tensor;
typedef union { int64_t v_int64; double v_float64; void* v_handle; const char* v_str; } Value;
/* y = x + 1 over float32 vectors, in TVM's packed C ABI */
__attribute__((visibility("default"))) int tar_add_one(Value* args, int* codes, int n, Value* ret, int* ret_code, void* h) {
  (void)ret; (void)ret_code; (void)h;
  if (n != 2 || codes[0] != 7 || codes[1] != 7) return -1;
  const Tensor* x = (const Tensor*)args[0].v_handle;
  Tensor* y = (Tensor*)args[1].v_handle;
  for (int64_t i = 0; i < x->shape[0]; ++i) ((float*)y->data)[i] = ((const float*)x->data)[i] + 1.0f;
  return 0;
}
"""


def test_load_module_links_objects_and_tars(tmp_path):
    # As TVM's load_module: a .o, or a .tar of them (export_library("x.tar")), is linked
    # into <path>.so with the system's compiler, then loaded.
    import shutil
    import subprocess
    import tarfile
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc or not (shutil.which("g++") or shutil.which("c++")):
        pytest.skip("no C/C++ compiler to make and link object files")
    src = tmp_path / "add_one.c"
    src.write_text(_ADD_ONE_C)
    obj = tmp_path / "add_one.o"
    subprocess.run([cc, "-c", "-fPIC", "-O1", "-o", str(obj), str(src)], check=True)
    with tarfile.open(tmp_path / "lib.tar", "w") as tar:
        tar.add(obj, arcname="add_one.o")
    x = gexec.nd.array(np.array([1.0, -2.5, 3.0], dtype="float32"))
    for path in (tmp_path / "lib.tar", obj):
        lib = gexec.runtime.load_module(path)
        assert os.path.exists(str(path) + ".so")
        y = gexec.nd.empty((3,), "float32")
        lib["tar_add_one"](x, y)
        assert np.array_equal(y.numpy(), np.array([2.0, -1.5, 4.0], dtype="float32"))
    junk = tmp_path / "junk.o"
    junk.write_bytes(b"not an object file")
    bad = tmp_path / "bad.tar"
    with tarfile.open(bad, "w") as tar:
        tar.add(junk, arcname="junk.o")
    with pytest.raises(RuntimeError, match="linking"):
        gexec.runtime.load_module(bad)


# ---- create and GraphModule -----------------------------------------------------------

def test_create_arguments(lib):
    g = graph_json([("inc", "test_add_one", ["x"])], ["x"])
    for dev in (gexec.cpu(0), [gexec.cpu(0)], (gexec.cpu(0),)):
        m = graph_executor.create(g, lib, dev)
        assert isinstance(m, graph_executor.GraphModule)
    with pytest.raises(ValueError):
        graph_executor.create(g.encode(), lib, gexec.cpu())
    with pytest.raises(TypeError):
        graph_executor.create(g, "lib.so", gexec.cpu())
    with pytest.raises(TypeError):
        graph_executor.create(g, lib, "cpu")
    with pytest.raises(ValueError):
        graph_executor.create(g, lib, [])
    with pytest.raises(gexec.Error) as e:
        graph_executor.create("{not json", lib, gexec.cpu())
    assert e.value.code == "invalid_json"
    with pytest.raises(gexec.Error) as e:
        graph_executor.create('{"nodes": []}', lib, gexec.cpu())
    assert e.value.code == "invalid_graph" and isinstance(e.value, RuntimeError)
    with pytest.raises(gexec.NotFoundError) as e:
        graph_executor.create(graph_json([("inc", "no_such_kernel", ["x"])], ["x"]), lib, gexec.cpu())
    assert e.value.code == "symbol_not_found" and "no_such_kernel" in str(e.value)
    with pytest.raises(gexec.Error) as e:
        graph_executor.create(g, lib, gexec.device("vulkan", 0))
    assert e.value.code == "device_mismatch" and "vulkan:0" in str(e.value)


def test_set_input_run_get_output(add_one):
    m = add_one
    assert m.get_num_inputs() == 1 and m.get_num_outputs() == 1
    assert m.get_input_index("x") == 0 and m.get_input_index("nope") == -1
    assert m.get_input_info() == ({"x": (2, 3)}, {"x": "float32"})
    assert m.get_output_info() == ({"inc:0": (2, 3)}, {"inc:0": "float32"})
    m.set_input("x", X)
    m.run()
    assert np.array_equal(m.get_output(0).numpy(), X + 1)
    m.set_input(0, gexec.nd.array(X * 2))  # by index, an NDArray
    m.run()
    assert np.array_equal(m.get_output(0).numpy(), X * 2 + 1)
    m.set_input(x=X * 3)  # **params
    m.run()
    assert np.array_equal(m.get_output(0).numpy(), X * 3 + 1)
    m.run(x=X * 4)  # run(**input_dict)
    assert np.array_equal(m.get_output(0).numpy(), X * 4 + 1)
    m.set_input(x=X, not_an_input=X)  # names that are not inputs are skipped, as TVM does
    m.set_input("x", X.tolist())
    m.set_input("x", np.asfortranarray(X))  # strided numpy is made compact
    m.set_input(np.int64(0), X)
    m.run()
    assert np.array_equal(m.get_output(0).numpy(), X + 1)
    assert np.array_equal(m.get_input(0).numpy(), X) and np.array_equal(m.get_input("x").numpy(), X)
    out = gexec.nd.empty((2, 3))
    assert m.get_input("x", out) is out and np.array_equal(out.numpy(), X)
    assert m.get_output(0, out) is out and np.array_equal(out.numpy(), X + 1)
    host = np.zeros((2, 3), np.float32)
    assert m.get_output(0, host) is host and np.array_equal(host, X + 1)  # numpy out, written in place


def test_set_input_errors(add_one):
    m = add_one
    with pytest.raises(KeyError) as e:
        m.set_input("nope", X)
    assert isinstance(e.value, gexec.Error) and e.value.code == "not_found" and "nope" in str(e.value)
    with pytest.raises(IndexError):
        m.set_input(1, X)
    with pytest.raises(IndexError):
        m.set_input(-1, X)
    with pytest.raises(ValueError) as e:
        m.set_input("x", np.zeros((3, 2), np.float32))
    assert e.value.code == "shape_mismatch"
    with pytest.raises(ValueError) as e:  # numpy arrays of another dtype are converted (test_tvm_compat), NDArrays not
        m.set_input("x", gexec.nd.array(X.astype(np.float64)))
    assert e.value.code == "dtype_mismatch" and "convert it to float32" in str(e.value)
    with pytest.raises(TypeError):
        m.set_input("x", "a string")
    with pytest.raises(TypeError):
        m.set_input(1.5, X)
    with pytest.raises(TypeError):
        m.set_input("x")
    with pytest.raises(IndexError):
        m.get_output(1)
    with pytest.raises(IndexError):
        m.get_input(3)
    with pytest.raises(KeyError):
        m.get_input("nope")
    with pytest.raises(ValueError):
        m.get_output(0, gexec.nd.empty((4,)))
    # nothing was lost: the module still runs
    m.set_input("x", X)
    m.run()
    assert np.array_equal(m.get_output(0).numpy(), X + 1)


def test_unset_input_is_an_error(lib):
    # create() runs unset inputs as zeros by default, as TVM runs them (test_tvm_compat)
    m = graph_executor.create(graph_json([("inc", "test_add_one", ["x"])], ["x"]), lib, gexec.cpu(0),
                              zero_unset_inputs=False)
    with pytest.raises(gexec.Error) as e:
        m.run()
    assert "x" in str(e.value) and "zero_unset_inputs=True" in str(e.value)


def test_kernel_failure(lib):
    m = graph_executor.create(graph_json([("boom", "test_fail", ["x"])], ["x"]), lib, gexec.cpu())
    m.set_input("x", X)
    with pytest.raises(gexec.Error) as e:
        m.run()
    assert e.value.code == "kernel_failed" and "deliberate failure" in str(e.value) and "boom" in str(e.value)
    assert type(e.value) is gexec.Error and isinstance(e.value, RuntimeError)


def test_zero_copy(add_one):
    m = add_one
    x = gexec.nd.array(X)
    m.set_input_zero_copy("x", x)
    out = gexec.nd.empty((2, 3))
    m.set_output_zero_copy(0, out)
    m.run()
    assert np.array_equal(out.numpy(), X + 1)
    x.copyfrom(X * 10)  # read in place
    m.run()
    assert np.array_equal(out.numpy(), X * 10 + 1)
    # numpy arrays, zero-copy both ways (aligned ones; numpy's own allocations may not be)
    m.set_input_zero_copy(x=x)
    host_out = gexec.nd.empty((2, 3)).numpy_view()
    m.set_output_zero_copy("inc:0", host_out)
    m.run()
    assert np.array_equal(host_out, X * 10 + 1)
    with pytest.raises(ValueError):
        m.set_input_zero_copy("x", gexec.nd.empty((3, 3)))
    with pytest.raises(KeyError):
        m.set_input_zero_copy("nope", x)
    with pytest.raises(IndexError):
        m.set_output_zero_copy(1, out)
    with pytest.raises(KeyError):
        m.set_output_zero_copy("nope", out)
    with pytest.raises(ValueError):
        m.set_output_zero_copy(0, gexec.nd.empty((2, 3), "int32"))
    with pytest.raises(ValueError) as e:
        m.set_input_zero_copy("x", np.from_dlpack(gexec.nd.empty((7,)))[1:7].reshape(2, 3))
    assert e.value.code == "misaligned"


def test_load_params_and_share_params(lib, add_param):
    m = add_param
    assert m.get_input_info()[0] == {"x": (2, 3), "w": (2, 3)}
    m.load_params(params_w(5))
    assert m.get_input_info()[0] == {"x": (2, 3)}  # parameters are not inputs to feed
    m.set_input("x", X)
    m.run()
    assert np.array_equal(m.get_output(0).numpy(), X + 5)
    m.load_params(bytes(params_w(7)))
    m.run()
    assert np.array_equal(m.get_output(0).numpy(), X + 7)
    # a failed load leaves the old parameters
    bad = gexec.runtime.save_param_dict({"w": np.zeros((3, 3), np.float32)})
    with pytest.raises(ValueError):
        m.load_params(bad)
    with pytest.raises(gexec.Error):
        m.load_params(b"garbage")
    with pytest.raises(TypeError):
        m.load_params("a str")
    m.run()
    assert np.array_equal(m.get_output(0).numpy(), X + 7)
    # names that are not inputs are ignored, as TVM does
    m.load_params(gexec.runtime.save_param_dict({"w": np.ones((2, 3), np.float32), "other": X}))
    m.run()
    assert np.array_equal(m.get_output(0).numpy(), X + 1)

    other = graph_executor.create(graph_json([("sum", "test_add", ["x", "w"])], ["x", "w"]), lib, gexec.cpu())
    other.share_params(m, params_w(0))
    other.run(x=X)
    assert np.array_equal(other.get_output(0).numpy(), X + 1)
    del m
    gc.collect()
    other.run(x=X)  # shared parameters outlive the module they came from
    assert np.array_equal(other.get_output(0).numpy(), X + 1)
    with pytest.raises(TypeError):
        other.share_params("m", params_w(0))


def test_debug_get_output(lib):
    g = graph_json([("a", "test_add_one", ["x"]), ("b", "test_add_one", ["a"])], ["x"])
    m = graph_executor.create(g, lib, gexec.cpu())
    m.set_input("x", X)
    assert np.array_equal(m.debug_get_output("a").numpy(), X + 1)
    assert np.array_equal(m.debug_get_output(1).numpy(), X + 1)  # node index
    out = gexec.nd.empty((2, 3))
    assert m.debug_get_output("b", out) is out and np.array_equal(out.numpy(), X + 2)
    with pytest.raises(KeyError):
        m.debug_get_output("nope")
    with pytest.raises(IndexError):
        m.debug_get_output(7)


def test_getitem_and_executor_module(lib):
    m = graph_executor.create(graph_json([("inc", "test_add_one", ["x"])], ["x"]), lib, gexec.cpu())
    m["set_input"]("x", X)
    m["run"]()
    assert np.array_equal(m["get_output"](0).numpy(), X + 1)
    assert m["get_num_outputs"]() == 1
    assert m.module.implements_function("run")
    with pytest.raises(AttributeError):
        m["no_such_function"]
    again = graph_executor.GraphModule(m.module)
    assert np.array_equal(again.get_output(0).numpy(), X + 1)
    with pytest.raises(TypeError):
        graph_executor.GraphModule(lib)


def test_benchmark(add_one):
    m = add_one
    m.set_input("x", X)
    r = m.benchmark(gexec.cpu(0))
    assert len(r.results) == 5 and r.min <= r.median <= r.max and r.min <= r.mean <= r.max and r.std >= 0
    assert str(r).startswith("Execution time summary:\n") and "mean (ms)" in str(r) and "std (ms)" in str(r)
    r = m.benchmark(gexec.cpu(0), repeat=3, number=2, min_repeat_ms=5, limit_zero_time_iterations=10,
                    cooldown_interval_ms=1, repeats_to_cooldown=2)
    assert len(r.results) == 3 and r.min > 0
    assert r.min * 1000 * 2 <= 5 * 100  # sanity: seconds per call
    r = m.benchmark(gexec.cpu(0), end_to_end=True, repeat=2, x=X * 2)
    assert len(r.results) == 2 and np.array_equal(m.get_output(0).numpy(), X * 2 + 1)
    r = m.benchmark(gexec.cpu(0), repeat=2, x=X * 3)
    assert np.array_equal(m.get_output(0).numpy(), X * 3 + 1)
    r = m.benchmark(gexec.cpu(0), func_name="get_num_outputs", repeat=2)
    assert len(r.results) == 2
    with pytest.raises(TypeError):
        m.benchmark("cpu")


def test_bfloat16_input_from_uint16_bits(lib):
    g = graph_json([("n", "test_noop", ["x"])], ["x"], shape=(4,), dtype="bfloat16")
    m = graph_executor.create(g, lib, gexec.cpu())
    bits = np.array([0x3F80, 0x4000, 0xBF80, 0x7F80], np.uint16)
    assert m.get_input_info()[1] == {"x": "bfloat16"}
    m.set_input("x", bits)
    got = m.get_input(0)
    assert got.dtype == "bfloat16" and got.numpy().dtype == np.uint16 and np.array_equal(got.numpy(), bits)
    m.run()
    assert m.get_output(0).numpy().dtype == np.uint16
    with pytest.raises(ValueError):
        m.set_input("x", bits.astype(np.int32))


def test_model_load_and_instantiate(kernels_lib, tmp_path):
    # Model.load takes files: write a graph and parameters beside the kernel library
    (tmp_path / "graph.json").write_text(graph_json([("sum", "test_add", ["x", "w"])], ["x", "w"]))
    (tmp_path / "params.bin").write_bytes(bytes(params_w(3)))
    files = (tmp_path / "graph.json", kernels_lib, tmp_path / "params.bin")
    model = gexec.Model.load(files)
    assert model.param_bytes == 24 and model.policy == "sequential"
    a, b = model.instantiate(), model.instantiate()
    a.run(x=X)
    b.run(x=X * 2)
    assert np.array_equal(a.get_output(0).numpy(), X + 3) and np.array_equal(b.get_output(0).numpy(), X * 2 + 3)
    m2 = gexec.Model.load([str(f) for f in files], num_threads=1, planner="liveness", policy="parallel")
    assert m2.policy == "parallel"
    c = m2.instantiate()
    c.run(x=X)
    assert np.array_equal(c.get_output(0).numpy(), X + 3)
    with pytest.raises(ValueError) as e:
        gexec.Model.load(files, planner="best")
    assert "as_compiled" in str(e.value) and "liveness" in str(e.value)
    with pytest.raises(ValueError) as e:
        gexec.Model.load(files, policy="fastest")
    assert "sequential" in str(e.value)
    with pytest.raises(ValueError):
        gexec.Model.load(files, num_threads=0)
    with pytest.raises(TypeError):
        gexec.Model.load(files, num_threads="2")
    with pytest.raises(TypeError):
        gexec.Model.load((files[0], files[1]))
    with pytest.raises(gexec.Error) as e:
        gexec.Model.load(kernels_lib)  # a kernel library holds no graph
    assert e.value.code == "invalid_module"
    with pytest.raises(FileNotFoundError):
        gexec.Model.load((tmp_path / "missing.json", kernels_lib, tmp_path / "params.bin"))



def test_model_donate_inputs(kernels_lib, tmp_path):
    # donate_inputs=True: a run uses its inputs up (their bytes are the activations'
    # afterwards); each run is given them again. Results as without donation.
    (tmp_path / "graph.json").write_text(graph_json([("sum", "test_add", ["x", "w"]), ("inc", "test_add_one", ["sum"])], ["x", "w"]))
    (tmp_path / "params.bin").write_bytes(bytes(params_w(3)))
    files = (tmp_path / "graph.json", kernels_lib, tmp_path / "params.bin")
    for planner in ("as_compiled", "liveness"):
        m = gexec.Model.load(files, planner=planner, donate_inputs=True).instantiate()
        m.run(x=X)
        assert np.array_equal(m.get_output(0).numpy(), X + 4)
        with pytest.raises(ValueError) as e:
            m.get_input("x")
        assert "used up" in str(e.value) and "donate_inputs=True of Model.load" in str(e.value) and "model_options" not in str(e.value)
        with pytest.raises(gexec.Error) as e:
            m.run()
        assert '"x"' in str(e.value) and "used up by the last run" in str(e.value) and "donate_inputs=True" in str(e.value)
        m.set_input("x", X * 2)
        assert np.array_equal(m.get_input("x").numpy(), X * 2)
        m.run()
        assert np.array_equal(m.get_output(0).numpy(), X * 2 + 4)
        # an input bound in place is read there, and never used up
        held = gexec.nd.array(X * 5)
        m.set_input_zero_copy("x", held)
        m.run()
        m.run()
        assert np.array_equal(m.get_output(0).numpy(), X * 5 + 4) and np.array_equal(held.numpy(), X * 5)
    with pytest.raises(ValueError) as e:
        gexec.Model.load(files, donate_inputs=True, zero_unset_inputs=True)
    assert "donate_inputs and zero_unset_inputs" in str(e.value)

class _DLPackOnly:
    """A producer that offers DLPack only (as PyTorch and JAX arrays do), no buffer protocol."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, stream=None, **kwargs):
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_inputs_from_any_dlpack_producer(add_one):
    m = add_one
    m.set_input("x", _DLPackOnly(X * 5))
    m.run()
    assert np.array_equal(m.get_output(0).numpy(), X * 5 + 1)
    assert np.array_equal(gexec.nd.array(_DLPackOnly(X)).numpy(), X)
    # zero-copy where alignment allows: the executor reads the producer's memory in place
    held = gexec.nd.array(X)
    m.set_input_zero_copy("x", _DLPackOnly(held))
    held.copyfrom(X * 7)
    m.run()
    assert np.array_equal(m.get_output(0).numpy(), X * 7 + 1)


def test_ml_dtypes_bfloat16_input(lib):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    g = graph_json([("n", "test_noop", ["x"])], ["x"], shape=(3,), dtype="bfloat16")
    m = graph_executor.create(g, lib, gexec.cpu())
    values = np.array([1.0, -2.0, 0.5], dtype=ml_dtypes.bfloat16)
    m.set_input("x", values)
    assert m.get_input(0).numpy().tobytes() == values.view(np.uint16).tobytes()


# ---- destinations are written in place, never a temporary copy -----------------------

def test_get_output_into_non_contiguous_numpy(add_one):
    m = add_one
    m.run(x=X)
    big = np.zeros((2, 6), np.float32)
    assert m.get_output(0, big[:, ::2]) is not None
    assert np.array_equal(big[:, ::2], X + 1) and not big[:, 1::2].any()  # the view was written, nothing else
    fortran = np.zeros((2, 3), np.float32, order="F")
    assert m.get_output(0, fortran) is fortran and np.array_equal(fortran, X + 1)
    # what cannot be written in place is refused, never written into a copy
    frozen = np.zeros((2, 6), np.float32)[:, ::2]
    frozen.flags.writeable = False
    with pytest.raises(ValueError):
        m.get_output(0, frozen)
    with pytest.raises(TypeError):
        m.get_output(0, [[0.0] * 3] * 2)
    # a mismatch is still the executor's error, and nothing is written
    wrong = np.zeros((3, 4), np.float32)[:, ::2]
    with pytest.raises(ValueError) as e:
        m.get_output(0, wrong)
    assert e.value.code == "shape_mismatch" and not wrong.any()


def test_zero_copy_refuses_non_contiguous_arrays(add_one):
    m = add_one
    # 64-byte aligned memory, strided: a compact copy would be read instead of it
    strided = gexec.nd.empty((2, 6)).numpy_view()[:, ::2]
    for value in (strided, np.asfortranarray(X)):
        with pytest.raises(gexec.InvalidArgumentError) as e:
            m.set_input_zero_copy("x", value)
        assert "C-contiguous" in str(e.value)
        with pytest.raises(gexec.InvalidArgumentError) as e:
            m.set_input_zero_copy(x=value)
        assert "C-contiguous" in str(e.value)
        with pytest.raises(gexec.InvalidArgumentError) as e:
            m.set_output_zero_copy(0, value)
        assert "C-contiguous" in str(e.value)
    with pytest.raises(TypeError):
        m.set_input_zero_copy("x", X.tolist())
    # a compact aligned array still binds in place
    held = gexec.nd.empty((2, 3)).numpy_view()
    m.set_input_zero_copy("x", held)
    held[...] = X * 3
    m.run()
    assert np.array_equal(m.get_output(0).numpy(), X * 3 + 1)


# ---- DLPack dtype codes --------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["e4m3_float8", "e5m2_float8"])
def test_float8_dlpack_export_is_uint8_bits(dtype):
    # TVM's float8 codes (6, 7) are DLPack's bool and float8_e3m4: float8 leaves as its bits
    bits = np.array([0x38, 0x40, 0x00, 0xC0], np.uint8)
    x = gexec.nd.empty((4,), dtype)
    x.copyfrom(bits)
    v = np.from_dlpack(x)
    assert v.dtype == np.uint8 and np.array_equal(v, bits)
    assert v.__array_interface__["data"][0] == x._data_ptr  # still shared, not copied
    assert x.dtype == dtype
    assert np.array_equal(gexec.nd.array(_DLPackOnly(x)).numpy(), bits)


def test_bool_dlpack_round_trip():
    b = np.array([True, False, True])
    x = gexec.nd.array(_DLPackOnly(b))  # DLPack's bool enters as bool
    assert x.dtype == "bool" and np.array_equal(x.numpy(), b)
    v = np.from_dlpack(x)  # and leaves as DLPack's bool
    assert v.dtype == np.bool_ and np.array_equal(v, b)
