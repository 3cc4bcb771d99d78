"""TVM's graph executor API (tvm.contrib.graph_executor, v0.19), name for name:
create(graph_json_str, libmod, device) and GraphModule.

Where TVM was lenient gexec is strict: set_input with an unknown name raises KeyError
(gexec.NotFoundError), a tensor of the wrong shape raises ValueError
(gexec.InvalidArgumentError), a bad index IndexError. As in TVM, names given to
set_input(**params) that are not inputs of the graph are skipped (parameter
dictionaries carry more than one graph needs).

Values set_input converts as TVM's NDArray.copyfrom does: a Python number or list takes
the input's dtype (a number for a 0-d input is a 0-d array); a numpy array or scalar of
another dtype is converted where numpy's "same_kind" casting allows it (float64 to
float32, int64 to int32, int to float). Other dtypes (a float array for an int input,
where TVM would truncate silently; an NDArray or a __dlpack__ tensor of another dtype)
are refused with a ValueError that says how to convert them.

An input never given a value (neither set_input nor load_params) runs as zeros, as TVM
runs it (over memory it never initialised); create(..., zero_unset_inputs=False) makes
run() refuse it instead, naming the input.
"""

import numpy as np

from .. import _gexec
from .._device import Device, to_devices
from .._errors import InvalidArgumentError
from ..container import Map, ShapeTuple, String
from ..nd import NDArray, _as_input, _as_target, numpy_dtype
from ..runtime import BenchmarkResult, Module  # noqa: F401 (BenchmarkResult: TVM's name here too)

# The dtypes numpy holds as themselves, which set_input converts other numpy dtypes to.
_NUMPY_DTYPES = {"bool", "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
                 "uint32", "uint64"}

_TVM_FUNCTIONS = ("set_input", "set_input_zero_copy", "set_output_zero_copy", "run", "get_output", "get_input",
                  "get_num_outputs", "get_num_inputs", "get_input_index", "get_output_index", "get_input_info",
                  "get_output_info", "load_params", "share_params", "debug_get_output")


class ExecutorModule(Module):
    """The graph executor module that create() and lib["default"](dev) return, as TVM's
    GraphExecutor module: its functions are reached by name (module["run"]()); wrap it
    in GraphModule for the Python API."""

    type_key = "GraphExecutor"

    def __init__(self, executor):
        self._ex = executor

    def implements_function(self, name, query_imports=False):
        return name in _TVM_FUNCTIONS

    def get_function(self, name, query_imports=False):
        if name not in _TVM_FUNCTIONS:
            raise AttributeError("Module has no function '%s'" % name)
        return getattr(GraphModule(self), name)

    def _timed_call(self, func_name, args):
        if func_name == "run" and not args:
            return self._ex.benchmark
        return Module._timed_call(self, func_name, args)

    def __repr__(self):
        return "Module(GraphExecutor, %d inputs, %d outputs)" % (self._ex.num_inputs, self._ex.num_outputs)


# zero_unset_inputs defaults to True in TVM's API (create here, debug_executor.create,
# lib["default"] through runtime.load_module): TVM runs a graph whose inputs were never
# set, reading memory it allocated and never initialised, and its own tests do so (a graph
# compiled without its weights, benchmarked; a graph whose outputs use no input). Zeros
# make those runs work and deterministic, which reading uninitialised memory is not.
# gexec's own API (Model.load) keeps C++'s default, False: a forgotten set_input fails.
def create(graph_json_str, libmod, device, *, zero_unset_inputs=True):
    """A graph executor module from a graph JSON string, a kernel library
    (runtime.load_module) and a device or list of devices, as TVM's create; wrap it in
    GraphModule, or call it through module["name"]. ``zero_unset_inputs``: inputs never
    given a value run as zeros (True, the default, as TVM runs them) or make run() fail
    naming them (False)."""
    if not isinstance(graph_json_str, str):
        raise ValueError("Type %s is not supported for graph_json_str (a str is)" % type(graph_json_str).__name__)
    if not isinstance(libmod, Module) or not hasattr(libmod, "_lib"):
        raise TypeError("libmod must be a module from gexec.runtime.load_module, not %s" % type(libmod).__name__)
    ex = _gexec._create(graph_json_str, libmod._lib, to_devices(device), bool(zero_unset_inputs))
    return GraphModule(ExecutorModule(ex))


def _key(key):
    if isinstance(key, (bool, np.bool_)) or not isinstance(key, (int, str, np.integer)):
        raise TypeError("an input or output is named by a str or an int index, not %s" % type(key).__name__)
    return int(key) if isinstance(key, np.integer) else key


