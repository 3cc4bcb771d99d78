"""TVM's debug executor (tvm.contrib.debugger.debug_executor, v0.19), name for name:
create(graph_json_str, libmod, device, dump_root=None) and GraphModuleDebug.

run() times every node alone, copies every node's outputs from one run and writes, in
<dump_root>/_tvmdbg_device_CPU_0/, TVM's files: output_tensors.params (every node's
every output, keyed "<node>____topo-index:<i>____output-num:<j>", parameters and inputs
included), _tvmdbg_graph_dump.json and _tvmdbg_execution_trace.json (Chrome trace).
"""

import json
import os
import shutil
import tempfile

import numpy as np

from ... import _gexec
from ..._device import to_devices
from ...runtime import Module, save_param_dict
from ..graph_executor import BenchmarkResult, ExecutorModule, GraphModule

_DUMP_ROOT_PREFIX = "tvmdbg_"
_DUMP_PATH_PREFIX = "_tvmdbg_"
GRAPH_DUMP_FILE_NAME = "_tvmdbg_graph_dump.json"
CHROME_TRACE_FILE_NAME = "_tvmdbg_execution_trace.json"


def create(graph_json_str, libmod, device, dump_root=None):
    """A GraphModuleDebug over ``graph_json_str`` and ``libmod`` on ``device``; its dumps go
    under ``dump_root`` (a new temporary folder when None)."""
    if not isinstance(graph_json_str, str):
        raise ValueError("Type %s is not supported for graph_json_str (a str is)" % type(graph_json_str).__name__)
    if not isinstance(libmod, Module) or not hasattr(libmod, "_lib"):
        raise TypeError("libmod must be a module from gexec.runtime.load_module, not %s" % type(libmod).__name__)
    devices = device if isinstance(device, (list, tuple)) else [device]
    module = ExecutorModule(_gexec._create(graph_json_str, libmod._lib, to_devices(devices)))
    return GraphModuleDebug(module, devices, graph_json_str, dump_root)


class ProfileReport:
    """What profile() returns: the per-node table (TVM's debug table and per-function totals)."""

    def __init__(self, table, run_time):
        self._table = table
        self.run_time = run_time

    def table(self, sort=True, aggregate=True, col_sums=True):
        return self._table

    def __str__(self):
        return self._table


