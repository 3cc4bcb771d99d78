"""Times TVM's own Relax VM on the Relax suite's libraries, for gexec_bench_relax.

    TVM_NUM_THREADS=N python time_tvm_vm.py SUITE_DIR OUT_JSON CASE...

Runs with the venv tests/tvm_ffi/make_kernels.sh created (apache-tvm 0.27). Each case's
library is loaded (tvm.runtime.load_module), given the inputs of its .npz (and its
weights, for a case with a parameter file) and timed with
vm.time_evaluator(function, number=10, repeat=5, min_repeat_ms=50): the settings
gexec_bench_relax uses for gexec. Writes {case: {"median_us", "min_us"}}.
"""
import json
import os
import sys

import numpy as np
import tvm
from tvm import relax


def main(suite, out_path, names):
    dev = tvm.cpu(0)
    cases = {}
    with open(os.path.join(suite, "manifest.json")) as f:
        for c in json.load(f)["cases"]:
            cases.setdefault(c["name"], c)
    times = {}
    for name in names:
        c = cases[name]
        vm = relax.VirtualMachine(tvm.runtime.load_module(os.path.join(suite, c["library"])), dev)
        data = np.load(os.path.join(suite, c["data"]))
        args = [tvm.runtime.tensor(data["in%d" % i]) for i in range(c["inputs"])]
        if "params" in c and c["params"].endswith(".params"):
            with open(os.path.join(suite, c["params"]), "rb") as f:
                args += list(tvm.runtime.load_param_dict(f.read()).values())
        timer = vm.time_evaluator(c["function"], dev, number=10, repeat=5, min_repeat_ms=50)
        result = timer(*args)
        times[name] = {"median_us": result.median * 1e6, "min_us": min(result.results) * 1e6}
    with open(out_path, "w") as f:
        json.dump(times, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
