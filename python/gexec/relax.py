"""Relax VM executables, what TVM >= 0.20 deploys, as tvm.relax runs them:

    import gexec
    lib = gexec.runtime.load_module("model.so")       # relax.build(mod, "llvm").export_library
    vm = gexec.relax.VirtualMachine(lib, gexec.cpu())
    out = vm["main"](x)                                # an NDArray, or a tuple of them

A function whose shapes are static and whose code is a straight line runs as a gexec
graph; any other is interpreted (``vm.interpreted_because("main")`` says why). Weights
that ``nn.Module.export_tvm`` leaves as function arguments can be bound once from a file
(``VirtualMachine(lib, dev, params="weights.safetensors")``); callers then pass only the
inputs. Each call returns tensors of its own, as TVM's VM does.
"""

import os

from . import _gexec
from ._device import Device
from ._errors import UnsupportedError
from .contrib.graph_executor import BenchmarkResult
from .nd import NDArray, _as_input, array
from .runtime import Module

__all__ = ["VirtualMachine"]


def _tensor(value):
    return value if isinstance(value, NDArray) else array(_as_input(value))


class VirtualMachine:
    """A virtual machine over a Relax executable, as tvm.relax.VirtualMachine.

    ``rt_mod`` is a module from ``gexec.runtime.load_module`` (or the library's path);
    ``device`` the host (gexec runs Relax executables there); ``params`` a parameter file
    (TVM's blob or .safetensors) whose tensors are bound to the arguments of their names.
    One VirtualMachine serves one thread at a time; make one per thread over one library.
    """

    def __init__(self, rt_mod, device=None, memory_cfg=None, profile=False, params=None, num_threads=None):
        if isinstance(rt_mod, Module):
            path = rt_mod.path
        elif isinstance(rt_mod, (str, os.PathLike)):
            path = os.fspath(rt_mod)
        else:
            raise TypeError("VirtualMachine: expected a module from gexec.runtime.load_module or a path, not %s" % type(rt_mod).__name__)
        devices = device if isinstance(device, (list, tuple)) else [device]
        for d in devices:
            if d is not None and (not isinstance(d, Device) or d.device_type != 1):
                raise UnsupportedError("VirtualMachine: gexec runs Relax executables on the host (cpu), not %s" % (d,), "unsupported")
        self._exe = _gexec.RelaxExecutable.load(path, None if params is None else os.fspath(params), num_threads)
        self._vm = _gexec.RelaxVM(self._exe)
        self._inputs = {}
        self._outputs = {}

    def _function(self, name):
        if not isinstance(name, str):
            raise TypeError("function name must be a str, not %s" % type(name).__name__)
        if name not in self._exe.function_names():
            raise AttributeError("the executable has no function %r (it has: %s)" % (name, ", ".join(self._exe.function_names())))
        return name

    def __getitem__(self, key):
        name = self._function(key)
        return lambda *args: self._vm.invoke(name, [_tensor(a) for a in args])

    def invoke(self, func_name, *args):
        return self[func_name](*args)

    def function_names(self):
        """The executable's functions."""
        return list(self._exe.function_names())

    def input_names(self, func_name):
        """The arguments a caller passes to ``func_name`` (weights bound from ``params`` left out)."""
        return list(self._exe.input_names(self._function(func_name)))

    def interpreted_because(self, func_name):
        """Why ``func_name`` is interpreted; "" where it runs as a gexec graph."""
        return self._exe.interpreted_because(self._function(func_name))

    # TVM's stateful calling convention.
    def set_input(self, func_name, *args, **kwargs):
        name = self._function(func_name)
        if kwargs:
            names = self._exe.input_names(name)
            unknown = [k for k in kwargs if k not in names]
            if unknown:
                raise ValueError("set_input: %s has no argument %s (its arguments: %s)" % (name, ", ".join(unknown), ", ".join(names)))
            given = list(args) + [None] * (len(names) - len(args))
            for k, v in kwargs.items():
                given[names.index(k)] = v
            if any(v is None for v in given):
                raise ValueError("set_input: %s takes %d arguments (%s)" % (name, len(names), ", ".join(names)))
            args = given
        self._inputs[name] = [_tensor(a) for a in args]

    def invoke_stateful(self, func_name):
        name = self._function(func_name)
        if name not in self._inputs:
            raise ValueError("invoke_stateful: call set_input(%r, ...) first" % name)
        self._outputs[name] = self._vm.invoke(name, self._inputs[name])

    def get_outputs(self, func_name):
        name = self._function(func_name)
        if name not in self._outputs:
            raise ValueError("get_outputs: call invoke_stateful(%r) first" % name)
        return self._outputs[name]

    def time_evaluator(self, func_name, dev=None, number=10, repeat=1, min_repeat_ms=0, cooldown_interval_ms=0, repeats_to_cooldown=1,
                       f_preproc=""):
        """A function timing ``func_name`` on the arguments it is given, as TVM's: ``number``
        calls a measurement, ``repeat`` measurements; returns a BenchmarkResult (seconds per call)."""
        name = self._function(func_name)

        def timed(*args):
            values = [_tensor(a) for a in args] if args else self._inputs.get(name, [])
            return BenchmarkResult(self._vm.time(name, values, int(number), int(repeat), int(min_repeat_ms)))

        return timed
