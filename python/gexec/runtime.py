"""Modules and parameter files, as tvm.runtime: load_module, Module, save_param_dict,
load_param_dict, num_threads, the NDArray and Device types, and the containers TVM's
functions return (runtime.container: String, ShapeTuple)."""

import errno
import os

import numpy as np

from . import _gexec, container
from ._device import Device, cpu, cuda, device, to_devices  # noqa: F401 (re-exported as in tvm.runtime)
from ._errors import FileNotFound, NotFoundError
from .container import ShapeTuple, String
from .nd import NDArray, _as_input, array

__all__ = ["Module", "BenchmarkResult", "load_module", "save_param_dict", "load_param_dict", "save_param_dict_to_file",
           "load_param_dict_from_file", "num_threads", "NDArray", "Device", "device", "cpu", "cuda", "container",
           "String", "ShapeTuple"]


def num_threads():
    """The threads of the pool that runs kernels' parallel loops, as tvm.runtime.num_threads:
    GEXEC_NUM_THREADS, else TVM_NUM_THREADS, else the cores this process may use (its
    affinity mask, capped by its cgroup's CPU quota)."""
    return _gexec._num_threads()


def _require_file(path):
    """FileNotFoundError, as open() raises it, for a path that is not there."""
    if not os.path.exists(path):
        raise FileNotFound(errno.ENOENT, os.strerror(errno.ENOENT), path)


class Module:
    """A loaded kernel library, as tvm.runtime.Module.

    A library made by TVM's ``export_library`` carries the graph and the parameters:
    ``lib["default"](dev)`` makes a graph executor module over them (wrap it in
    ``graph_executor.GraphModule``), ``lib["get_graph_json"]()`` and
    ``lib["get_graph_params"]()`` return what it carries. A library holding kernels only
    (``lib.so`` beside ``graph.json``) is passed to ``graph_executor.create``.
    """

    type_key = "library"

    def __init__(self, lib, zero_unset_inputs=True):
        self._lib = lib
        self._zero_unset_inputs = zero_unset_inputs

    @property
    def path(self):
        return self._lib.path

    @property
    def imported_modules(self):
        return []

    def _factory_function(self, name):
        lib = self._lib
        if not lib.is_factory:
            return None
        if name == lib.module_name():
            return self._create_executor
        if name == "debug_create":
            def debug_create(module_name, *devices):
                if module_name != lib.module_name():
                    raise ValueError("debug_create: the library holds the model %r, not %r" % (lib.module_name(), module_name))
                from .contrib.debugger.debug_executor import DebugExecutorModule
                return self._create_executor(*devices, module_type=DebugExecutorModule)
            return debug_create
        if name == "get_graph_json":
            return lib.graph_json
        if name in ("get_graph_params", "get_params"):
            return lambda: container.Map(lib.graph_params())
        return None

    def _create_executor(self, *devices, module_type=None):
        # lib["default"](dev): an executor over the embedded graph, its parameters set
        if len(devices) == 1 and isinstance(devices[0], (list, tuple)):
            devices = devices[0]
        if module_type is None:
            from .contrib.graph_executor import ExecutorModule as module_type
        return module_type(self._lib.factory_create(to_devices(list(devices) or [cpu(0)]), self._zero_unset_inputs))

    def implements_function(self, name, query_imports=False):
        return self._factory_function(name) is not None or self._lib.has_function(name)

    def get_function(self, name, query_imports=False):
        """The function ``name``: for a single-file library, the module name ("default"),
        "debug_create" ("default", dev: an executor for debug_executor.GraphModuleDebug),
        "get_graph_json" and "get_graph_params"; otherwise the kernel of that name, a
        PackedFunc called as TVM's are (``lib["add"](a, b, c)`` with NDArrays, numbers or
        strings; host tensors)."""
        if not isinstance(name, str):
            raise TypeError("function name must be a str, not %s" % type(name).__name__)
        f = self._factory_function(name)
        if f is not None:
            return f
        if self._lib.has_function(name):
            return PackedFunc(self._lib, name)
        raise AttributeError("Module has no function '%s'" % name)

    def __getitem__(self, name):
        return self.get_function(name)

    def __call__(self, *args):
        """Calls the library's entry function (the one its "__tvm_main__" names), as TVM's
        Module does: ``tvm.build`` of one function, then ``m(a, b)``."""
        return self.get_function("__tvm_main__")(*args)

    def time_evaluator(self, func_name, dev, number=10, repeat=1, min_repeat_ms=0, limit_zero_time_iterations=100,
                       cooldown_interval_ms=0, repeats_to_cooldown=1, cache_flush_bytes=0, f_preproc=""):
        """A function that times ``func_name`` called with the arguments it is given, as
        TVM's: one warm-up call, then ``repeat`` measurements of ``number`` calls
        (``number`` grown until one lasts ``min_repeat_ms``), a cooldown of
        ``cooldown_interval_ms`` after every ``repeats_to_cooldown`` measurements. It
        returns a BenchmarkResult (seconds per call). ``cache_flush_bytes`` and
        ``f_preproc`` (cache flushing between calls) are not supported."""
        if not isinstance(dev, Device):
            raise TypeError("time_evaluator: dev must be a gexec.Device, not %s" % type(dev).__name__)
        if cache_flush_bytes or f_preproc:
            raise ValueError("time_evaluator: cache_flush_bytes and f_preproc are not supported")
        self.get_function(func_name)  # a missing function fails here, as in TVM
        opts = (int(repeat), int(number), int(min_repeat_ms), int(limit_zero_time_iterations),
                int(cooldown_interval_ms), int(repeats_to_cooldown))

        def evaluator(*args):
            return BenchmarkResult(self._timed_call(func_name, args)(*opts))

        return evaluator

    def _timed_call(self, func_name, args):
        f = self.get_function(func_name)
        return lambda *opts: _gexec._benchmark_callable(lambda: f(*args), *opts)

    def __repr__(self):
        return "Module(%s, %s)" % (self.type_key, self._lib.path)