class GraphModule:
    """Wrapper over a graph executor module, as tvm.contrib.graph_executor.GraphModule.

    Attributes: module (the executor module). Outputs from get_output are views of the
    executor's memory: they stay valid after the GraphModule is gone, and change at
    its next run(); numpy() copies them out.
    """

    def __init__(self, module):
        if isinstance(module, GraphModule):
            module = module.module
        if not isinstance(module, ExecutorModule):
            raise TypeError("GraphModule wraps a graph executor module (lib['default'](dev) or create(...)), not %s"
                            % type(module).__name__)
        self.module = module
        ex = module._ex
        self._ex = ex
        self._run = ex.run
        self._get_output = ex.get_output
        self._set_input = ex.set_input

    def set_input(self, key=None, value=None, **params):
        """Copies ``value`` into input ``key`` (name or index), and each of ``params``
        into the input of that name (names that are not inputs are skipped, as in TVM)."""
        if key is not None:
            if value is None:
                raise TypeError("set_input: no value for input %r" % (key,))
            self._set_one(_key(key), value)
        for k, v in params.items():
            if self._ex.get_input_index(k) >= 0:
                self._set_one(k, v)

    def _set_one(self, key, value):
        # Python lists and numbers have no dtype of their own: they take the input's, as
        # TVM's copyfrom gives them, and keep their shape (a number is 0-d).
        if isinstance(value, (list, tuple, int, float)):
            value = np.array(value, dtype=numpy_dtype(self._ex.get_input(key).dtype))
        try:
            self._set_input(key, _as_input(value))
        except InvalidArgumentError as e:
            if e.code != "dtype_mismatch":
                raise
            self._set_input(key, _converted(value, self._ex.get_input(key).dtype, e))

    def set_input_zero_copy(self, key=None, value=None, **params):
        """Makes input ``key`` read ``value``'s memory directly (no copy): shape, dtype,
        device and 64-byte alignment must match, and a numpy array must be C-contiguous.
        The executor keeps ``value`` alive."""
        if key is not None:
            if value is None:
                raise TypeError("set_input_zero_copy: no value for input %r" % (key,))
            self._ex.set_input_zero_copy(_key(key), _as_target(value, "set_input_zero_copy", written=False))
        for k, v in params.items():
            if self._ex.get_input_index(k) >= 0:
                self._ex.set_input_zero_copy(k, _as_target(v, "set_input_zero_copy", written=False))

    def set_output_zero_copy(self, key, value):
        """Makes output ``key`` (an index, or a name as get_output_index takes) be written
        into ``value``'s memory."""
        key = _key(key)
        if isinstance(key, str):
            index = self._ex.get_output_index(key)
            if index < 0:
                raise KeyError("no output named %r" % key)
            key = index
        self._ex.set_output_zero_copy(key, _as_target(value, "set_output_zero_copy"))

    def run(self, **input_dict):
        """Runs the graph (set_input(**input_dict) first, if given). The GIL is released meanwhile."""
        if input_dict:
            self.set_input(**input_dict)
        self._run()

    def get_num_outputs(self):
        return self._ex.get_num_outputs()

    def get_num_inputs(self):
        return self._ex.get_num_inputs()

    def get_input(self, index, out=None):
        """Input ``index`` (or name): a view of the executor's memory, or copied into ``out``."""
        v = self._ex.get_input(_key(index))
        if out is not None:
            out.copyfrom(v)
            return out
        return v

    def get_input_index(self, name):
        """The index of input ``name``; -1 when the graph has none of that name, as TVM."""
        return self._ex.get_input_index(name)

    def get_output_index(self, name):
        return self._ex.get_output_index(name)

    def get_input_info(self):
        """(shape_dict, dtype_dict) of the inputs, as TVM's: Maps of name -> ShapeTuple and
        name -> String (a dict, a tuple and a str). As TVM's, they list every input but
        the parameters loaded into this executor (load_params, share_params): for an
        executor a single-file library made (lib["default"](dev), Model.load("model.so"))
        they list the library's parameters too."""
        return _info_maps(self._ex.tvm_input_info())

    def get_output_info(self):
        """(shape_dict, dtype_dict) of the outputs, named "node:i", as get_input_info's."""
        return _info_maps(self._ex.get_output_info())

    def get_output(self, index, out=None):
        """Output ``index``: a view of the executor's memory (valid after this module is
        gone, changed by the next run), or copied into ``out`` (NDArray or numpy), in place."""
        if out is not None:
            if isinstance(out, np.ndarray) and out.flags.writeable and not out.flags.c_contiguous:
                # a strided view or a Fortran-ordered array: written through a compact array
                compact = np.empty(out.shape, out.dtype)
                self._ex.copy_output_to(_key(index), _as_input(compact))
                out[...] = compact
            else:
                self._ex.copy_output_to(_key(index), _as_target(out, "get_output"))
            return out
        return self._get_output(index)

    def debug_get_output(self, node, out=None):
        """Runs the graph up to node ``node`` (name or node index) and returns a copy of its
        first output (or copies it into ``out``)."""
        node = _key(node)
        v = self._ex.debug_get_output(node, 0) if isinstance(node, str) else self._ex.debug_get_output_node(node)
        if out is not None:
            out.copyfrom(v)
            return out
        return v

    def load_params(self, params_bytes):
        """Copies the parameters in ``params_bytes`` (save_param_dict's bytes) whose names
        are inputs; on error nothing changes."""
        self._ex.load_params(_bytes(params_bytes))

    def share_params(self, other, params_bytes):
        """Reads the parameters named in ``params_bytes`` from ``other``'s memory (no copy)."""
        if not isinstance(other, GraphModule):
            raise TypeError("share_params: other must be a GraphModule, not %s" % type(other).__name__)
        self._ex.share_params(other._ex, _bytes(params_bytes))

    def __getitem__(self, key):
        return self.module[key]

    def benchmark(self, device, func_name="run", repeat=5, number=5, min_repeat_ms=None, limit_zero_time_iterations=100,
                  end_to_end=False, cooldown_interval_ms=0, repeats_to_cooldown=1, **kwargs):
        """Times ``func_name`` as TVM's benchmark does: one warm-up call, then ``repeat``
        measurements of ``number`` calls, ``number`` grown until one lasts
        ``min_repeat_ms``. ``end_to_end`` times setting ``kwargs`` as inputs, running and
        copying every output to the host. Returns a BenchmarkResult (seconds per call)."""
        if not isinstance(device, Device):
            raise TypeError("benchmark: device must be a gexec.Device, not %s" % type(device).__name__)
        opts = (int(repeat), int(number), int(0 if min_repeat_ms is None else min_repeat_ms),
                int(limit_zero_time_iterations), int(cooldown_interval_ms), int(repeats_to_cooldown))
        if end_to_end:
            def call():
                self.set_input(**kwargs)
                self._run()
                for i in range(self._ex.num_outputs):
                    self._ex.output_numpy(i)
            return BenchmarkResult(_gexec._benchmark_callable(call, *opts))
        if kwargs:
            self.set_input(**kwargs)
        return self.module.time_evaluator(func_name, device, repeat=repeat, number=number,
                                          min_repeat_ms=0 if min_repeat_ms is None else min_repeat_ms,
                                          limit_zero_time_iterations=limit_zero_time_iterations,
                                          cooldown_interval_ms=cooldown_interval_ms,
                                          repeats_to_cooldown=repeats_to_cooldown)()


