"""CUDA from Python: models whose entries live on a CUDA device, NDArrays in device memory,
and DLPack across the device border.

The device tests need a CUDA driver: GEXEC_CUDA_DRIVER naming one (the test command runs
this file a second time with the host-emulated driver of tests/cuda/emulated_driver.h and
GEXEC_EMU_KERNELS naming its host kernels), or NVIDIA's libcuda.so.1 with a GPU. They use
the g++ build's CUDA test libraries (GEXEC_CUDA_TEST_DIR, <build>/tests/cuda): the host
code TVM v0.19 exports for a CUDA model, launching nvcc's kernels for y = relu(x + bias)
(bias[i] = 0.25 i, x and y float32 [64], every entry on the device), as a single file with
its graph and parameters embedded, and as a kernel library beside tests/cuda's graph and
parameter files. The expected outputs are computed here with numpy; the inputs are
multiples of 0.5 whose sums float32 holds exactly, so outputs compare bit for bit.
Without a driver, the test that says so runs instead (its message names GEXEC_CUDA_DRIVER).
"""

import ctypes
import os
import pathlib

import numpy as np
import pytest

import gexec
from gexec.contrib import graph_executor

from conftest import _env_path, _missing

SOURCE = pathlib.Path(__file__).resolve().parents[2] / "tests" / "cuda"
X = (np.arange(64, dtype=np.float32) - 32) * np.float32(0.5)
BIAS = np.float32(0.25) * np.arange(64, dtype=np.float32)


def expected(x):
    return np.maximum(x + BIAS, np.float32(0))


def _driver_present():
    if os.environ.get("GEXEC_CUDA_DRIVER"):
        return True
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def cuda_dir():
    if not _driver_present():
        pytest.skip("no CUDA driver: GEXEC_CUDA_DRIVER is not set and libcuda.so.1 does not load "
                    "(the test command runs this file again over the emulated driver)")
    d = _env_path("GEXEC_CUDA_TEST_DIR")
    if d is None:
        _missing("GEXEC_CUDA_TEST_DIR is not set (the g++ build's tests/cuda)")
    if not (d / "libgexec_cuda_host_factory.so").is_file():
        _missing("no CUDA test libraries in %s" % d)
    return d


def test_cuda_without_a_driver_is_a_clear_error():
    if _driver_present():
        pytest.skip("a CUDA driver is there (GEXEC_CUDA_DRIVER or libcuda.so.1)")
    for make in (lambda: gexec.nd.array(X, gexec.cuda(0)), lambda: gexec.nd.empty((2,), device=gexec.cuda(0))):
        with pytest.raises(gexec.Error) as e:
            make()
        assert e.value.code == "no_device" and "GEXEC_CUDA_DRIVER" in str(e.value)
    with pytest.raises(gexec.UnsupportedError, match="vulkan"):
        gexec.nd.empty((2,), device=gexec.device("vulkan", 0))


def test_single_file_model_on_cuda(cuda_dir):
    lib = gexec.runtime.load_module(str(cuda_dir / "libgexec_cuda_host_factory.so"))
    m = graph_executor.GraphModule(lib["default"](gexec.cuda(0)))
    m.set_input("x", X)
    m.run()
    out = m.get_output(0)
    assert out.device == gexec.cuda(0) and out.shape == (64,) and out.dtype == "float32"
    assert np.array_equal(out.numpy(), expected(X))
    host = np.zeros(64, np.float32)
    m.get_output(0, host)  # copied back into a numpy array
    assert np.array_equal(host, expected(X))
    with pytest.raises(gexec.InvalidArgumentError, match="cuda"):
        out.numpy_view()  # device memory is not the host's
    # the embedded weights went to the device too, and read as saved
    assert np.array_equal(m.get_input("bias").numpy(), BIAS)


def test_three_files_and_model_instances_on_cuda(cuda_dir):
    graph = (SOURCE / "factory_graph.json").read_text()
    params = (SOURCE / "factory_params.bin").read_bytes()
    lib = gexec.runtime.load_module(str(cuda_dir / "libgexec_cuda_host_ptx.so"))
    m = graph_executor.create(graph, lib, gexec.cuda(0))
    m.load_params(params)
    m.run(x=X)
    assert np.array_equal(m.get_output(0).numpy(), expected(X))

    model = gexec.Model.load((SOURCE / "factory_graph.json", cuda_dir / "libgexec_cuda_host_ptx.so",
                              SOURCE / "factory_params.bin"), device=gexec.cuda(0))
    a, b = model.instantiate(), model.instantiate()
    a.set_input("x", X)
    b.set_input("x", -X)
    a.run()
    b.run()
    assert np.array_equal(a.get_output(0).numpy(), expected(X))
    assert np.array_equal(b.get_output(0).numpy(), expected(-X))
    # the host model of the same files refuses device-only graphs' placement, naming the device
    with pytest.raises(gexec.Error, match="cuda"):
        gexec.Model.load((SOURCE / "factory_graph.json", cuda_dir / "libgexec_cuda_host_ptx.so", SOURCE / "factory_params.bin"))


