#!/usr/bin/env python3
"""The gexec backend serving models with CUDA parts through a real Triton server.

    python3 tests/triton/test_triton_gpu.py --env ENV_DIR --backend-dir DIR --cuda-libs DIR --work DIR
        [--emulated-driver LIB --emulated-kernels LIB]

--cuda-libs holds the CUDA test libraries of tests/cuda (TVM's CUDA host-code protocol:
libgexec_cuda_host_ptx.so, whose kernels the graphs here call, and
libgexec_cuda_host_factory.so, a single-file model). With --emulated-driver the server
runs gexec's CUDA path over the host-emulated driver (GEXEC_CUDA_DRIVER, two devices):
the server's own CUDA runtime sees no GPU there, so instances are KIND_MODEL, placed by
the backend. Without it the models run on the machine's GPU through NVIDIA's driver, as
KIND_GPU and KIND_MODEL instances (exit 77, SKIPPED, where there is none).

Checked, over HTTP and gRPC, against values computed here with numpy: a single-file
model with four instances over the devices, a heterogeneous graph (CUDA kernels, a host
kernel between them, copies both ways), a batched model whose requests are packed into
runs and padded, a chain of 16 kernels with and without CUDA Graph replay, inputs sent
through Triton's CUDA shared memory (on a GPU only; see the note below), the per-device
gauges on /metrics, and a kernel that faults: its requests fail with the driver's error,
its instance says it is unusable, and the other models and devices go on serving.

CUDA shared memory needs the server's CUDA runtime (cudaIpcOpenMemHandle in Triton's own
process), which the emulated driver does not stand behind: it replaces only the driver
gexec loads. So GPU-memory inputs are checked on a real GPU alone.
"""

import argparse
import ctypes
import json
import os
import struct
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

failures = []