def _info_maps(rows):
    shapes, dtypes = Map(), Map()
    for name, shape, dtype in rows:
        shapes[name] = ShapeTuple(shape)
        dtypes[name] = String(dtype)
    return shapes, dtypes


def _converted(value, dtype, error):
    """``value`` (refused by set_input for its dtype) as an array of ``dtype``, where numpy
    converts it without changing its kind (float64 to float32, int64 to int32, int to
    float), as TVM's copyfrom would; otherwise ``error`` again, saying how to convert it."""
    if isinstance(value, np.generic):
        value = np.asarray(value)
    if isinstance(value, np.ndarray) and dtype in _NUMPY_DTYPES:
        if value.dtype.kind != "V" and np.can_cast(value.dtype, dtype, "same_kind"):
            return value.astype(dtype, order="C")  # (np.ascontiguousarray would make a 0-d array 1-d)
        hint = "convert it with .astype(np.%s) if that is what you mean" % dtype
    else:
        hint = "convert it to %s first" % dtype
    raise InvalidArgumentError("%s; %s" % (error.message, hint), error.code, error.errno) from None


def _bytes(b):
    if isinstance(b, (bytearray, memoryview)):
        return bytes(b)
    if not isinstance(b, bytes):
        raise TypeError("expected bytes or bytearray (save_param_dict's), not %s" % type(b).__name__)
    return b
