"""Every node's outputs against a dump of TVM's debug executor, in graph order, and the
first node where they part: the check that a model moved from TVM to gexec still computes
what it computed there.

    from gexec.contrib import graph_executor
    m = graph_executor.GraphModule(lib["default"](gexec.cpu(0)))
    c = gexec.compare_dump(m, "tvmdbg/", atol=1e-5)   # TVM's dump_root after a run
    print(c)                                          # the table, and the first divergence
    assert c.equal, c.first_divergence["name"]
"""

from .contrib.graph_executor import ExecutorModule, GraphModule


class DumpComparison:
    """The result of compare_dump: ``nodes`` (one dict per node output, in graph order:
    node_id, index, name, func_name, key, dtype, shape, inputs, found, problem, count,
    mismatched, first_mismatch, max_abs, max_rel, max_ulps (None for integers), within),
    ``first_divergence`` (one of them, or None), ``missing`` (node outputs the dump lacks),
    ``complete`` (it lacks none), ``equal`` (complete, and no divergence),
    ``inputs_from_dump`` and ``file``."""

    def __init__(self, file, taken, rows, first, table, described):
        self.file = file
        self.inputs_from_dump = list(taken)
        self.nodes = [dict(r, shape=tuple(r["shape"])) for r in rows]
        self.first_divergence = self.nodes[first] if first >= 0 else None
        self._table = table
        self._described = described

    @property
    def missing(self):
        return sum(1 for n in self.nodes if not n["found"])

    @property
    def complete(self):
        return self.missing == 0

    @property
    def equal(self):
        return self.complete and self.first_divergence is None

    def table(self):
        return self._table

    def __str__(self):
        if self.first_divergence is None and not self.complete:
            return self._table + "INCOMPLETE: the dump lacks %d of %d node outputs; the %d it holds agree\n" % (
                self.missing, len(self.nodes), len(self.nodes) - self.missing)
        if self.first_divergence is None:
            return self._table + "every node the dump holds agrees\n"
        return self._table + "first divergence at " + self._described

    def __repr__(self):
        return "DumpComparison(%d node outputs, %s)" % (
            len(self.nodes), "equal" if self.equal else "first divergence at node %d" % self.first_divergence["node_id"])


def compare_dump(module, dump_dir, atol=0.0, rtol=0.0, inputs_from_dump=True):
    """Runs ``module`` (a GraphModule or graph executor module) once, node by node, and
    compares every node's every output with TVM's dump: ``dump_dir`` is the dump_root given
    to TVM's ``debug_executor.create``, its ``_tvmdbg_device_*`` folder, or the
    ``output_tensors.params`` in it. With ``inputs_from_dump`` the graph's inputs are set
    from the dump's first; otherwise the module runs with the inputs it holds."""
    if isinstance(module, GraphModule):
        module = module.module
    if not isinstance(module, ExecutorModule):
        raise TypeError("compare_dump compares a graph executor module or GraphModule, not %s" % type(module).__name__)
    return DumpComparison(*module._ex.compare_dump(str(dump_dir), float(atol), float(rtol), bool(inputs_from_dump)))
