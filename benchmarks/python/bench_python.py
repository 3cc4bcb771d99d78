"""gexec from Python, against gexec from C++ and TVM's own Python API, same machine, same run.

    python bench_python.py --conformance <build>/conformance --kernels <build>/tests/kernels/libgexec_test_kernels.so
                           [--tvm-python <build>/conformance/venv/bin/python]

Run it with the Python where the gexec wheel is installed. Figures (median of repeats):
  run() overhead  m.run() from Python on a one-node do-nothing graph vs the same executor's
                  run() timed in C++ (gexec::benchmark); goal <= 1 us over
  mlp loop        set_input(numpy) + run() + get_output(0).numpy() on the MLP conformance
                  model vs the same loop through TVM's Python API (hhb-tvm, in the
                  conformance venv: another Python, so measured in a child process); goal <= 0.5x
  resnet run()    m.run() from Python vs C++ run() on the ResNet model (the best of interleaved
                  rounds of each); goal <= 1.02x
  threads         8 threads with an instance each vs 1 thread (throughput; the GIL is
                  released in run())
The TVM side is this same file run with --tvm-only under TVM's Python.
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time


def timed_loop(f, min_seconds=0.2, repeats=5):
    """Median seconds per call of f(), over `repeats` rounds lasting >= min_seconds each."""
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        dt = time.perf_counter() - t0
        if dt >= min_seconds / 4:
            break
        n *= 4
    n = max(1, int(n * (min_seconds / max(dt, 1e-9))))
    results = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        results.append((time.perf_counter() - t0) / n)
    results.sort()
    return results[len(results) // 2]


def mlp_loop(api, graph_executor, model_dir, np):
    lib = api.runtime.load_module(os.path.join(model_dir, "model.so"))
    m = graph_executor.GraphModule(lib["default"](api.cpu(0)))
    data = np.random.default_rng(0).standard_normal((2, 64)).astype("float32")

    def once():
        m.set_input("data", data)
        m.run()
        return m.get_output(0).numpy()

    once()
    return timed_loop(once)


def tvm_only(args):
    import numpy as np
    import tvm
    from tvm.contrib import graph_executor
    print(json.dumps({"tvm_version": tvm.__version__,
                      "mlp_loop_s": mlp_loop(tvm, graph_executor, os.path.join(args.conformance, "mlp"), np)}))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--conformance", required=True)
    p.add_argument("--kernels")
    p.add_argument("--tvm-python")
    p.add_argument("--tvm-only", action="store_true")
    args = p.parse_args()
    if args.tvm_only:
        return tvm_only(args)

    import numpy as np
    import gexec
    from gexec.contrib import graph_executor

    print("gexec %s from Python %s.%s (%s)" % (gexec.__version__, sys.version_info[0], sys.version_info[1],
                                             os.path.dirname(gexec.__file__)))
    med = lambda r: sorted(r)[len(r) // 2]  # noqa: E731

    if args.kernels and os.path.exists(args.kernels):
        g = json.dumps({
            "nodes": [{"op": "null", "name": "x", "inputs": []},
                      {"op": "tvm_op", "name": "n", "inputs": [[0, 0, 0]],
                       "attrs": {"func_name": "test_noop", "num_inputs": "1", "num_outputs": "1", "flatten_data": "0"}}],
            "arg_nodes": [0], "heads": [[1, 0, 0]], "node_row_ptr": [0, 1, 2],
            "attrs": {"shape": ["list_shape", [[1], [1]]], "dltype": ["list_str", ["float32", "float32"]],
                      "storage_id": ["list_int", [0, 1]]}})
        m = graph_executor.create(g, gexec.runtime.load_module(args.kernels), gexec.cpu(0))
        m.set_input("x", np.zeros(1, np.float32))
        run = m.run
        cpp = med(m._ex.benchmark(7, 100000, 100, 100, 0, 1))
        py = timed_loop(run)
        raw = timed_loop(m._ex.run)
        print("run() overhead, one do-nothing node: C++ run() %.0f ns, Python m.run() %.0f ns (+%.0f ns; the "
              "extension's method alone +%.0f ns); goal <= +1000 ns: %s"
              % (cpp * 1e9, py * 1e9, (py - cpp) * 1e9, (raw - cpp) * 1e9, "met" if py - cpp <= 1e-6 else "NOT MET"))
    else:
        print("run() overhead: SKIPPED (no --kernels library)")

    mlp = os.path.join(args.conformance, "mlp")
    gx = mlp_loop(gexec, graph_executor, mlp, np)
    line = "mlp loop (set_input numpy, run, get_output(0).numpy()): gexec %.2f us" % (gx * 1e6)
    if args.tvm_python and os.path.exists(args.tvm_python):
        out = subprocess.run([args.tvm_python, os.path.abspath(__file__), "--tvm-only", "--conformance", args.conformance],
                             check=True, capture_output=True, text=True).stdout
        tvm = json.loads(out.strip().splitlines()[-1])
        line += ", TVM %s %.2f us, ratio %.2fx; goal <= 0.5x: %s" % (
            tvm["tvm_version"], tvm["mlp_loop_s"] * 1e6, gx / tvm["mlp_loop_s"], "met" if gx <= 0.5 * tvm["mlp_loop_s"] else "NOT MET")
    else:
        line += " (TVM: SKIPPED, no --tvm-python)"
    print(line)

    resnet = os.path.join(args.conformance, "resnet")
    if os.path.isdir(resnet):
        model = gexec.Model.load(os.path.join(resnet, "model.so"))
        m = model.instantiate()
        inputs = gexec.runtime.load_param_dict_from_file(os.path.join(resnet, "inputs.bin"))
        m.set_input(**inputs)
        # Interleaved rounds, the best of each: on a busy machine a round of one can meet
        # noise the other's round did not.
        cpp_rounds, py_rounds = [], []
        run = m.run
        for _ in range(7):
            cpp_rounds.append(min(m._ex.benchmark(1, 3, 150, 100, 0, 1)))
            n = max(1, int(0.15 / cpp_rounds[-1]))
            t0 = time.perf_counter()
            for _ in range(n):
                run()
            py_rounds.append((time.perf_counter() - t0) / n)
        cpp, py = min(cpp_rounds), min(py_rounds)
        print("resnet run() (best of 7 interleaved rounds): C++ %.3f ms, Python %.3f ms, ratio %.3fx; goal <= 1.02x: %s"
              % (cpp * 1e3, py * 1e3, py / cpp, "met" if py <= 1.02 * cpp else "NOT MET"))

        # threads: instances of one model, one per thread, the GIL released in run()
        data = {k: v.numpy() for k, v in gexec.runtime.load_param_dict_from_file(os.path.join(mlp, "inputs.bin")).items()}
        mlp_model = gexec.Model.load(os.path.join(mlp, "model.so"), num_threads=1)

        def throughput(nthreads, runs=2000):
            mods = [mlp_model.instantiate() for _ in range(nthreads)]

            def work(mod):
                for _ in range(runs):
                    mod.run(**data)

            ts = [threading.Thread(target=work, args=(mod,)) for mod in mods]
            t0 = time.perf_counter()
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            return nthreads * runs / (time.perf_counter() - t0)

        one, eight = throughput(1), throughput(8)
        print("threads (mlp, an instance per thread, %d cores): 1 thread %.0f runs/s, 8 threads %.0f runs/s, ratio %.2fx"
              % (len(os.sched_getaffinity(0)), one, eight, eight / one))


if __name__ == "__main__":
    main()