class GraphModuleDebug(GraphModule):
    """A GraphModule that also times each node and dumps each node's outputs."""

    def __init__(self, module, device, graph_json_str, dump_root):
        GraphModule.__init__(self, module)
        self._dump_root = dump_root
        self._graph = json.loads(graph_json_str)
        devices = device if isinstance(device, (list, tuple)) else [device]
        if not self._dump_root:
            self._dump_root = tempfile.mkdtemp(prefix=_DUMP_ROOT_PREFIX)
        name = repr(devices[0]).upper().replace("(", ":").replace(")", "")  # cpu(0) -> CPU:0
        self._dump_path = os.path.join(self._dump_root, _DUMP_PATH_PREFIX + "device_" + name.replace(":", "_"))
        os.makedirs(self._dump_path, 0o700, exist_ok=True)
        self._time_list = []
        self._outputs = []
        self._dump_graph_json()

    @property
    def dump_root(self):
        return self._dump_root

    @property
    def dump_path(self):
        return self._dump_path

    def _nodes(self):
        return self._graph["nodes"]

    def _num_outputs(self, node):
        return 1 if node["op"] == "null" else int(node.get("attrs", node.get("attr", {})).get("num_outputs", "1"))

    def _dump_graph_json(self):
        # The graph as TVM's debugger writes it: each node's op is its function (inputs and
        # parameters are "param"), its inputs by name, its dtype under attrs.T and its shape.
        shapes, dtypes = self._graph["attrs"]["shape"][1], self._graph["attrs"]["dltype"][1]
        nodes, eid = [], 0
        for node in self._nodes():
            n = dict(node)
            attrs = dict(node.get("attrs", node.get("attr", {})))
            if node["op"] == "null":
                attrs, n["op"], inputs = {}, "param", []
            else:
                n["op"] = attrs.get("func_name", node["op"])
                inputs = [self._nodes()[i[0]]["name"] for i in node["inputs"]]
            n["inputs"] = inputs
            attrs["T"] = "type: " + dtypes[eid]
            n["attrs"] = attrs
            n["shape"] = shapes[eid]
            nodes.append(n)
            eid += self._num_outputs(node)
        with open(os.path.join(self._dump_path, GRAPH_DUMP_FILE_NAME), "w") as f:
            json.dump(dict(self._graph, nodes=nodes), f, indent=4, sort_keys=False)

    def get_output_tensors(self):
        """Every node's every output from the last run(), keyed as TVM keys them."""
        out = {}
        for node_id, index, value in self._outputs:
            out["%s____topo-index:%d____output-num:%d" % (self._nodes()[node_id]["name"], node_id, index)] = value
        return out

    def _run_per_layer(self):
        self._outputs = self._ex.debug_get_outputs()

    def _dump_output_tensor(self):
        with open(os.path.join(self._dump_path, "output_tensors.params"), "wb") as f:
            f.write(save_param_dict(self.get_output_tensors()))

    def _dump_chrome_trace(self):
        events, start = [], 0.0
        for node, times in zip(self._nodes(), self._time_list):
            mean = float(np.mean(times)) if len(times) else 0.0
            events.append({"name": node["name"], "ph": "B", "ts": start * 1e6, "pid": 1, "tid": 1})
            events.append({"name": node["name"], "ph": "E", "ts": (start + mean) * 1e6, "pid": 1, "tid": 1})
            start += mean
        with open(os.path.join(self._dump_path, CHROME_TRACE_FILE_NAME), "w") as f:
            json.dump({"displayTimeUnit": "ns", "traceEvents": events}, f)

    def get_debug_result(self, sort_by_time=True):
        """The per-node table TVM's debugger prints after run()."""
        header = ["Node Name", "Ops", "Time(us)", "Time(%)", "Shape", "Inputs", "Outputs", "Measurements(us)"]
        total = sum(float(np.mean(t)) for t in self._time_list) if self._time_list else 0.0
        rows, shapes = [], {(nid, j): v.shape for nid, j, v in self._outputs}
        for nid, (node, times) in enumerate(zip(self._nodes(), self._time_list)):
            if node["op"] == "null":
                continue
            attrs = node.get("attrs", node.get("attr", {}))
            mean = float(np.mean(times))
            for j in range(self._num_outputs(node)):
                rows.append([node["name"], attrs.get("func_name", node["op"]), round(mean * 1e6, 3),
                             round(mean / total * 100, 3) if total else 0.0, str(shapes.get((nid, j), "")),
                             str(attrs.get("num_inputs", "")), str(attrs.get("num_outputs", "")),
                             str([round(t * 1e6, 3) for t in times])])
        if sort_by_time:
            rows.sort(key=lambda r: r[2], reverse=True)
            rows.append(["Total_time", "-", round(total * 1e6, 3), "-", "-", "-", "-", "-"])
        widths = [max([len(h)] + [len(str(r[i])) for r in rows]) + 2 for i, h in enumerate(header)]
        fmt = "".join("{:<%d}" % w for w in widths)
        lines = [fmt.format(*header), fmt.format(*["-" * len(h) for h in header])]
        lines += [fmt.format(*[str(c) for c in r]) for r in rows]
        return "\n".join(lines)

    def display_debug_result(self, sort_by_time=True):
        print(self.get_debug_result(sort_by_time))

    def run(self, number=10, repeat=1, min_repeat_ms=1, limit_zero_time_iterations=100, cooldown_interval_ms=0,
            repeats_to_cooldown=1, sort_by_time=True, **input_dict):
        """Times every node alone, takes every node's outputs from one run, writes the dump
        folder and prints the per-node table, as TVM's debug run()."""
        if input_dict:
            self.set_input(**input_dict)
        self._time_list = self.run_individual(number, repeat, min_repeat_ms, limit_zero_time_iterations,
                                              cooldown_interval_ms, repeats_to_cooldown)
        self._run_per_layer()
        self._dump_output_tensor()
        self._dump_chrome_trace()
        self.display_debug_result(sort_by_time)

    def run_individual(self, number, repeat=1, min_repeat_ms=0, limit_zero_time_iterations=100, cooldown_interval_ms=0,
                       repeats_to_cooldown=1):
        """Seconds per call of each node run alone: one list of ``repeat`` figures per node."""
        return self._ex.run_individual(int(repeat), int(number), int(min_repeat_ms), int(limit_zero_time_iterations),
                                       int(cooldown_interval_ms), int(repeats_to_cooldown))

    def run_individual_node(self, index, number=10, repeat=1, min_repeat_ms=0, limit_zero_time_iterations=100,
                            cooldown_interval_ms=0, repeats_to_cooldown=1):
        """Node ``index`` alone, as a BenchmarkResult (reads what the last run left in its inputs)."""
        return BenchmarkResult(self._ex.run_individual_node(int(index), int(repeat), int(number), int(min_repeat_ms),
                                                            int(limit_zero_time_iterations), int(cooldown_interval_ms),
                                                            int(repeats_to_cooldown)))

    def profile(self, collectors=None, **input_dict):
        """Per-node times measured inside whole runs; ``collectors`` are not supported."""
        if collectors:
            raise ValueError("profile: metric collectors are not supported")
        if input_dict:
            self.set_input(**input_dict)
        table, run_time = self._ex.profile_table(3, 3, 1)
        return ProfileReport(table, run_time)

    def exit(self):
        """Removes the dump folder and everything in it."""
        if os.path.isdir(self._dump_root):
            shutil.rmtree(self._dump_root)
