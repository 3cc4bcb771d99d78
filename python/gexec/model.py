"""gexec.Model: a model loaded once (weights, plan, kernels) and instantiated once per
thread; beyond TVM's Python API."""

import os

from . import _gexec
from ._device import cpu, to_devices
from .contrib.graph_executor import ExecutorModule, GraphModule
from .runtime import _require_file


class Model:
    """A graph bound to its kernels, planned, with its parameters loaded once. Immutable
    and shared: ``instantiate()`` makes a GraphModule holding only its activations, one
    per thread; their run() calls release the GIL and run in parallel.

    ``Model.load("model.so")`` (export_library's single file) or
    ``Model.load(("graph.json", "lib.so", "params.bin"))``; ``num_threads`` gives the
    model a thread pool of its own for the kernels' parallel loops, ``planner``
    ("as_compiled", "liveness") and ``policy`` ("sequential", "parallel") choose by name.
    ``device`` is a Device or a list of them, as for graph_executor.create: the host by
    default; ``gexec.cuda(0)`` runs a CUDA model's device entries on that GPU (a
    heterogeneous graph's host entries need ``gexec.cpu(0)`` in the list too).
    ``zero_unset_inputs=True`` runs an input no one gave a value as zeros; by default
    run() refuses it, naming the input (C++'s model_options::zero_unset_inputs and its
    default: this is gexec's own API, where a forgotten set_input is a mistake to report;
    TVM's API, graph_executor.create and lib["default"], runs such graphs as TVM does).
    ``donate_inputs=True`` donates each run its inputs, as JAX's ``donate_argnums``: an
    input that is neither a parameter nor an output is held in the activation storage
    and its bytes reused once its last reader ran, so a run uses it up: set it again
    before the next run (get_input of it, or a run without it, raises); an input bound
    with set_input_zero_copy is read in place and never used up. Not with
    ``zero_unset_inputs=True`` (C++'s model_options::donate_inputs).
    A missing file is FileNotFoundError.
    """

    def __init__(self, base):
        self._m = base

    @staticmethod
    def load(path_or_three_files, num_threads=None, planner=None, policy=None, zero_unset_inputs=False, device=None,
             donate_inputs=False):
        if num_threads is not None and (isinstance(num_threads, bool) or not isinstance(num_threads, int)):
            raise TypeError("num_threads must be an int")
        for what, v in (("planner", planner), ("policy", policy)):
            if v is not None and not isinstance(v, str):
                raise TypeError("%s must be a str naming it" % what)
        zero = bool(zero_unset_inputs)
        donate = bool(donate_inputs)
        devices = to_devices(cpu(0) if device is None else device)
        if isinstance(path_or_three_files, (str, os.PathLike)):
            path = os.fspath(path_or_three_files)
            _require_file(path)
            return Model(_gexec.ModelBase.load_single(path, devices, num_threads, planner, policy, zero, donate))
        if isinstance(path_or_three_files, (list, tuple)) and len(path_or_three_files) == 3:
            g, lib, params = (os.fspath(p) for p in path_or_three_files)
            for path in (g, lib, params):
                _require_file(path)
            return Model(_gexec.ModelBase.load_three(g, lib, params, devices, num_threads, planner, policy, zero, donate))
        raise TypeError("Model.load takes a single-file library path or (graph.json, lib.so, params.bin)")

    def instantiate(self):
        """A new GraphModule over this model: its own activations, the model's weights."""
        return GraphModule(ExecutorModule(self._m.instantiate()))

    @property
    def param_bytes(self):
        return self._m.param_bytes

    @property
    def policy(self):
        return self._m.policy or "sequential"
