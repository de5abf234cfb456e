"""What the vendor bindings share: their errors and the check of a row-major product.

The bindings themselves: ``cublas.py`` (cuBLAS through ctypes, for the CUDA backend),
``clblast.py`` (CLBlast through pyclblast, for the OpenCL backend) and
``numpy_blas.py`` (the name of NumPy's BLAS, for the CPU backend's label);
``xbackend.vendor`` gathers their public names.
"""

from __future__ import annotations

from xbackend.errors import XBackendError

# The _v2 API of cuBLAS takes int dimensions.
_INT_MAX = 2**31 - 1


class VendorUnavailable(XBackendError):
    """A vendor library cannot be used here; the message says what was tried or is missing."""


class VendorError(XBackendError):
    """A vendor library call failed or was given arguments it cannot take.

    ``function`` names the library call and ``status`` holds its status code
    when the library returned one.
    """

    def __init__(self, message: str, *, function: str | None = None, status: int | None = None):
        super().__init__(message)
        self.function = function
        self.status = status


def check_row_major(
    M: int, N: int, K: int, lda: int, ldb: int, ldc: int, *, int32: bool = False
) -> None:
    """Raise ValueError unless the sizes and row strides describe a valid row-major product."""
    sizes = {"M": M, "N": N, "K": K, "lda": lda, "ldb": ldb, "ldc": ldc}
    for name, value in sizes.items():
        if value < 0:
            raise ValueError(f"{name} = {value} is negative")
        if int32 and value > _INT_MAX:
            raise ValueError(f"{name} = {value} does not fit the int that cuBLAS takes")
    # Rows of A hold K elements, rows of B and C hold N.
    for name, ld, row in (("lda", lda, K), ("ldb", ldb, N), ("ldc", ldc, N)):
        if ld < row:
            raise ValueError(f"{name} = {ld} is shorter than a row ({row} elements)")
