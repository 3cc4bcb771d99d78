"""Serving a conformance model through Triton with the gexec backend, against gexec-run.

    python3 benchmarks/triton/bench_triton.py --env ENV_DIR --backend-dir DIR \\
        --conformance DIR --gexec-run PATH [--seconds 3] [--model resnet]
    python3 benchmarks/triton/bench_triton.py --gpu --cuda-libs DIR --env ENV_DIR --backend-dir DIR \\
        --gexec-run PATH [--seconds 3]

ENV_DIR comes from tests/triton/setup_env.sh (the script re-runs itself with the venv
there, which has tritonclient); DIR of --backend-dir holds gexec/libtriton_gexec.so;
--conformance is the directory tests/conformance/make_models.sh filled. The model is
served from its single file (model.so) by two CPU instances of one kernel thread each;
the backend completes the inputs and outputs of config.pbtxt. For concurrency 1, 4 and 8
over gRPC (and 1 over HTTP), that many client threads send the reference inputs for
--seconds; every response must equal the reference outputs bit for bit. The latencies
are then set against gexec-run's in-process run() with one thread. Prints
'SKIPPED: reason' and exits 0 when the Triton environment or the model is missing.

--gpu serves, on the machine's GPU, a chain of 16 small CUDA kernels (the CUDA test
library in --cuda-libs, tests/cuda) from one instance (KIND_MODEL on cuda:0), once with eager launches
and once with parameter cuda_graph (each run replayed as one CUDA Graph), every response
checked against numpy; the latencies are set against gexec-run's in-process run() on the
GPU, eager and with --cuda-graph, measured in the same run. SKIPPED without a GPU.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "triton"))
import harness  # noqa: E402

GRPC_CONCURRENCY = (1, 4, 8)
HTTP_CONCURRENCY = (1,)
WARMUP_SECONDS = 1.0
REQUEST_TIMEOUT_S = 60.0

CONFIG = """backend: "gexec"
instance_group [{ count: %d, kind: KIND_CPU }]
parameters: { key: "num_threads" value: { string_value: "1" } }
"""


class Client:
    """One connection and one prepared request for a protocol ("grpc" or "http")."""

    def __init__(self, protocol, url, model, inputs, output_names):
        from tritonclient.utils import np_to_triton_dtype

        if protocol == "grpc":
            import tritonclient.grpc as tc

            self._client = tc.InferenceServerClient(url)
            self._outputs = [tc.InferRequestedOutput(name) for name in output_names]
            self._kwargs = {"client_timeout": REQUEST_TIMEOUT_S}
        else:
            import tritonclient.http as tc

            self._client = tc.InferenceServerClient(url, connection_timeout=REQUEST_TIMEOUT_S,
                                                    network_timeout=REQUEST_TIMEOUT_S)
            self._outputs = [tc.InferRequestedOutput(name, binary_data=True) for name in output_names]
            self._kwargs = {}
        self._inputs = []
        for name, array in inputs.items():
            infer_input = tc.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
            infer_input.set_data_from_numpy(array)
            self._inputs.append(infer_input)
        self._model = model
        self._output_names = output_names

    def infer(self):
        result = self._client.infer(self._model, self._inputs, outputs=self._outputs, **self._kwargs)
        return [result.as_numpy(name) for name in self._output_names]

    def close(self):
        self._client.close()


def matches(got, expected):
    return all(g is not None and g.dtype == e.dtype and g.shape == e.shape and g.tobytes() == e.tobytes()
               for g, e in zip(got, expected))


def drive(protocol, concurrency, seconds, url, model, inputs, output_names, expected):
    """Runs `concurrency` client threads for `seconds`. Returns (latencies in s, elapsed s,
    mismatches, errors)."""
    latencies, failures = [], []
    mismatches = [0]
    lock = threading.Lock()
    clients = [Client(protocol, url, model, inputs, output_names) for _ in range(concurrency)]
    start_barrier = threading.Barrier(concurrency + 1)
    deadline = [0.0]

    def worker(client):
        mine, bad = [], 0
        start_barrier.wait()
        try:
            while time.perf_counter() < deadline[0]:
                t0 = time.perf_counter()
                got = client.infer()
                mine.append(time.perf_counter() - t0)
                bad += not matches(got, expected)
        except Exception as e:  # noqa: BLE001 - reported, and the run fails
            with lock:
                failures.append("%s: %s" % (type(e).__name__, e))
        with lock:
            latencies.extend(mine)
            mismatches[0] += bad

    threads = [threading.Thread(target=worker, args=(c,), daemon=True) for c in clients]
    for t in threads:
        t.start()
    begin = time.perf_counter()
    deadline[0] = begin + seconds
    start_barrier.wait()
    for t in threads:
        t.join(seconds + REQUEST_TIMEOUT_S + 10)
    elapsed = time.perf_counter() - begin
    if any(t.is_alive() for t in threads):
        failures.append("a client thread did not finish")
    for c in clients:
        c.close()
    return latencies, elapsed, mismatches[0], failures


def percentile_ms(latencies, q):
    import numpy as np

    return float(np.percentile(np.asarray(latencies), q)) * 1e3


def median_ms(command):
    """The median per run, in ms, that `gexec-run ... --benchmark` prints."""
    out = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError("%s failed (%d):\n%s" % (" ".join(command), out.returncode, out.stderr[-2000:]))
    match = re.search(r"per run in (ns|us|ms|s)\b.*?median ([0-9.eE+-]+)", out.stdout)
    if not match:
        raise RuntimeError("no median in the output of %s:\n%s" % (" ".join(command), out.stdout[-2000:]))
    return float(match.group(2)) * {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[match.group(1)]


def gexec_run_median_ms(gexec_run, model_so):
    """The median of gexec-run's in-process run() with one kernel thread, in ms."""
    return median_ms([gexec_run, model_so, "--zero-missing", "--benchmark", "--threads", "1",
                      "--repeat", "20", "--min-repeat-ms", "100"])


