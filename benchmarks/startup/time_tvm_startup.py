"""TVM's own start-up, for gexec_bench_startup: one start-up in this fresh interpreter.

    python time_tvm_startup.py single|split MODEL_DIR SPAWN_NS

single: tvm.runtime.load_module(model.so), then GraphModule(lib["default"](dev)).
split: graph.json read, load_module(lib.so), graph_executor.create, load_params of the
bytes of params.bin. Then set_input (inputs.bin, read before the clock starts) and two
runs. Prints "key ms ..." on one line: interp is the interpreter's own start (SPAWN_NS,
the parent's CLOCK_MONOTONIC at spawn, to this script's first line), import is
`import tvm`, total counts from after the import to the end of the first run.
"""
import time

script_start = time.monotonic_ns()

import os  # noqa: E402
import sys  # noqa: E402


def peak_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e6
    return 0.0


def main(form, model_dir, spawned_ns):
    out = {"interp": (script_start - spawned_ns) / 1e6}
    before = time.monotonic_ns()
    import tvm
    from tvm.contrib import graph_executor

    out["import"] = (time.monotonic_ns() - before) / 1e6
    dev = tvm.cpu(0)
    with open(os.path.join(model_dir, "inputs.bin"), "rb") as f:
        inputs = tvm.runtime.load_param_dict(f.read())

    start = last = time.monotonic_ns()

    def lap(step):
        nonlocal last
        now = time.monotonic_ns()
        out[step] = (now - last) / 1e6
        last = now

    if form == "single":
        lib = tvm.runtime.load_module(os.path.join(model_dir, "model.so"))
        lap("library")
        module = graph_executor.GraphModule(lib["default"](dev))
        lap("create")
    else:
        with open(os.path.join(model_dir, "graph.json")) as f:
            graph_json = f.read()
        lap("graph")
        lib = tvm.runtime.load_module(os.path.join(model_dir, "lib.so"))
        lap("library")
        module = graph_executor.create(graph_json, lib, dev)
        lap("create")
        with open(os.path.join(model_dir, "params.bin"), "rb") as f:
            module.load_params(bytearray(f.read()))
        lap("weights")
    for name, value in inputs.items():
        module.set_input(name, value)
    lap("inputs")
    module.run()
    lap("first")
    out["total"] = (last - start) / 1e6
    module.run()
    lap("second")
    out["hwm_mb"] = peak_mb()
    print(" ".join("%s %.4f" % (k, v) for k, v in out.items()), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
