"""gexec's exceptions: one gexec.Error (a RuntimeError) with the error code, and
subclasses that are also the built-in exception a Python user expects."""


class Error(RuntimeError):
    """A failure gexec detected. ``code`` is gexec::errc's name ("invalid_graph", ...),
    ``errno`` its number, ``message`` gexec's message (naming the file, node, field and
    value at fault)."""

    def __init__(self, message, code="unknown", errno=0):
        super().__init__(message)
        self.message = message
        self.code = code
        self.errno = errno

    def __str__(self):
        return "gexec: %s: %s" % (self.code, self.message)


class NotFoundError(Error, KeyError):
    """An unknown name: an input, output, node, parameter or function."""

    def __str__(self):  # KeyError would quote the message
        return Error.__str__(self)


class InvalidArgumentError(Error, ValueError):
    """A value of the wrong shape, dtype, device or alignment, or otherwise unusable."""


class OutOfRangeError(Error, IndexError):
    """An index past the end (a node's), where TVM raises its TVMError: both gexec.Error
    and IndexError."""


class UnsupportedError(Error, NotImplementedError):
    """A valid request this build of gexec does not implement."""


class FileNotFound(FileNotFoundError, ValueError):
    """A model, library or parameter file that is not there: FileNotFoundError (errno
    ENOENT, ``filename``), as open() raises it; also ValueError, which TVM's load_module
    raises for it."""


_VALUE_ERRORS = {
    "invalid_argument", "shape_mismatch", "dtype_mismatch", "device_mismatch",
    "misaligned", "invalid_dtype",
}


# The C++ message for a run with inputs never set names the C++ option; Python's is a keyword.
_ZERO_UNSET_CPP = "model_options::zero_unset_inputs runs them as zeros"
_ZERO_UNSET_PYTHON = ("zero_unset_inputs=True (of Model.load, graph_executor.create or runtime.load_module) "
                      "runs them as zeros")

_DONATE_CPP = "(model_options::donate_inputs)"
_DONATE_PYTHON = "(donate_inputs=True of Model.load)"


def make_error(errno, code, message):
    """The exception for a gexec::error (called by the extension)."""
    message = message.replace(_ZERO_UNSET_CPP, _ZERO_UNSET_PYTHON).replace(_DONATE_CPP, _DONATE_PYTHON)
    if code in ("not_found", "symbol_not_found"):
        cls = NotFoundError
    elif code in _VALUE_ERRORS:
        cls = InvalidArgumentError
    elif code == "unsupported":
        cls = UnsupportedError
    else:
        cls = Error
    return cls(message, code, errno)
