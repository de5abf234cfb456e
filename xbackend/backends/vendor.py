"""What the vendor bindings share: their errors and the check of a row-major product.

The bindings themselves: ``cublas.py`` (cuBLAS through ctypes, for the CUDA backend),
``clblast.py`` (CLBlast through pyclblast, for the OpenCL backend) and
``numpy_blas.py`` (the name of NumPy's BLAS, for the CPU backend's label).
"""

from __future__ import annotations

from collections.abc import Mapping

from xbackend.errors import UnsupportedParameter, XBackendError

# The _v2 API of cuBLAS takes int dimensions and leading dimensions (its offsets are its
# own business: an operand of more than 2^31 elements is fine while each of those fits);
# CLBlast's kernels compute every element offset with 32-bit ints.
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
    M: int,
    N: int,
    K: int,
    lda: int,
    ldb: int,
    ldc: int,
    *,
    int32: bool = False,
    int32_offsets: bool = False,
) -> None:
    """Raise ValueError unless the sizes and row strides describe a valid row-major product.

    ``int32``: each size and leading dimension must fit an int (cuBLAS's arguments);
    ``int32_offsets``: so must the offset of each matrix's last element (CLBlast's kernels).
    """
    sizes = {"M": M, "N": N, "K": K, "lda": lda, "ldb": ldb, "ldc": ldc}
    for name, value in sizes.items():
        if value < 0:
            raise ValueError(f"{name} = {value} is negative")
        if int32 and value > _INT_MAX:
            raise ValueError(f"{name} = {value} does not fit the int that cuBLAS takes")
    # Rows of A hold K elements, rows of B and C hold N.
    matrices = (("A", M, lda, K), ("B", K, ldb, N), ("C", M, ldc, N))
    for name, rows, ld, row in matrices:
        if ld < row:
            raise ValueError(f"ld{name.lower()} = {ld} is shorter than a row ({row} elements)")
        last = (rows - 1) * ld + row - 1 if rows and row else 0
        if int32_offsets and last > _INT_MAX:
            raise ValueError(
                f"{name}'s last element lies {last} elements from its start: CLBlast's "
                f"kernels index with 32-bit ints (at most {_INT_MAX})"
            )


def check_library(library: str, args: Mapping[str, object], **limits: bool) -> None:
    """Raise ``UnsupportedParameter`` naming ``library`` where a GEMM's arguments (by the
    names of ``GEMM_PARAMETERS``) pass the limits ``check_row_major`` is given: the
    product cannot run there, which is a refusal, not a failure."""
    sizes = [args[name] for name in ("M", "N", "K", "lda", "ldb", "ldc")]
    M, N, K, lda, ldb, ldc = (size for size in sizes if isinstance(size, int))
    try:
        check_row_major(M, N, K, lda, ldb, ldc, **limits)
    except ValueError as error:
        raise UnsupportedParameter(f"{library}: {error}") from error