class BenchmarkResult:
    """Seconds per call, one figure per repeat, and their statistics, as TVM's
    tvm.runtime.module.BenchmarkResult (std is the population's)."""

    def __init__(self, results):
        self.results = tuple(results)
        a = np.asarray(self.results, dtype=np.float64)
        self.mean = float(a.mean()) if a.size else 0.0
        self.median = float(np.median(a)) if a.size else 0.0
        self.std = float(a.std()) if a.size else 0.0
        self.min = float(a.min()) if a.size else 0.0
        self.max = float(a.max()) if a.size else 0.0

    def __str__(self):
        head = "{:^12} {:^12} {:^12} {:^12} {:^12}".format("mean (ms)", "median (ms)", "max (ms)", "min (ms)", "std (ms)")
        row = "{:^12.4f} {:^12.4f} {:^12.4f} {:^12.4f} {:^12.4f}".format(
            self.mean * 1000, self.median * 1000, self.max * 1000, self.min * 1000, self.std * 1000)
        return "Execution time summary:\n%s\n%s\n" % (head, row)

    def __repr__(self):
        return "BenchmarkResult(min=%s, mean=%s, median=%s, max=%s, std=%s, results=%s)" % (
            self.min, self.mean, self.median, self.max, self.std, self.results)


class PackedFunc:
    """A kernel of a loaded library, called from Python as tvm.runtime.PackedFunc:
    NDArray arguments pass as DLTensor (the kernel reads and writes their memory), bool
    and int as int64, float as double, None as null, str as a string. A failure raises
    gexec.Error with the kernel's message; an int or float the kernel returns is returned."""

    def __init__(self, lib, name):
        self._lib = lib
        self.name = name

    def __call__(self, *args):
        return self._lib.call(self.name, *args)

    def __repr__(self):
        return "PackedFunc(%s)" % self.name