def gexec_run_gpu_median_ms(gexec_run, model_dir, cuda_graph):
    """The median of gexec-run's in-process run() of the split model on cuda:0, in ms."""
    return median_ms([gexec_run, "--graph", os.path.join(model_dir, "graph.json"), "--lib", os.path.join(model_dir, "lib.so"),
                      "--params", os.path.join(model_dir, "params"), "--device", "cuda:0", "--zero-missing", "--benchmark",
                      "--repeat", "20", "--min-repeat-ms", "100"] + (["--cuda-graph"] if cuda_graph else []))


def gpu_main(args):
    """Serving a chain of CUDA kernels, eager and replayed as a CUDA Graph, against run()."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "triton"))
    import test_triton_gpu as models  # the graph and its numpy reference

    emulated = os.environ.get("GEXEC_CUDA_DRIVER")  # the host-emulated driver: a dry run of this benchmark, not a GPU's figures
    why = harness.unavailable_reason(args.env) or (None if emulated else models.gpu_present())
    if why:
        print("SKIPPED: Triton on a GPU: %s" % why)
        return 0
    env = harness.env_paths(args.env)
    harness.reexec_in_venv(env, __file__)
    import numpy as np

    ptx = os.path.join(os.path.abspath(args.cuda_libs), "libgexec_cuda_host_ptx.so")
    a = np.linspace(-4, 4, 512).astype(np.float32)
    expected = [models.chain_expected(a)]
    failed, results = [], {}
    with tempfile.TemporaryDirectory(prefix="bench_triton_gpu.") as tmp:
        repo = os.path.join(tmp, "repo")
        files = {"graph.json": models.chain_graph(), "params": models.param_dict({})}
        for name, extra in (("chain_eager", ""), ("chain_graph", 'parameters: { key: "cuda_graph" value: { string_value: "true" } }\n')):
            d = os.path.join(repo, name, "1")
            os.makedirs(d)
            for f, text in files.items():
                with open(os.path.join(d, f), "wb") as out:
                    out.write(text.encode() if isinstance(text, str) else text)
            os.symlink(ptx, os.path.join(d, "lib.so"))
            with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
                f.write('backend: "gexec"\ninstance_group [{ count: 1, kind: KIND_MODEL }]\n'
                        'parameters: { key: "cuda_devices" value: { string_value: "0" } }\n' + extra)
        log_path = os.path.join(tmp, "tritonserver.log")
        with harness.Server(env, args.backend_dir, repo, log_path) as server:
            server.wait_ready()
            states = server.model_states()
            if any(s != "READY" for s, _ in states.values()):
                print("bench_triton: models not ready: %s\n%s" % (states, server.log_text()[-3000:]), file=sys.stderr)
                return 1
            for name in ("chain_eager", "chain_graph"):
                for protocol, url in (("grpc", server.grpc_url), ("http", server.http_url)):
                    drive(protocol, 1, WARMUP_SECONDS, url, name, {"a": a}, ["output0"], expected)
                for protocol, concurrency, url in (("grpc", 1, server.grpc_url), ("grpc", 4, server.grpc_url), ("http", 1, server.http_url)):
                    latencies, elapsed, mismatches, errors = drive(protocol, concurrency, args.seconds, url, name, {"a": a}, ["output0"], expected)
                    if mismatches or errors or not latencies:
                        failed.append("%s %s c=%d: %d mismatches, errors %s" % (name, protocol, concurrency, mismatches, errors[:1]))
                        continue
                    p50 = percentile_ms(latencies, 50)
                    results[(name, protocol, concurrency)] = (p50, len(latencies) / elapsed)
                    print("serving %s on cuda:0 over %s, concurrency %d: %.1f requests/s, p50 %.3f ms, p99 %.3f ms (%d requests)"
                          % (name, protocol, concurrency, len(latencies) / elapsed, p50, percentile_ms(latencies, 99), len(latencies)), flush=True)
        # In-process, in the same run: the same files, after the server has stopped.
        model_dir = os.path.join(repo, "chain_eager", "1")
        run_ms = {graph: gexec_run_gpu_median_ms(args.gexec_run, model_dir, graph) for graph in (False, True)}
    if emulated:
        print("(the host-emulated CUDA driver %s: these are not a GPU's figures)" % emulated)
    print("in-process run() on cuda:0 (16 kernels): eager median %.4g ms, CUDA Graph median %.4g ms (%.2fx)"
          % (run_ms[False], run_ms[True], run_ms[False] / run_ms[True]))
    for (name, protocol, concurrency), (p50, rps) in results.items():
        base = run_ms[name == "chain_graph"]
        print("%s over %s at concurrency %d: p50 %.3f ms is %.2fx the in-process run() (%+.3f ms), %.1f requests/s"
              % (name, protocol, concurrency, p50, p50 / base, p50 - base, rps))
    for protocol, concurrency in (("grpc", 1), ("grpc", 4), ("http", 1)):
        e, g = results.get(("chain_eager", protocol, concurrency)), results.get(("chain_graph", protocol, concurrency))
        if e and g:
            print("cuda_graph over %s at concurrency %d: p50 %.3f -> %.3f ms (%.2fx), %.1f -> %.1f requests/s (%.2fx)"
                  % (protocol, concurrency, e[0], g[0], e[0] / g[0], e[1], g[1], g[1] / e[1]))
    for failure in failed:
        print("FAILED: %s" % failure, file=sys.stderr)
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", required=True, help="directory tests/triton/setup_env.sh filled")
    parser.add_argument("--backend-dir", required=True, help="directory holding gexec/libtriton_gexec.so")
    parser.add_argument("--conformance", help="directory of the conformance models")
    parser.add_argument("--gpu", action="store_true", help="serve a chain of CUDA kernels on the GPU (see above)")
    parser.add_argument("--cuda-libs", help="with --gpu: the directory of the CUDA test libraries (tests/cuda)")
    parser.add_argument("--gexec-run", required=True, help="path of the gexec-run tool")
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of each measurement")
    parser.add_argument("--model", default="resnet", help="conformance model to serve")
    parser.add_argument("--instances", type=int, default=2, help="model instances (CPU)")
    args = parser.parse_args()
    if args.gpu:
        if not args.cuda_libs:
            parser.error("--gpu needs --cuda-libs")
        return gpu_main(args)
    if not args.conformance:
        parser.error("--conformance is required (or --gpu)")

    reason = harness.unavailable_reason(args.env)
    model_dir = os.path.join(args.conformance, args.model)
    conformance_skipped = os.path.join(args.conformance, "SKIPPED")
    if not reason and os.path.isfile(conformance_skipped):
        with open(conformance_skipped) as f:
            reason = "no conformance models: " + f.read().strip()
    for name in ("model.so", "inputs.bin", "outputs.bin"):
        if not reason and not os.path.isfile(os.path.join(model_dir, name)):
            reason = "missing %s" % os.path.join(model_dir, name)
    if reason:
        print("SKIPPED: %s" % reason)
        return 0
    env = harness.env_paths(args.env)
    harness.reexec_in_venv(env, __file__)
    backend_lib = os.path.join(args.backend_dir, "gexec", "libtriton_gexec.so")
    if not os.path.isfile(backend_lib):
        sys.exit("bench_triton: no backend at %s" % backend_lib)
    if not os.access(args.gexec_run, os.X_OK):
        sys.exit("bench_triton: %s is not an executable" % args.gexec_run)

    inputs = harness.read_param_dict(os.path.join(model_dir, "inputs.bin"))
    reference = harness.read_param_dict(os.path.join(model_dir, "outputs.bin"))
    expected = [reference[str(i)] for i in range(len(reference))]
    output_names = ["output%d" % i for i in range(len(expected))]
    model = args.model
    failed = []
    results = {}  # (protocol, concurrency) -> p50 ms

    with tempfile.TemporaryDirectory(prefix="bench_triton.") as tmp:
        repo = os.path.join(tmp, "repo")
        harness.make_model_dir(repo, model, {"model.so": os.path.join(model_dir, "model.so")},
                               CONFIG % args.instances)
        log_path = os.path.join(tmp, "tritonserver.log")
        try:
            with harness.Server(env, args.backend_dir, repo, log_path) as server:
                server.wait_ready()
                state, why = server.model_states().get(model, ("", "not in the repository index"))
                if state != "READY":
                    errors = [line for line in server.log_text().splitlines() if line.startswith("E")]
                    raise harness.ServerError("model %s is %s: %s\n%s" % (model, state or "not loaded", why,
                                                                          "\n".join(errors[-10:])))
                print("server: Triton %s, model %s (%d CPU instances, 1 kernel thread each), RSS %.0f MiB"
                      % (server.metadata().get("version", "?"), model, args.instances, server.rss_bytes() / 2**20),
                      flush=True)
                for protocol, url in (("grpc", server.grpc_url), ("http", server.http_url)):
                    drive(protocol, 1, WARMUP_SECONDS, url, model, inputs, output_names, expected)
                runs = [("grpc", c, server.grpc_url) for c in GRPC_CONCURRENCY]
                runs += [("http", c, server.http_url) for c in HTTP_CONCURRENCY]
                for protocol, concurrency, url in runs:
                    label = {"grpc": "gRPC", "http": "HTTP"}[protocol]
                    latencies, elapsed, mismatches, errors = drive(
                        protocol, concurrency, args.seconds, url, model, inputs, output_names, expected)
                    if mismatches:
                        failed.append("%s, concurrency %d: %d responses differ from outputs.bin"
                                      % (label, concurrency, mismatches))
                    if errors:
                        failed.append("%s, concurrency %d: %d client errors, first: %s"
                                      % (label, concurrency, len(errors), errors[0]))
                    if not latencies:
                        failed.append("%s, concurrency %d: no request completed" % (label, concurrency))
                        continue
                    p50, p99 = percentile_ms(latencies, 50), percentile_ms(latencies, 99)
                    results[(label, concurrency)] = (p50, len(latencies) / elapsed)
                    print("serving %s over %s, concurrency %d: %.1f requests/s, p50 %.3f ms, p99 %.3f ms "
                          "(%d requests)" % (model, label, concurrency, len(latencies) / elapsed, p50, p99,
                                             len(latencies)), flush=True)
                if not server.running():
                    failed.append("tritonserver exited during the benchmark")
        except harness.ServerError as e:
            print("bench_triton: %s" % e, file=sys.stderr)
            return 1

    run_ms = gexec_run_median_ms(args.gexec_run, os.path.join(model_dir, "model.so"))
    print("in-process run(): median %.4g ms (gexec-run, 1 thread)" % run_ms)
    cores = len(os.sched_getaffinity(0))
    for (label, concurrency), (p50, rps) in results.items():
        # What the instances could do if serving cost nothing: each runs back to back
        # (at most as many at once as there are cores, one kernel thread each).
        ideal = min(concurrency, args.instances, cores) * 1000.0 / run_ms
        print("serving overhead over %s at concurrency %d: p50 is %.2fx the in-process run() (%+.3f ms); "
              "%.1f requests/s is %.3gx the %.1f/s of %d back-to-back run()s"
              % (label, concurrency, p50 / run_ms, p50 - run_ms, rps, rps / ideal, ideal,
                 min(concurrency, args.instances, cores)))

    for failure in failed:
        print("FAILED: %s" % failure, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
