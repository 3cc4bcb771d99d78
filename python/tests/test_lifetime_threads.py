"""Lifetime (outputs kept after their module is gone, libraries unloaded while arrays
live, garbage collection during runs) and threads (one instance per thread, the GIL
released in run())."""

import gc
import threading

import numpy as np

import gexec
from gexec.contrib import graph_executor
from conftest import graph_json

X = np.arange(6, dtype=np.float32).reshape(2, 3)


def test_outputs_outlive_their_module(kernels_lib):
    lib = gexec.runtime.load_module(str(kernels_lib))
    m = graph_executor.create(graph_json([("inc", "test_add_one", ["x"])], ["x"]), lib, gexec.cpu())
    m.run(x=X)
    out, view, inp = m.get_output(0), m.get_output(0).numpy_view(), m.get_input(0)
    capsule_view = np.from_dlpack(m.get_output(0))
    del m, lib
    gc.collect()
    for _ in range(3):  # other allocations must not reuse the memory the views hold
        other = graph_executor.create(graph_json([("inc", "test_add_one", ["x"])], ["x"]),
                                      gexec.runtime.load_module(str(kernels_lib)), gexec.cpu())
        other.run(x=X * 100)
    assert np.array_equal(out.numpy(), X + 1)
    assert np.array_equal(view, X + 1) and np.array_equal(capsule_view, X + 1)
    assert np.array_equal(inp.numpy(), X)


def test_outputs_of_a_model_outlive_model_and_instance(conformance_dir):
    d = conformance_dir / "mlp"
    inputs = gexec.runtime.load_param_dict_from_file(d / "inputs.bin")
    want = gexec.runtime.load_param_dict_from_file(d / "outputs.bin")["0"].numpy()
    lib = gexec.runtime.load_module(d / "model.so")
    m = graph_executor.GraphModule(lib["default"](gexec.cpu(0)))
    m.run(**inputs)
    out = m.get_output(0)
    del m, lib  # the library may be unloaded: the output is data, not code
    gc.collect()
    assert out.numpy().tobytes() == want.tobytes()


def test_output_view_changes_at_next_run(kernels_lib):
    m = graph_executor.create(graph_json([("inc", "test_add_one", ["x"])], ["x"]),
                              gexec.runtime.load_module(str(kernels_lib)), gexec.cpu())
    m.run(x=X)
    view, copy = m.get_output(0).numpy_view(), m.get_output(0).numpy()
    m.run(x=X * 2)
    assert np.array_equal(view, X * 2 + 1) and np.array_equal(copy, X + 1)  # the documented rule


def test_gc_and_other_threads_during_runs(kernels_lib):
    lib = gexec.runtime.load_module(str(kernels_lib))
    g = graph_json([("inc", "test_add_one", ["x"])], ["x"], shape=(256, 256))
    m = graph_executor.create(g, lib, gexec.cpu())
    x = np.ones((256, 256), np.float32)
    m.set_input("x", x)
    stop = threading.Event()

    def churn():
        while not stop.is_set():
            gc.collect()
            graph_executor.create(g, lib, gexec.cpu())  # made and dropped meanwhile

    t = threading.Thread(target=churn)
    t.start()
    try:
        for _ in range(200):
            m.run()
            assert m.get_output(0).numpy()[0, 0] == 2
    finally:
        stop.set()
        t.join()


def test_threads_each_with_own_instance_bit_identical(conformance_dir):
    d = conformance_dir / "mlp"
    model = gexec.Model.load(d / "model.so")
    inputs = gexec.runtime.load_param_dict_from_file(d / "inputs.bin")
    want = gexec.runtime.load_param_dict_from_file(d / "outputs.bin")["0"].numpy().tobytes()
    data = inputs["data"].numpy()
    errors, runs = [], 1000

    def work():
        try:
            m = model.instantiate()
            for _ in range(runs):
                m.set_input("data", data)
                m.run()
                if m.get_output(0).numpy().tobytes() != want:
                    errors.append("output differs from TVM's")
                    return
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]


def test_one_instance_entered_by_two_threads_is_refused_or_waits(kernels_lib):
    # A second thread inside run() of a busy executor is refused (gexec.Error "busy"),
    # never silently wrong.
    lib = gexec.runtime.load_module(str(kernels_lib))
    g = graph_json([("inc", "test_add_one", ["x"])], ["x"], shape=(512, 512))
    m = graph_executor.create(g, lib, gexec.cpu())
    m.set_input("x", np.ones((512, 512), np.float32))
    codes = []

    def work():
        for _ in range(100):
            try:
                m.run()
            except gexec.Error as e:
                codes.append(e.code)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(codes) <= {"busy"}
    m.run()
    assert m.get_output(0).numpy()[0, 0] == 2


_EXIT_DURING_RUN = r"""
import sys, threading, numpy as np, gexec
model = gexec.Model.load(sys.argv[1])
m = model.instantiate()
x = np.ones((2, 64), np.float32)
def spin():
    while True:
        m.run(data=x)
threading.Thread(target=spin, daemon=True).start()
out = m.get_output(0)  # alive at exit too
"""


def test_exit_while_a_daemon_thread_runs(conformance_dir):
    import subprocess
    import sys
    for _ in range(3):
        r = subprocess.run([sys.executable, "-c", _EXIT_DURING_RUN, str(conformance_dir / "mlp" / "model.so")],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert r.stderr == ""
