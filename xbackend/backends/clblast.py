"""CLBlast through the ``pyclblast`` package, on PyOpenCL buffers.

Products are row-major, C (M×N) = A (M×K) · B (K×N), with leading dimensions counted
in elements, exactly as the backends lay out their buffers.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import numpy as np

from xbackend.backends.vendor import VendorError, VendorUnavailable, check_row_major

if TYPE_CHECKING:
    import pyopencl as cl


# pyclblast has no wheels: pip builds it against the system's CLBlast.
CLBLAST_INSTALL = "apt-get install libclblast-dev && pip install 'xbackend[clblast]'"
_CLBLAST_MISSING = f"pyclblast is not installed: {CLBLAST_INSTALL}"


def _import_pyclblast() -> Any:
    """The pyclblast module, or VendorUnavailable saying why not."""
    try:
        import pyclblast
    except ModuleNotFoundError as error:
        if error.name not in (None, "pyclblast"):
            # pyclblast is there but something it needs is not.
            raise VendorUnavailable(f"pyclblast cannot be imported: {error}") from error
        raise VendorUnavailable(_CLBLAST_MISSING) from error
    except ImportError as error:
        # Hidden (None in sys.modules) reads as missing; a broken build says so.
        if "pyclblast" in sys.modules and sys.modules["pyclblast"] is None:
            raise VendorUnavailable(_CLBLAST_MISSING) from error
        if "libclblast" in str(error):
            # Built, but the shared library is gone or off LD_LIBRARY_PATH.
            raise VendorUnavailable(
                f"pyclblast cannot load CLBlast ({error}): apt-get install libclblast1, "
                "or put the folder of libclblast.so.1 on LD_LIBRARY_PATH"
            ) from error
        raise VendorUnavailable(f"pyclblast cannot be imported: {error}") from error
    except OSError as error:
        # The extension module loads libclblast; a missing one surfaces here.
        raise VendorUnavailable(
            f"pyclblast cannot load CLBlast ({error}): {CLBLAST_INSTALL}"
        ) from error
    return pyclblast


def _distribution_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


class Clblast:
    """CLBlast's GEMM on PyOpenCL buffers, through the ``pyclblast`` package.

    pyclblast's ``gemm`` takes 2-D ``pyopencl.array.Array`` operands (it reads
    only their buffer and dtype) and always uses CLBlast's row-major layout, so
    the buffers are wrapped as arrays that describe the rows and their strides.
    """

    def __init__(self) -> None:
        self._pyclblast = _import_pyclblast()
        version = _distribution_version("pyclblast")
        self.version = version or "unknown version"

    @staticmethod
    def available() -> tuple[bool, str]:
        """(True, 'pyclblast X.Y.Z') when CLBlast can be used, else (False, the reason)."""
        try:
            _import_pyclblast()
        except VendorUnavailable as error:
            return False, str(error)
        return True, f"pyclblast {_distribution_version('pyclblast') or '(unknown version)'}"

    @staticmethod
    def dtype_problem(dtype: Any, device: cl.Device | None = None) -> str | None:
        """Why CLBlast cannot multiply operands of this dtype here, or None when it can.

        With ``device``, float64 is checked against the device's double support,
        which CLBlast needs (it fails with CLBlastNoDoublePrecision otherwise).
        """
        dtype = np.dtype(dtype)
        if dtype.kind in "iu":
            return f"CLBlast has no integer GEMM ({dtype})"
        if dtype not in (np.float32, np.float64):
            return f"CLBlast GEMM is wired for float32 and float64 here, not {dtype}"
        if dtype == np.float64 and device is not None and not device.double_fp_config:
            return f"{device.name.strip()} has no double precision, which CLBlast needs"
        return None

    def gemm(
        self,
        queue: cl.CommandQueue,
        a_buf: cl.Buffer,
        b_buf: cl.Buffer,
        c_buf: cl.Buffer,
        M: int,
        N: int,
        K: int,
        lda: int,
        ldb: int,
        ldc: int,
        dtype: Any,
    ) -> cl.Event:
        """Row-major C (M×N) = A (M×K) · B (K×N) on ``queue``; returns an event.

        Leading dimensions are row strides in elements; each buffer must hold
        (rows - 1)·ld + columns elements (CLBlast checks), and that many must fit
        an int: CLBlast's kernels compute offsets with 32-bit ints (ValueError
        otherwise, never a wrong product). The work is only enqueued.

        Timing: the event is CLBlast's last kernel. For sizes past its
        XGEMM_MIN_INDIRECT_SIZE CLBlast runs pad/transpose kernels before (and
        sometimes after) the main one, and the event does not cover those, so
        time the whole call with markers or with the host clock around
        ``queue.finish()`` rather than with this event's profiling info.
        """
        import pyopencl as cl
        import pyopencl.array as cl_array

        dtype = np.dtype(dtype)
        problem = self.dtype_problem(dtype, queue.device)
        if problem:
            raise VendorError(problem)
        check_row_major(M, N, K, lda, ldb, ldc, int32_offsets=True)
        if M == 0 or N == 0:
            return cl.enqueue_marker(queue)  # nothing to compute
        if K == 0:
            # CLBlast rejects K = 0 (CLBlastInvalidDimension); the product is zero.
            return self._zero_rows(queue, c_buf, M, N, ldc, dtype)

        def wrap(buffer: cl.Buffer, rows: int, cols: int, ld: int) -> Any:
            strides = (ld * dtype.itemsize, dtype.itemsize)
            return cl_array.Array(queue, (rows, cols), dtype, data=buffer, strides=strides)

        a = wrap(a_buf, M, K, lda)
        b = wrap(b_buf, K, N, ldb)
        c = wrap(c_buf, M, N, ldc)
        try:
            event: cl.Event = self._pyclblast.gemm(
                queue, M, N, K, a, b, c, a_ld=lda, b_ld=ldb, c_ld=ldc
            )
        except (RuntimeError, ValueError) as error:
            # pyclblast reports CLBlast's status as "PyCLBlast: 'CLBlastXgemm' failed: ...".
            raise VendorError(f"CLBlast GEMM failed: {error}", function="CLBlastXgemm") from error
        return event

    @staticmethod
    def _zero_rows(
        queue: cl.CommandQueue, c_buf: cl.Buffer, M: int, N: int, ldc: int, dtype: np.dtype
    ) -> cl.Event:
        import pyopencl as cl

        zero = np.zeros(1, dtype)
        row_bytes, stride = N * dtype.itemsize, ldc * dtype.itemsize
        # One fill when rows are contiguous; else row by row, leaving the padding alone.
        spans: list[tuple[int, int]] = (
            [(0, M * row_bytes)] if ldc == N else [(i * stride, row_bytes) for i in range(M)]
        )
        fills = [cl.enqueue_fill_buffer(queue, c_buf, zero, offset, size) for offset, size in spans]
        return cl.enqueue_marker(queue, wait_for=fills)
