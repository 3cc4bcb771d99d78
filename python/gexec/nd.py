"""Tensors, as tvm.nd: gexec.nd.array, gexec.nd.empty and NDArray.

An NDArray is a gexec::ndarray: it owns 64-byte aligned host memory or memory on a CUDA
device (``device=gexec.cuda(n)``), or views memory someone else keeps alive (an
executor's output, a mapped parameter file, a DLPack producer such as a PyTorch CUDA
tensor). ``numpy()`` copies, from a device too, as TVM's does; ``numpy_view()`` (host
arrays) and ``__dlpack__`` share the memory and keep it alive. bfloat16 reaches numpy as its uint16 bit patterns, as
with TVM 0.19; float8 as uint8 and int4/uint4 as one byte per element.
"""

import numpy as np

from . import _gexec
from ._device import Device, cpu

NDArray = _gexec.NDArrayBase

_CODES = {0: "int", 1: "uint", 2: "float", 6: "bool"}


def numpy_dtype(dtype):
    """The numpy dtype holding gexec dtype ``dtype`` ("bfloat16" -> uint16, ...)."""
    code, bits, lanes = _gexec._numpy_dtype_of(str(dtype))
    if lanes != 1:
        raise ValueError("dtype %s has %d lanes; numpy holds single-lane dtypes only" % (dtype, lanes))
    return np.dtype("bool" if code == 6 else "%s%d" % (_CODES[code], bits))


def _dtype_name(dtype):
    if isinstance(dtype, str):
        return dtype
    return str(np.dtype(dtype))


# ml_dtypes' numpy types, passed on as the bit patterns gexec reads for bfloat16 and float8.
_ML_DTYPES = {"bfloat16": np.uint16, "float8_e4m3fn": np.uint8, "float8_e5m2": np.uint8}


def _as_input(value):
    """What the extension takes for an array argument that is only read (copied from): an
    NDArray, a C-contiguous numpy array (others are copied compact), or any other object
    with __dlpack__ (imported without a copy). Arrays whose own memory must be used
    (outputs, zero-copy) go through _as_target instead."""
    if isinstance(value, NDArray):
        return value
    if isinstance(value, np.generic):
        value = np.asarray(value)  # a 0-d array (np.ascontiguousarray would make it 1-d)
    if isinstance(value, np.ndarray):
        if not value.flags.c_contiguous:
            value = np.ascontiguousarray(value)
        if value.dtype.kind == "V" and value.dtype.name in _ML_DTYPES:
            value = value.view(_ML_DTYPES[value.dtype.name])
        return value
    if hasattr(value, "__dlpack__"):
        return value
    if isinstance(value, (list, tuple, int, float, bool)):
        return np.asarray(value)  # a number is 0-d (np.ascontiguousarray would make it 1-d)
    raise TypeError("expected an NDArray, a numpy array or an object with __dlpack__, not %s" % type(value).__name__)


def _as_target(value, what, written=True):
    """What the extension takes for an array whose own memory is used, not a copy of it:
    an ``out`` written in place, or (``written=False``) an input read in place
    (zero-copy). An NDArray or a __dlpack__ object passes as it is (strided ones the
    executor refuses); a numpy array must be C-contiguous, and writable if written;
    anything else (a list, a number) is refused, as a copy made here would silently take
    the writes or the reads instead."""
    if isinstance(value, NDArray):
        return value
    if isinstance(value, np.ndarray):
        if written and not value.flags.writeable:
            raise _invalid("%s: the numpy array is read-only" % what)
        if not value.flags.c_contiguous:
            raise _invalid("%s: the numpy array is not C-contiguous (strides %s for shape %s); gexec uses an "
                           "array's own memory here, which must be compact row-major (np.ascontiguousarray "
                           "makes a copy that is)" % (what, value.strides, value.shape))
        return _as_input(value)
    if hasattr(value, "__dlpack__"):
        return value
    raise TypeError("%s: expected an NDArray, a numpy array or an object with __dlpack__ whose memory gexec "
                    "uses in place, not %s" % (what, type(value).__name__))


def _invalid(message):
    from ._errors import InvalidArgumentError
    return InvalidArgumentError(message, "invalid_argument")


