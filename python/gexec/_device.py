"""Devices as TVM's Python API names them: gexec.cpu(0), gexec.cuda(0), gexec.device("cpu", 0)."""

_NAMES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal", 10: "rocm",
          13: "cuda_managed", 12: "ext_dev"}
_TYPES = {"cpu": 1, "llvm": 1, "c": 1, "stackvm": 1, "cuda": 2, "gpu": 2, "nvptx": 2, "cl": 4,
          "opencl": 4, "vulkan": 7, "metal": 8, "rocm": 10, "ext_dev": 12}


class Device:
    """A device: DLPack's (device_type, device_id), as tvm.runtime.Device."""

    __slots__ = ("device_type", "device_id")

    def __init__(self, device_type, device_id=0):
        self.device_type = int(device_type)
        self.device_id = int(device_id)

    def _pair(self):
        return (self.device_type, self.device_id)

    def __eq__(self, other):
        return isinstance(other, Device) and self._pair() == other._pair()

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(self._pair())

    def __repr__(self):
        name = _NAMES.get(self.device_type, "device_type(%d)" % self.device_type)
        return "%s(%d)" % (name, self.device_id)

    def __dlpack_device__(self):
        return self._pair()

    def sync(self):
        """Waits for everything queued on the device (a no-op on the host)."""
        from . import _gexec
        _gexec._device_sync(self._pair())


def cpu(dev_id=0):
    """The host, as tvm.cpu."""
    return Device(1, dev_id)


def cuda(dev_id=0):
    """CUDA device ``dev_id``, as tvm.cuda."""
    return Device(2, dev_id)


def device(dev_type, dev_id=0):
    """A device from a type name ("cpu", "cuda", "llvm", ... or "cuda:1") or a DLPack type number."""
    if isinstance(dev_type, Device):
        return dev_type
    if isinstance(dev_type, str):
        name = dev_type.split()[0]
        if ":" in name:
            name, _, idx = name.partition(":")
            dev_id = int(idx)
        if name not in _TYPES:
            raise ValueError("unknown device type %r (known: %s)" % (dev_type, ", ".join(sorted(_TYPES))))
        return Device(_TYPES[name], dev_id)
    if isinstance(dev_type, int):
        return Device(dev_type, dev_id)
    raise TypeError("device type must be a str or an int, not %s" % type(dev_type).__name__)


def to_devices(dev):
    """A device or a list of devices, as pairs for the extension."""
    if isinstance(dev, Device):
        return [dev._pair()]
    if isinstance(dev, (list, tuple)):
        if not dev:
            raise ValueError("an empty device list")
        out = []
        for d in dev:
            if not isinstance(d, Device):
                raise TypeError("devices must be gexec.Device (gexec.cpu(0), ...), not %s" % type(d).__name__)
            out.append(d._pair())
        return out
    raise TypeError("device must be a gexec.Device or a list of them, not %s" % type(dev).__name__)
