"""TVM's debug executor (tvm.contrib.debugger.debug_executor, v0.19), name for name:
create(graph_json_str, libmod, device, dump_root=None) and GraphModuleDebug, whose
debug_datum is debug_result.DebugResult (get_graph_nodes, get_debug_result, ...); a
single-file library's lib["debug_create"]("default", dev) makes the module
GraphModuleDebug wraps, as TVM's factory does.

run() times every node alone, copies every node's outputs from one run and writes, in
<dump_root>/_tvmdbg_device_CPU_0/, TVM's files: output_tensors.params (every node's
every output, keyed "<node>____topo-index:<i>____output-num:<j>", parameters and inputs
included), _tvmdbg_graph_dump.json and _tvmdbg_execution_trace.json (Chrome trace).
"""

import os
import shutil
import tempfile

from ... import _gexec
from ..._device import to_devices
from ..._errors import OutOfRangeError
from ...runtime import Module
from ..graph_executor import BenchmarkResult, ExecutorModule, GraphModule
from . import debug_result
from .debug_result import CHROME_TRACE_FILE_NAME, GRAPH_DUMP_FILE_NAME  # noqa: F401 (TVM's names)

_DUMP_ROOT_PREFIX = "tvmdbg_"
_DUMP_PATH_PREFIX = "_tvmdbg_"


class DebugExecutorModule(ExecutorModule):
    """The executor module lib["debug_create"]("default", dev) returns, as TVM's
    GraphExecutorDebug module: wrap it in GraphModuleDebug (with the devices and the
    graph JSON), or call its functions by name."""

    type_key = "GraphExecutorDebug"


def create(graph_json_str, libmod, device, dump_root=None, *, zero_unset_inputs=True):
    """A GraphModuleDebug over ``graph_json_str`` and ``libmod`` on ``device``; its dumps go
    under ``dump_root`` (a new temporary folder when None). As TVM's, the parameters a
    single-file ``libmod`` carries are set as inputs. ``zero_unset_inputs`` as
    graph_executor.create's (inputs never set run as zeros, as TVM runs them)."""
    if not isinstance(graph_json_str, str):
        raise ValueError("Type %s is not supported for graph_json_str (a str is)" % type(graph_json_str).__name__)
    if not isinstance(libmod, Module) or not hasattr(libmod, "_lib"):
        raise TypeError("libmod must be a module from gexec.runtime.load_module, not %s" % type(libmod).__name__)
    devices = device if isinstance(device, (list, tuple)) else [device]
    ex = _gexec._create(graph_json_str, libmod._lib, to_devices(devices), bool(zero_unset_inputs))
    gmod = GraphModuleDebug(DebugExecutorModule(ex), devices, graph_json_str, dump_root)
    if libmod._lib.is_factory:
        gmod.set_input(**libmod["get_graph_params"]())
    return gmod


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
    """A GraphModule that also times each node and dumps each node's outputs, as TVM's:
    GraphModuleDebug(module, device, graph_json_str, dump_root), where module is
    create()'s or lib["debug_create"]("default", dev)'s. ``debug_datum`` (a
    debug_result.DebugResult) holds the graph's nodes as the debugger shows them, and
    after run() every node's outputs and times."""

    def __init__(self, module, device, graph_json_str, dump_root):
        GraphModule.__init__(self, module)
        self._dump_root = dump_root
        devices = device if isinstance(device, (list, tuple)) else [device]
        if not self._dump_root:
            self._dump_root = tempfile.mkdtemp(prefix=_DUMP_ROOT_PREFIX)
        name = repr(devices[0]).upper().replace("(", ":").replace(")", "")  # cpu(0) -> CPU:0
        self._dump_path = os.path.join(self._dump_root, _DUMP_PATH_PREFIX + "device_" + name.replace(":", "_"))
        os.makedirs(self._dump_path, 0o700, exist_ok=True)
        self.debug_datum = debug_result.DebugResult(graph_json_str, self._dump_path)

    @property
    def dump_root(self):
        return self._dump_root

    @property
    def dump_path(self):
        return self._dump_path

    def get_output_tensors(self):
        """Every node's every output from the last run(), keyed as TVM keys them."""
        return self.debug_datum.get_output_tensors()

    def _run_per_layer(self):
        self.debug_datum.update_output_tensors([value for _, _, value in self._ex.debug_get_outputs()])

    def get_debug_result(self, sort_by_time=True):
        """The per-node table TVM's debugger prints after run() (debug_datum's)."""
        return self.debug_datum.get_debug_result(sort_by_time)

    def display_debug_result(self, sort_by_time=True):
        self.debug_datum.display_debug_result(sort_by_time)

    def run(self, number=10, repeat=1, min_repeat_ms=1, limit_zero_time_iterations=100, cooldown_interval_ms=0,
            repeats_to_cooldown=1, sort_by_time=True, **input_dict):
        """Times every node alone, takes every node's outputs from one run, writes the dump
        folder and prints the per-node table, as TVM's debug run()."""
        if input_dict:
            self.set_input(**input_dict)
        self.debug_datum._time_list = self.run_individual(number, repeat, min_repeat_ms, limit_zero_time_iterations,
                                                          cooldown_interval_ms, repeats_to_cooldown)
        self._run_per_layer()
        self.debug_datum.dump_output_tensor()
        self.debug_datum.dump_chrome_trace()
        self.display_debug_result(sort_by_time)

    def run_individual(self, number, repeat=1, min_repeat_ms=0, limit_zero_time_iterations=100, cooldown_interval_ms=0,
                       repeats_to_cooldown=1):
        """Seconds per call of each node run alone: one list of ``repeat`` figures per node."""
        return self._ex.run_individual(int(repeat), int(number), int(min_repeat_ms), int(limit_zero_time_iterations),
                                       int(cooldown_interval_ms), int(repeats_to_cooldown))

    def run_individual_node(self, index, number=10, repeat=1, min_repeat_ms=0, limit_zero_time_iterations=100,
                            cooldown_interval_ms=0, repeats_to_cooldown=1):
        """Node ``index`` alone, as a BenchmarkResult (reads what the last run left in its inputs).
        An index past the last node is OutOfRangeError (gexec.Error and IndexError; TVM's TVMError)."""
        try:
            times = self._ex.run_individual_node(int(index), int(repeat), int(number), int(min_repeat_ms),
                                                 int(limit_zero_time_iterations), int(cooldown_interval_ms),
                                                 int(repeats_to_cooldown))
        except IndexError as e:
            raise OutOfRangeError(str(e), "invalid_argument") from None
        return BenchmarkResult(times)

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