def array(arr, device=None, mem_scope=None):
    """A new NDArray holding a copy of ``arr`` (numpy, NDArray, list or __dlpack__) on
    ``device`` (the host by default, or a CUDA device), as tvm.nd.array."""
    if mem_scope is not None:
        raise ValueError("mem_scope is not supported")
    device = cpu(0) if device is None else device
    if not isinstance(device, Device):
        raise TypeError("device must be a gexec.Device, not %s" % type(device).__name__)
    if isinstance(arr, NDArray):
        return arr._copy_to(device._pair())
    if not isinstance(arr, np.ndarray) and not hasattr(arr, "__dlpack__"):
        arr = np.array(arr)
    if isinstance(arr, np.ndarray) and not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    return _gexec._array(arr, device._pair())


def from_dlpack(dltensor):
    """An NDArray over the memory of ``dltensor`` (an object with __dlpack__, such as a
    PyTorch tensor or a numpy array, or a DLPack capsule), without a copy, as
    tvm.nd.from_dlpack: writes through either are seen by the other, and the NDArray keeps
    the producer's memory alive. The memory must be writable (a read-only numpy array is
    refused: gexec.nd.array copies it)."""
    if isinstance(dltensor, np.ndarray) and not dltensor.flags.writeable:
        raise _invalid("from_dlpack: the numpy array is read-only (gexec.nd.array copies it)")
    return _gexec._from_dlpack(dltensor)


def empty(shape, dtype="float32", device=None, mem_scope=None):
    """A new zero-filled NDArray on ``device`` (the host by default, or a CUDA device), as tvm.nd.empty."""
    if mem_scope is not None:
        raise ValueError("mem_scope is not supported")
    device = cpu(0) if device is None else device
    if not isinstance(device, Device):
        raise TypeError("device must be a gexec.Device, not %s" % type(device).__name__)
    if isinstance(shape, int):
        shape = (shape,)
    return _gexec._empty([int(d) for d in shape], _dtype_name(dtype), device._pair())


def _device(self):
    return Device(*self._device)


def _copyfrom(self, source_array):
    """Copies ``source_array`` (NDArray, numpy or anything numpy converts) into this array,
    converting its dtype as TVM's copyfrom does; the shape must match."""
    if isinstance(source_array, NDArray):
        self._copyfrom_ndarray(source_array)
        return self
    if not isinstance(source_array, np.ndarray) and hasattr(source_array, "__dlpack__"):
        self._copyfrom_array(source_array)
        return self
    target = numpy_dtype(self.dtype)
    try:
        source = np.asarray(source_array, dtype=target)
    except (TypeError, ValueError) as e:
        raise TypeError("copyfrom: cannot make a %s array from %s: %s" % (self.dtype, type(source_array).__name__, e))
    if source.shape != self.shape:
        raise ValueError("copyfrom: array shape %s does not match the NDArray's %s" % (source.shape, self.shape))
    self._copyfrom_array(np.ascontiguousarray(source))
    return self


def _copyto(self, target, mem_scope=None):
    """Copies into ``target``: an NDArray (returned) or a Device (a new NDArray there)."""
    if isinstance(target, NDArray):
        return target.copyfrom(self)
    if isinstance(target, Device):
        return array(self, target, mem_scope)
    raise TypeError("copyto: target must be an NDArray or a Device, not %s" % type(target).__name__)


def _setitem(self, in_slice, value):
    if not isinstance(in_slice, slice) or in_slice.start is not None or in_slice.stop is not None or in_slice.step is not None:
        raise ValueError("NDArray only supports assignment to the whole array: arr[:] = value")
    self.copyfrom(value)


def _repr(self):
    return "<gexec.nd.NDArray shape=%s, %r>\n%r" % (self.shape, self.device, self.numpy())


def _asnumpy(self):
    return self.numpy()


def _same_as(self, other):
    return isinstance(other, NDArray) and self._data_ptr == other._data_ptr and self.shape == other.shape


NDArray.device = property(_device, doc="The array's Device.")
NDArray.copyfrom = _copyfrom
NDArray.copyto = _copyto
NDArray.__setitem__ = _setitem
NDArray.__repr__ = _repr
NDArray.__str__ = lambda self: str(self.numpy())
NDArray.asnumpy = _asnumpy
NDArray.same_as = _same_as
