"""Times TVM's own graph executor on the conformance models with a given thread count, for gexec_bench_threads.

    TVM_NUM_THREADS=N python tvm_threads.py CONFORMANCE_DIR N

Runs with the venv make_models.sh created (it has TVM). TVM sizes its thread pool from
TVM_NUM_THREADS when the pool is made, once per process, so gexec_bench_threads runs this
script once per thread count and machine condition (quiet, or beside its spinner). The
variable is set here too, before TVM is imported, so that a run by hand gets N threads.
Each model is loaded from its single file (lib["default"](dev)), given the same inputs as
gexec, and timed with time_evaluator: the median over repeats of the mean per run(), like
gexec_bench_threads' own figure. Prints one line of JSON, {model: seconds per run()}; a
model whose run() needs a runtime function this TVM lacks is left out.
"""
import json
import os
import sys


def main(conformance_dir, threads):
    os.environ["TVM_NUM_THREADS"] = str(threads)
    import numpy as np
    import tvm

    # A figure labelled N threads must come from N threads: TVM falls back on other
    # variables and on the core count where TVM_NUM_THREADS is not read.
    pool = tvm.get_global_func("runtime.NumThreads", allow_missing=True)
    if pool is not None and pool() != threads:
        raise SystemExit("TVM's pool has %d threads, not the %d asked for" % (pool(), threads))
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tvm_models"))
    from time_tvm import graph_modules

    dev = tvm.cpu(0)
    times = {}
    for name, module in graph_modules(conformance_dir, dev):
        # number=1 grown by min_repeat_ms: models of microseconds get many runs per repeat,
        # resnet (tens of ms a run) one, which keeps the four conditions within seconds.
        timer = module.module.time_evaluator("run", dev, number=1, repeat=7, min_repeat_ms=40)
        times[name] = float(np.median(np.array(timer().results)))
    print(json.dumps(times), flush=True)
    # Out without TVM's exit handlers: its pool's destructor joins workers that first spin
    # through 300000 sched_yield() calls before they see the stop, and a worker pinned to
    # the spinner's core waits out a time slice at each one: minutes, for no figure.
    os._exit(0)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: tvm_threads.py CONFORMANCE_DIR THREADS")
    main(sys.argv[1], int(sys.argv[2]))