def test_device_ndarrays(cuda_dir):
    dev = gexec.cuda(0)
    a = gexec.nd.array(X, dev)
    assert a.device == dev and a.shape == (64,) and np.array_equal(a.numpy(), X)
    e = gexec.nd.empty((8, 8), "float32", dev)
    assert e.device == dev and not e.numpy().any()  # zero-filled, as on the host
    e.copyfrom(X.reshape(8, 8) * 2)
    assert np.array_equal(e.numpy(), X.reshape(8, 8) * 2)
    e.copyfrom(np.arange(64, dtype=np.float64).reshape(8, 8))  # converted to float32 first, as TVM's copyfrom
    assert np.array_equal(e.numpy(), np.arange(64, dtype=np.float32).reshape(8, 8))
    with pytest.raises(ValueError, match="shape"):
        e.copyfrom(np.zeros(64, np.float32))
    b = a.copyto(dev)  # device to device
    assert b._data_ptr != a._data_ptr and np.array_equal(b.numpy(), X)
    h = a.copyto(gexec.cpu(0))  # device to host
    assert h.device == gexec.cpu(0) and np.array_equal(h.numpy_view(), X)
    c = gexec.nd.array(h, dev)  # host NDArray to device
    assert c.device == dev and np.array_equal(c.numpy(), X)
    i8 = gexec.nd.array(np.array([-128, 0, 127], np.int8), dev)
    assert i8.dtype == "int8" and np.array_equal(i8.numpy(), [-128, 0, 127])
    z = gexec.nd.array(np.zeros((0, 3), np.float32), dev)
    assert z.shape == (0, 3) and z.numpy().shape == (0, 3)
    dev.sync()


def test_second_device(cuda_dir):
    a = gexec.nd.array(X, gexec.cuda(0))
    try:
        b = a.copyto(gexec.cuda(1))
    except gexec.Error as e:
        pytest.skip("no second CUDA device: %s" % e)
    assert b.device == gexec.cuda(1) and np.array_equal(b.numpy(), X)
    assert np.array_equal(gexec.nd.array(b, gexec.cuda(0)).numpy(), X)


def test_dlpack_across_the_device_border(cuda_dir):
    a = gexec.nd.array(X, gexec.cuda(0))
    assert a.__dlpack_device__() == (2, 0)
    v = gexec.nd.from_dlpack(a)  # a view of the same device memory, kept alive by the view
    assert v.device == gexec.cuda(0) and v._data_ptr == a._data_ptr and v.shape == (64,)
    v.copyfrom(X + 1)
    assert np.array_equal(a.numpy(), X + 1)
    w = gexec.nd.from_dlpack(a.__dlpack__())  # the capsule itself
    del a, v
    assert np.array_equal(w.numpy(), X + 1)
    with pytest.raises((TypeError, RuntimeError, BufferError, ValueError)):
        np.from_dlpack(w)  # numpy takes host memory only


def test_device_inputs_and_outputs(cuda_dir):
    lib = gexec.runtime.load_module(str(cuda_dir / "libgexec_cuda_host_factory.so"))
    m = graph_executor.GraphModule(lib["default"](gexec.cuda(0)))
    dev_x = gexec.nd.array(X, gexec.cuda(0))
    m.set_input("x", dev_x)  # copied device to device
    dev_x.copyfrom(np.zeros(64, np.float32))  # the executor holds its own copy
    m.run()
    assert np.array_equal(m.get_output(0).numpy(), expected(X))

    zc = gexec.nd.array(-X, gexec.cuda(0))
    m.set_input_zero_copy("x", zc)  # read in place, at every run
    m.run()
    assert np.array_equal(m.get_output(0).numpy(), expected(-X))
    zc.copyfrom(X * 3)
    m.run()
    assert np.array_equal(m.get_output(0).numpy(), expected(X * 3))

    out = gexec.nd.empty((64,), "float32", gexec.cuda(0))
    m.set_output_zero_copy(0, out)  # written in place
    m.run()
    assert np.array_equal(out.numpy(), expected(X * 3))

    dst = gexec.nd.empty((64,), "float32", gexec.cuda(0))
    m.get_output(0, dst)  # copied device to device
    assert np.array_equal(dst.numpy(), expected(X * 3))

    with pytest.raises(gexec.InvalidArgumentError, match='"x"'):
        m.set_input("x", gexec.nd.array(np.zeros(32, np.float32), gexec.cuda(0)))
    with pytest.raises(gexec.InvalidArgumentError):
        m.set_input_zero_copy("x", gexec.nd.array(np.zeros(64, np.float32)))  # host memory for a device input
