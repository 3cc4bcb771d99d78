"""gexec: run Apache TVM graph-executor models (graph JSON + kernel library + params)
and Relax VM executables (TVM >= 0.20; gexec.relax.VirtualMachine) from Python without
TVM, through TVM's Python API:

    import gexec
    from gexec.contrib import graph_executor
    lib = gexec.runtime.load_module("mod.so")
    m = graph_executor.GraphModule(lib["default"](gexec.cpu(0)))
    m.set_input("data", img)
    m.run()
    out = m.get_output(0).numpy()
"""

from . import _errors, _gexec
from ._errors import Error, InvalidArgumentError, NotFoundError, UnsupportedError

_gexec._set_error_factory(_errors.make_error)

import atexit as _atexit  # noqa: E402

# Daemon threads still inside run() when the interpreter exits must not take the GIL back.
_atexit.register(_gexec._at_exit)

from ._device import Device, cpu, cuda, device  # noqa: E402
from . import container, nd, runtime  # noqa: E402
from .contrib import graph_executor  # noqa: E402
from .model import Model  # noqa: E402
from .compare import DumpComparison, compare_dump  # noqa: E402
from . import relax  # noqa: E402

__version__ = _gexec.__version__

__all__ = ["Error", "NotFoundError", "InvalidArgumentError", "UnsupportedError", "Device", "cpu", "cuda", "device",
           "container", "nd", "runtime", "graph_executor", "relax", "Model", "compare_dump", "DumpComparison", "__version__"]