def load_module(path, fmt="", *, zero_unset_inputs=True):
    """Loads a TVM-compiled kernel library (export_library's .so), as tvm.runtime.load_module.

    ``zero_unset_inputs``: whether executors made by the library's factory
    (``lib["default"](dev)``) run an input no one gave a value as zeros (True, the
    default: TVM runs such a graph) or refuse to run (False). A missing file is
    FileNotFoundError.

    A ``.o`` object file or a ``.tar`` of them (``export_library("x.tar")``) is linked into
    ``<path>.so`` first, as TVM does, with the system's C++ compiler (``$CXX``, else g++):
    a RuntimeError with the compiler's output where that fails."""
    if fmt not in ("", "so", "o", "tar"):
        raise ValueError("load_module: format %r is not supported (a shared library, or .o/.tar to link)" % fmt)
    path = os.fspath(path)
    _require_file(path)
    if path.endswith((".o", ".tar")) or fmt in ("o", "tar"):
        path = _link_objects(path)
    return Module(_gexec.Library.load(path), bool(zero_unset_inputs))


def _link_objects(path):
    """``path`` (an object file, or a tar of them) linked into ``path + ".so"``, as TVM's
    load_module does with tvm.contrib.cc.create_shared."""
    import shutil
    import subprocess
    import tarfile
    import tempfile
    out = path + ".so"
    with tempfile.TemporaryDirectory(prefix="gexec_link_") as tmp:
        if tarfile.is_tarfile(path):
            with tarfile.open(path) as tar:
                members = [m for m in tar.getmembers() if m.isfile() and os.path.basename(m.name) == m.name]
                if len(members) != len([m for m in tar.getmembers() if not m.isdir()]):
                    raise ValueError("load_module: %s holds paths or links; TVM's export_library writes plain files" % path)
                # Plain files only (checked above); tarfile's "data" filter says so too where
                # Python has it (3.12, and 3.9-3.11 since their 2023 security releases), as
                # Python 3.14's default will, without 3.12/3.13's DeprecationWarning.
                extract = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
                tar.extractall(tmp, members=members, **extract)
            objects = sorted(os.path.join(tmp, m.name) for m in members)
        else:
            objects = [path]
        if not objects:
            raise ValueError("load_module: %s holds no object files" % path)
        cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or shutil.which("cc")
        if not cxx:
            raise RuntimeError("load_module: linking %s needs a C++ compiler (g++, or $CXX); none was found" % path)
        cmd = [cxx, "-shared", "-fPIC", "-o", out] + objects
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            raise RuntimeError("load_module: linking %s failed:\n%s\n%s" % (path, " ".join(cmd), done.stdout))
    return out


def _items(params):
    if not isinstance(params, dict):
        raise TypeError("params must be a dict of name -> NDArray or numpy array, not %s" % type(params).__name__)
    out = []
    for name, value in params.items():
        if not isinstance(name, str):
            raise TypeError("parameter names must be str, not %s" % type(name).__name__)
        out.append((name, value if isinstance(value, NDArray) else array(_as_input(value))))
    return out


def save_param_dict(params):
    """The bytes of TVM's parameter format for ``params`` (name -> NDArray or numpy), as
    tvm.runtime.save_param_dict; a bytearray, as TVM returns."""
    return bytearray(_gexec._save_param_dict(_items(params)))


def save_param_dict_to_file(params, path):
    """Writes ``params`` to ``path`` in TVM's parameter format."""
    _gexec._save_param_dict_file(_items(params), os.fspath(path))


def load_param_dict(param_bytes):
    """name -> NDArray from TVM's parameter bytes, as tvm.runtime.load_param_dict."""
    if isinstance(param_bytes, (bytearray, memoryview)):
        param_bytes = bytes(param_bytes)
    if not isinstance(param_bytes, bytes):
        raise TypeError("param_bytes must be bytes or bytearray, not %s" % type(param_bytes).__name__)
    return _gexec._load_param_dict(param_bytes)


def load_param_dict_from_file(path, mmap=False):
    """name -> NDArray from a parameter file; ``mmap=True`` maps it and views aligned tensors."""
    path = os.fspath(path)
    _require_file(path)
    return _gexec._load_param_dict_file(path, bool(mmap))