def check(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        failures.append(what)
    return ok


# ---- models -------------------------------------------------------------------------------

CUDA, HOST = 2, 1


class Graph:
    """A TVM graph JSON with one float32 output per node."""

    def __init__(self):
        self.nodes, self.entries = [], []

    def input(self, name, shape, device=CUDA):
        self.nodes.append({"op": "null", "name": name, "inputs": []})
        self.entries.append((list(shape), device))
        return len(self.nodes) - 1

    def op(self, name, func, inputs, shape, device=CUDA):
        self.nodes.append({"op": "tvm_op", "name": name, "inputs": [[i, 0, 0] for i in inputs],
                           "attrs": {"func_name": func, "num_inputs": str(len(inputs)), "num_outputs": "1", "flatten_data": "0"}})
        self.entries.append((list(shape), device))
        return len(self.nodes) - 1

    def json(self, heads):
        n = len(self.nodes)
        return json.dumps({
            "nodes": self.nodes,
            "arg_nodes": [i for i, x in enumerate(self.nodes) if x["op"] == "null"],
            "heads": [[h, 0, 0] for h in heads],
            "attrs": {"dltype": ["list_str", ["float32"] * n], "device_index": ["list_int", [d for _, d in self.entries]],
                      "storage_id": ["list_int", list(range(n))], "shape": ["list_shape", [s for s, _ in self.entries]]},
            "node_row_ptr": list(range(n + 1)),
        })


def param_dict(arrays):
    """TVM's save_param_dict format for {name: float32 array}."""
    out = [struct.pack("<QQQ", 0xF7E58D4F05049CB7, 0, len(arrays))]
    for name in arrays:
        out.append(struct.pack("<Q", len(name)) + name.encode())
    out.append(struct.pack("<Q", len(arrays)))
    for a in arrays.values():
        out.append(struct.pack("<QQiii", 0xDD5E40F096B4A13F, 0, 1, 0, a.ndim) + struct.pack("<BBH", 2, 32, 1))
        out.append(struct.pack("<%dq" % a.ndim, *a.shape) + struct.pack("<q", a.nbytes) + a.astype("<f4").tobytes())
    return b"".join(out)


def chain_graph(n=512, length=16):
    g = Graph()
    e = g.input("a", [n])
    for k in range(length):
        e = g.op("n%d" % k, "fused_relu" if k % 2 else "fused_scale_shift", [e], [n])
    return g.json([e])


def chain_expected(a, length=16):
    import numpy as np

    v = a.astype(np.float32)
    for k in range(length):
        v = np.maximum(v, 0) if k % 2 else (v * np.float32(2) + np.float32(0.5)).astype(np.float32)
    return v


def build_repository(root, libs, gpu):
    """{model: config} written under root; `gpu`: KIND_GPU where the server sees GPUs."""
    import numpy as np

    def model(name, config, files):
        d = os.path.join(root, name, "1")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
            f.write('backend: "gexec"\n' + config)
        for target, source in files.items():
            path = os.path.join(d, target)
            if isinstance(source, (bytes, str)) and not (isinstance(source, str) and os.path.isabs(source)):
                with open(path, "wb") as f:
                    f.write(source.encode() if isinstance(source, str) else source)
            else:
                os.symlink(source, path)

    ptx = os.path.join(libs, "libgexec_cuda_host_ptx.so")
    spread = "instance_group [ { count: 4, kind: %s } ]\n" % ("KIND_GPU" if gpu else "KIND_MODEL")
    model("cuda_factory", spread, {"model.so": os.path.join(libs, "libgexec_cuda_host_factory.so")})

    g = Graph()  # relu(-((x + bias) on the host)), as TVM places a heterogeneous graph
    x, bias = g.input("x", [256]), g.input("bias", [256])
    s = g.op("sum", "fused_add", [x, bias], [256])
    h = g.op("to_host", "__copy", [s], [256], HOST)
    n = g.op("neg", "fused_negative_cpu", [h], [256], HOST)
    back = g.op("to_gpu", "__copy", [n], [256])
    out = g.op("relu", "fused_relu", [back], [256])
    bias_values = (100.0 - np.arange(256)).astype(np.float32)
    model("cuda_hetero", "instance_group [ { count: 2, kind: KIND_MODEL } ]\n",
          {"graph.json": g.json([out]), "lib.so": ptx, "params": param_dict({"bias": bias_values})})

    g = Graph()  # rows of 32, four per run: requests of 1..8 rows packed and padded
    x = g.input("x", [4, 32])
    model("cuda_batched", "max_batch_size: 8\ndynamic_batching { max_queue_delay_microseconds: 2000 }\n" +
          "instance_group [ { count: 1, kind: KIND_MODEL } ]\n",
          {"graph.json": g.json([g.op("relu", "fused_relu", [x], [4, 32])]), "lib.so": ptx, "params": param_dict({})})

    chain = chain_graph()
    for name, extra in (("cuda_chain", ""), ("cuda_chain_graph", 'parameters: { key: "cuda_graph" value: { string_value: "true" } }\n')):
        model(name, "instance_group [ { count: 1, kind: KIND_MODEL } ]\n" + extra,
              {"graph.json": chain, "lib.so": ptx, "params": param_dict({})})

    g = Graph()
    a = g.input("a", [16])
    fault_device = "1" if not gpu else "0"
    model("cuda_fault", "instance_group [ { count: 1, kind: KIND_MODEL } ]\n"
          'parameters: { key: "cuda_devices" value: { string_value: "%s" } }\n' % fault_device,
          {"graph.json": g.json([g.op("faulty", "fused_fault", [a], [16])]), "lib.so": ptx, "params": param_dict({})})
    return {"bias": bias_values}


# ---- checks -------------------------------------------------------------------------------

def client(protocol, server):
    if protocol == "grpc":
        import tritonclient.grpc as tc
        return tc, tc.InferenceServerClient(server.grpc_url)
    import tritonclient.http as tc
    return tc, tc.InferenceServerClient(server.http_url)


def infer(protocol, server, model, inputs, output="output0"):
    tc, c = client(protocol, server)
    tensors = []
    for name, array in inputs.items():
        t = tc.InferInput(name, list(array.shape), "FP32")
        t.set_data_from_numpy(array)
        tensors.append(t)
    try:
        return c.infer(model, tensors, outputs=[tc.InferRequestedOutput(output)]).as_numpy(output)
    finally:
        c.close()  # an open connection would hold the server's exit for its 30 s timeout


def same(got, want):
    return got is not None and got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()


def check_models(server, extra, emulated):
    import numpy as np

    rng = np.random.default_rng(7)
    for protocol in ("http", "grpc"):
        for k in range(6):  # more requests than instances: every instance, both devices, answers
            x = rng.standard_normal(64).astype(np.float32) * 4
            want = np.maximum(x + np.float32(0.25) * np.arange(64, dtype=np.float32), 0).astype(np.float32)
            check(same(infer(protocol, server, "cuda_factory", {"x": x}), want), "%s cuda_factory request %d: relu(x + 0.25 i)" % (protocol, k))
        x = rng.standard_normal(256).astype(np.float32) * 50
        want = np.maximum(-(x + extra["bias"]), 0).astype(np.float32)
        check(same(infer(protocol, server, "cuda_hetero", {"x": x}), want), "%s cuda_hetero: CUDA kernels, a host kernel between them" % protocol)
        a = (rng.standard_normal(512) * 8).astype(np.float32)
        want = chain_expected(a)
        for name in ("cuda_chain", "cuda_chain_graph"):
            got = [infer(protocol, server, name, {"a": a}) for _ in range(3)]  # eager first, then replayed
            check(all(same(g, want) for g in got), "%s %s: 16 kernels, 3 requests" % (protocol, name))
        a2 = (rng.standard_normal(512) * 3).astype(np.float32)
        check(same(infer(protocol, server, "cuda_chain_graph", {"a": a2}), chain_expected(a2)), "%s cuda_chain_graph: new values replayed" % protocol)


def check_batching(server):
    import concurrent.futures

    import numpy as np

    rng = np.random.default_rng(11)
    batches = [rng.standard_normal((rows, 32)).astype(np.float32) for rows in (1, 3, 4, 5, 8, 2, 7, 1, 6)]

    def one(i):
        return infer("grpc" if i % 2 else "http", server, "cuda_batched", {"x": batches[i]})

    with concurrent.futures.ThreadPoolExecutor(len(batches)) as pool:
        got = list(pool.map(one, range(len(batches))))
    bad = [i for i, (g, x) in enumerate(zip(got, batches)) if not same(g, np.maximum(x, 0))]
    check(not bad, "cuda_batched: %d concurrent requests of 1..8 rows packed 4 per run, padded, sliced back%s" %
          (len(batches), " (wrong: %s)" % bad if bad else ""))


def check_metrics(server, emulated):
    m = server.metrics()

    def value(name, model, device):
        return m.get((name, frozenset({("model", model), ("version", "1"), ("device", device)})))

    devices = ("cuda:0", "cuda:1") if emulated else ("cuda:0", "cuda:0")
    per_device = {}
    for d in devices:
        per_device[d] = per_device.get(d, 0) + 2
    ok = all(value("gexec_instances", "cuda_factory", d) == n for d, n in per_device.items())
    check(ok, "metrics: gexec_instances of cuda_factory per device %s (got %s)" %
          (per_device, {d: value("gexec_instances", "cuda_factory", d) for d in per_device}))
    weights = value("gexec_weight_bytes", "cuda_hetero", "cuda:0")
    check(weights == 256 * 4, "metrics: gexec_weight_bytes of cuda_hetero on cuda:0 is its 1024 bytes of bias (got %s)" % weights)
    act = value("gexec_activation_bytes", "cuda_chain", devices[0])
    check(act is not None and act >= 512 * 4 * 2, "metrics: gexec_activation_bytes of cuda_chain (got %s)" % act)


def check_cuda_shared_memory(server):
    """An input and an output in GPU memory registered with Triton (CUDA IPC)."""
    import numpy as np
    import tritonclient.grpc as tc
    import tritonclient.utils.cuda_shared_memory as cudashm

    x = np.arange(64, dtype=np.float32) - 20
    want = np.maximum(x + np.float32(0.25) * np.arange(64, dtype=np.float32), 0).astype(np.float32)
    c = tc.InferenceServerClient(server.grpc_url)
    inp = cudashm.create_shared_memory_region("gexec_in", x.nbytes, 0)
    out = cudashm.create_shared_memory_region("gexec_out", x.nbytes, 0)
    try:
        cudashm.set_shared_memory_region(inp, [x])
        c.register_cuda_shared_memory("gexec_in", cudashm.get_raw_handle(inp), 0, x.nbytes)
        c.register_cuda_shared_memory("gexec_out", cudashm.get_raw_handle(out), 0, x.nbytes)
        t = tc.InferInput("x", [64], "FP32")
        t.set_shared_memory("gexec_in", x.nbytes)
        o = tc.InferRequestedOutput("output0")
        o.set_shared_memory("gexec_out", x.nbytes)
        c.infer("cuda_factory", [t], outputs=[o])
        got = cudashm.get_contents_as_numpy(out, np.float32, [64])
        check(same(got, want), "CUDA shared memory: input read and output written in GPU memory")
    finally:
        try:
            c.unregister_cuda_shared_memory()
        except Exception:  # noqa: BLE001
            pass
        cudashm.destroy_shared_memory_region(inp)
        cudashm.destroy_shared_memory_region(out)


def check_fault(server, emulated):
    import numpy as np

    a = np.ones(16, dtype=np.float32)
    errors = []
    for _ in range(2):
        try:
            infer("http", server, "cuda_fault", {"a": a})
            errors.append(None)
        except Exception as e:  # noqa: BLE001 - the client's error type
            errors.append(str(e))
    check(errors[0] is not None and "CUDA_ERROR_ILLEGAL_ADDRESS" in errors[0],
          "a faulting kernel fails its request with the driver's error: %s" % (errors[0] or "")[:300])
    check(errors[1] is not None and "unusable" in errors[1], "the instance is unusable afterwards: %s" % (errors[1] or "")[:300])
    x = np.arange(64, dtype=np.float32)
    if emulated:  # the fault was on cuda:1; cuda:0's instances go on
        a2 = np.linspace(-3, 3, 512).astype(np.float32)
        check(same(infer("grpc", server, "cuda_chain", {"a": a2}), chain_expected(a2)), "after the fault: a model on the other device serves")
        m = server.metrics()
        key = ("gexec_unusable_instances", frozenset({("model", "cuda_fault"), ("version", "1"), ("device", "cuda:1")}))
        check(m.get(key) == 1, "metrics: gexec_unusable_instances of cuda_fault on cuda:1 is 1 (got %s)" % m.get(key))
    else:
        del x
    check(server.running(), "the server is alive after the fault")
    states = server.model_states()
    check(all(s == "READY" for s, _ in states.values()), "every model still READY: %s" % {k: v[0] for k, v in states.items()})


def gpu_present():
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return "no NVIDIA driver (%s)" % e
    if lib.cuInit(0) != 0:
        return "cuInit failed: no usable GPU"
    n = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(n)) != 0 or n.value < 1:
        return "no CUDA device"
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", required=True)
    p.add_argument("--backend-dir", required=True)
    p.add_argument("--cuda-libs", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--emulated-driver")
    p.add_argument("--emulated-kernels")
    args = p.parse_args()
    emulated = bool(args.emulated_driver)
    if not emulated:
        why = gpu_present()
        if why:
            print("SKIPPED: %s" % why)
            return 77
    env = harness.skip_if_unavailable(args.env)
    harness.reexec_in_venv(env, __file__)

    os.makedirs(args.work, exist_ok=True)
    root = os.path.join(args.work, "repository-gpu")
    if os.path.isdir(root):
        import shutil
        shutil.rmtree(root)
    extra = build_repository(root, os.path.abspath(args.cuda_libs), gpu=not emulated)
    environ = {}
    if emulated:
        environ = {"GEXEC_CUDA_DRIVER": os.path.abspath(args.emulated_driver), "GEXEC_EMU_KERNELS": os.path.abspath(args.emulated_kernels),
                   "GEXEC_EMU_DEVICES": "2"}
    log = os.path.join(args.work, "server-gpu.log")
    try:
        with harness.Server(env, args.backend_dir, root, log, environ=environ, metrics=True) as server:
            server.wait_ready()
            states = server.model_states()
            check(all(s == "READY" for s, _ in states.values()), "every model READY: %s" % {k: v for k, v in states.items() if v[0] != "READY"})
            check_models(server, extra, emulated)
            check_batching(server)
            check_metrics(server, emulated)
            if not emulated:
                check_cuda_shared_memory(server)
            check_fault(server, emulated)
    except Exception:  # noqa: BLE001 - a crash of the test is a failure with its trace
        traceback.print_exc()
        failures.append("exception")
        print("server log: %s" % log)
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
