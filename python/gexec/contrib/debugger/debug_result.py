"""What TVM's debug executor keeps and writes about a run (tvm.contrib.debugger.debug_result,
v0.19), name for name: DebugResult, a GraphModuleDebug's ``debug_datum``.

It holds the graph's nodes as the debugger shows them (each node's op is its function,
inputs and parameters are "param", its inputs are named, its dtype is under attrs.T and
its shape beside them), every node's outputs and times from the last run(), and writes
TVM's files: _tvmdbg_graph_dump.json, output_tensors.params and
_tvmdbg_execution_trace.json (a Chrome trace).
"""

import json
import os

import numpy as np

from ...runtime import save_param_dict

GRAPH_DUMP_FILE_NAME = "_tvmdbg_graph_dump.json"
CHROME_TRACE_FILE_NAME = "_tvmdbg_execution_trace.json"
OUTPUT_TENSORS_FILE_NAME = "output_tensors.params"


def _node_attrs(node):
    return node.get("attrs", node.get("attr", {}))


class DebugResult:
    """The debug data of one GraphModuleDebug: its graph (written to
    ``dump_path``/_tvmdbg_graph_dump.json when made), and after each run() the outputs
    (update_output_tensors) and per-node times (``_time_list``, seconds per repeat)."""

    def __init__(self, graph_json, dump_path):
        self._dump_path = dump_path
        self._output_tensor_list = []
        self._time_list = []
        graph = json.loads(graph_json)
        self._shapes_list = graph["attrs"]["shape"]
        self._dtype_list = graph["attrs"]["dltype"]
        self._nodes_list = self._debug_nodes(graph["nodes"])
        self._dump_graph_json(dict(graph, nodes=self._nodes_list))

    def _debug_nodes(self, nodes):
        shapes, dtypes = self._shapes_list[1], self._dtype_list[1]
        out, eid = [], 0
        for node in nodes:
            n = dict(node)
            n.pop("attr", None)
            if node["op"] == "null":
                attrs, n["op"], n["inputs"], num_outputs = {}, "param", [], 1
            else:
                attrs = dict(_node_attrs(node))
                n["op"] = attrs.get("func_name", node["op"])
                n["inputs"] = [nodes[i[0]]["name"] for i in node["inputs"]]
                num_outputs = int(attrs.get("num_outputs", "1"))
            attrs["T"] = "type: " + dtypes[eid]
            n["attrs"] = attrs
            n["shape"] = shapes[eid]
            out.append(n)
            eid += num_outputs
        return out

    def _dump_graph_json(self, graph):
        with open(os.path.join(self._dump_path, GRAPH_DUMP_FILE_NAME), "w") as f:
            json.dump(graph, f, indent=4, sort_keys=False)

    def get_graph_nodes(self):
        """The nodes, as the debugger shows them (see the module's docstring)."""
        return self._nodes_list

    def get_graph_node_shapes(self):
        """The graph's attrs.shape: ["list_shape", [shape per entry]]."""
        return self._shapes_list

    def get_graph_node_dtypes(self):
        """The graph's attrs.dltype: ["list_str", [dtype per entry]]."""
        return self._dtype_list

    def get_graph_node_output_num(self, node):
        """How many outputs ``node`` (one of get_graph_nodes()) has."""
        return 1 if node["op"] == "param" else int(node["attrs"].get("num_outputs", "1"))

    def update_output_tensors(self, tensors):
        """The outputs of the last run, every node's every output in graph order. They
        replace the earlier run's (TVM's appends to them, so that its second run dumps
        the first run's tensors)."""
        self._output_tensor_list = list(tensors)

    def get_output_tensors(self):
        """Every node's every output from the last run, keyed as TVM keys them:
        "<node>____topo-index:<i>____output-num:<j>"."""
        out, eid = {}, 0
        for i, node in enumerate(self._nodes_list):
            for j in range(self.get_graph_node_output_num(node)):
                out["%s____topo-index:%d____output-num:%d" % (node["name"], i, j)] = self._output_tensor_list[eid]
                eid += 1
        return out

    def dump_output_tensor(self):
        """Writes get_output_tensors() to ``dump_path``/output_tensors.params (TVM's format)."""
        with open(os.path.join(self._dump_path, OUTPUT_TENSORS_FILE_NAME), "wb") as f:
            f.write(save_param_dict(self.get_output_tensors()))

    def dump_chrome_trace(self):
        """Writes the nodes' mean times, one after another, as a Chrome trace."""
        events, start = [], 0.0
        for node, times in zip(self._nodes_list, self._time_list):
            mean = float(np.mean(times)) if len(times) else 0.0
            events.append({"ts": start * 1e6, "tid": 1, "pid": 1, "name": node["name"], "ph": "B"})
            events.append({"ts": (start + mean) * 1e6, "tid": 1, "pid": 1, "name": node["name"], "ph": "E"})
            start += mean
        with open(os.path.join(self._dump_path, CHROME_TRACE_FILE_NAME), "w") as f:
            json.dump({"displayTimeUnit": "ns", "traceEvents": events}, f)

    def get_debug_result(self, sort_by_time=True):
        """The per-node table TVM's debugger prints after run(): one row per output of
        each operator (parameters left out), the slowest first and a Total_time row
        when ``sort_by_time``."""
        header = ["Node Name", "Ops", "Time(us)", "Time(%)", "Shape", "Inputs", "Outputs", "Measurements(us)"]
        means = [float(np.mean(t)) if len(t) else 0.0 for t in self._time_list]
        total = sum(means)
        rows, eid = [], 0
        for node, times, mean in zip(self._nodes_list, self._time_list, means):
            for _ in range(self.get_graph_node_output_num(node)):
                if node["op"] != "param":
                    attrs = node["attrs"]
                    shape = self._output_tensor_list[eid].shape if eid < len(self._output_tensor_list) else ""
                    rows.append([node["name"], node["op"], round(mean * 1e6, 3),
                                 round(mean / total * 100, 3) if total else 0.0, str(shape),
                                 str(attrs.get("num_inputs", "")), str(attrs.get("num_outputs", "")),
                                 str([round(t * 1e6, 3) for t in times])])
                eid += 1
        if sort_by_time:
            rows.sort(key=lambda r: r[2], reverse=True)
            rows.append(["Total_time", "-", round(total * 1e6, 3), "-", "-", "-", "-", "-"])
        widths = [max([len(h)] + [len(str(r[i])) for r in rows]) + 2 for i, h in enumerate(header)]
        fmt = "".join("{:<%d}" % w for w in widths)
        lines = [fmt.format(*header), fmt.format(*["-" * len(h) for h in header])]
        lines += [fmt.format(*[str(c) for c in r]) for r in rows]
        return "\n".join(lines)

    def display_debug_result(self, sort_by_time=True):
        """Prints get_debug_result()."""
        print(self.get_debug_result(sort_by_time))
