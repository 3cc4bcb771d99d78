"""Times TVM's own graph executor on the conformance models, for gexec_bench_tvm_models.

    python time_tvm.py CONFORMANCE_DIR OUT_JSON

Runs with the venv make_models.sh created (it has TVM). Each model is loaded from its
single file (lib["default"](dev)), given the same inputs as gexec, and timed with
time_evaluator("run", number=10, repeat=5, min_repeat_ms=50): the settings
gexec_bench_tvm_models uses for gexec. Writes {model: {"mean_ms", "median_ms"}}.
"""
import json
import os
import sys

import numpy as np
import tvm
from tvm.contrib import graph_executor


def graph_modules(conformance_dir, dev):
    """(name, GraphModule) per conformance model, from its single file, given gexec's
    inputs and run once; a model whose run() needs a runtime function this TVM lacks is
    left out (gexec's figure stands alone). Also used by benchmarks/threads/tvm_threads.py."""
    with open(os.path.join(conformance_dir, "manifest.json")) as f:
        models = json.load(f)["models"]
    for name in models:
        model_dir = os.path.join(conformance_dir, name)
        module = graph_executor.GraphModule(tvm.runtime.load_module(os.path.join(model_dir, "model.so"))["default"](dev))
        with open(os.path.join(model_dir, "inputs.bin"), "rb") as f:
            for key, value in tvm.runtime.load_param_dict(f.read()).items():
                module.set_input(key, value)
        try:
            module.run()
        except tvm.TVMError:
            continue
        yield name, module


def main(conformance_dir, out_path):
    dev = tvm.cpu(0)
    times = {}
    for name, module in graph_modules(conformance_dir, dev):
        timer = module.module.time_evaluator("run", dev, number=10, repeat=5, min_repeat_ms=50)
        results = np.array(timer().results) * 1e3
        times[name] = {"mean_ms": float(results.mean()), "median_ms": float(np.median(results))}
        print("tvm %-14s mean %.6f ms" % (name, times[name]["mean_ms"]), flush=True)
    with open(out_path, "w") as f:
        json.dump({"tvm_version": tvm.__version__, "models": times}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
