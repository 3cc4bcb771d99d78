"""Writes the .npy files test_npy reads, with numpy (and ml_dtypes for bfloat16).

    python3 -m venv /tmp/npyvenv && /tmp/npyvenv/bin/pip install numpy ml_dtypes
    /tmp/npyvenv/bin/python tests/data/npy/make_npy.py

The values are repeated by hand in tests/test_npy.cpp; change both together.
The committed files were written by numpy 2.4.6 and ml_dtypes 0.6.0.
"""

import os

import ml_dtypes
import numpy as np
from numpy.lib import format as npy_format

here = os.path.dirname(os.path.abspath(__file__))


def save(name, array, version=None):
    path = os.path.join(here, name)
    if version is None:
        np.save(path, array)
    else:
        with open(path, "wb") as f:
            npy_format.write_array(f, array, version=version)
    back = np.load(path)
    assert back.dtype == array.dtype or back.dtype.kind == "V", (name, back.dtype)
    assert back.tobytes() == np.ascontiguousarray(array).tobytes(), name


save("scalar_f64.npy", np.array(-2.5, dtype="<f8"))
save("empty_f32.npy", np.zeros((0, 3), dtype="<f4"))
save("cube_i8.npy", (np.arange(24, dtype=np.int8) - 12).reshape(2, 3, 4))
save("bool.npy", np.array([True, False, True, True]))
save("u16.npy", np.array([[0, 1], [65535, 4660]], dtype="<u2"))
save("i64.npy", np.array([-(2**40), 0, 2**62 + 7], dtype="<i8"))
save("f16.npy", np.array([1.0, -2.0, 0.5, 65504.0], dtype="<f2"))
save("v2_f64.npy", np.array([1.5, -0.25, 1e300], dtype="<f8"), version=(2, 0))
save("v3_i32.npy", np.array([7, -7], dtype="<i4"), version=(3, 0))
save("bf16.npy", np.array([1.0, -2.0, 3.5], dtype=ml_dtypes.bfloat16))
save("be_f4.npy", np.array([1.0, -2.5], dtype=">f4"))
