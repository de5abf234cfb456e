"""Vendor BLAS libraries as a reference variant named ``vendor``: the public names of
the bindings, which live in ``xbackend/backends/`` (``cublas.py``, ``clblast.py``,
``numpy_blas.py``, and ``vendor.py`` for what they share).

The hand-written kernels are worth judging against what the vendors ship, on the
same operands and with the same timing. All products are row-major, C (M×N) =
A (M×K) · B (K×N), with leading dimensions counted in elements, exactly as the
backends lay out their buffers.
"""

from xbackend.backends.clblast import Clblast
from xbackend.backends.cublas import (
    Cublas,
    cublas_math_environment,
    cublas_math_note,
    cublas_status_name,
)
from xbackend.backends.numpy_blas import numpy_blas_name
from xbackend.backends.vendor import VendorError, VendorUnavailable

__all__ = [
    "Clblast",
    "Cublas",
    "VendorError",
    "VendorUnavailable",
    "cublas_math_environment",
    "cublas_math_note",
    "cublas_status_name",
    "numpy_blas_name",
]
