"""NVIDIA's cuBLAS through ctypes, on raw device pointers that the CUDA backend
allocated with PyCUDA. No cuBLAS Python package is needed, only the shared library
(CUDA toolkit, or the ``nvidia-cublas`` wheels).

Products are row-major, C (M×N) = A (M×K) · B (K×N), with leading dimensions counted
in elements, exactly as the backends lay out their buffers.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import glob
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from xbackend.backends.vendor import VendorError, VendorUnavailable, check_row_major

# cublasStatus_t, from cublas_api.h (values unchanged from CUDA 9 to 13).
CUBLAS_STATUS: dict[int, str] = {
    0: "CUBLAS_STATUS_SUCCESS",
    1: "CUBLAS_STATUS_NOT_INITIALIZED",
    3: "CUBLAS_STATUS_ALLOC_FAILED",
    7: "CUBLAS_STATUS_INVALID_VALUE",
    8: "CUBLAS_STATUS_ARCH_MISMATCH",
    11: "CUBLAS_STATUS_MAPPING_ERROR",
    13: "CUBLAS_STATUS_EXECUTION_FAILED",
    14: "CUBLAS_STATUS_INTERNAL_ERROR",
    15: "CUBLAS_STATUS_NOT_SUPPORTED",
    16: "CUBLAS_STATUS_LICENSE_ERROR",
}

# What each failure usually means in this setting, so the message is actionable.
_CUBLAS_HINTS: dict[int, str] = {
    1: "no CUDA driver or GPU, a driver too old for this cuBLAS, or no usable current context",
    3: "out of GPU memory",
    7: "an argument is out of range",
    8: "the GPU lacks a feature this call needs",
    13: "the GPU program failed to launch or run",
    14: "cuBLAS failed internally (often an earlier asynchronous error)",
}

CUBLAS_OP_N = 0  # cublasOperation_t: no transpose
# cublasMath_t: FP32 GEMMs compute in FP32 (no TF32, no BF16x9 emulation); FP64 in FP64.
CUBLAS_DEFAULT_MATH = 0

# Environment variables that NVIDIA libraries read and that can change how a
# float32/float64 GEMM computes, whatever math mode the handle asks for:
# * NVIDIA_TF32_OVERRIDE=1 makes SGEMM use TF32 tensor cores even under
#   CUBLAS_DEFAULT_MATH. Measured with cuBLAS 13.1.0 on an H100, 2048³ SGEMM:
#   max relative error 2.3e-6 without it, 3.2e-4 with it (the same as
#   CUBLAS_TF32_TENSOR_OP_MATH). NVIDIA_TF32_OVERRIDE=0 forbids TF32 everywhere.
# * The CUBLAS_EMULATE_* switches (cuBLAS >= 12.9, some GPUs only) make cuBLAS
#   emulate FP32/FP64 on tensor cores, which changes the speed and the rounding.
_MATH_ENVIRONMENT = (
    "NVIDIA_TF32_OVERRIDE",
    "CUBLAS_EMULATE_SINGLE_PRECISION",
    "CUBLAS_EMULATE_DOUBLE_PRECISION",
    "CUBLAS_EMULATION_STRATEGY",
    "CUBLAS_FIXEDPOINT_EMULATION_MANTISSA_BIT_COUNT",
)


def cublas_status_name(status: int) -> str:
    """The symbolic name of a cublasStatus_t, e.g. 7 -> 'CUBLAS_STATUS_INVALID_VALUE'."""
    return CUBLAS_STATUS.get(status, f"unknown cuBLAS status {status}")


def cublas_math_environment() -> dict[str, str]:
    """The environment variables set now that can change how cuBLAS computes a GEMM."""
    return {name: os.environ[name] for name in _MATH_ENVIRONMENT if name in os.environ}


def cublas_math_note(environment: dict[str, str]) -> str | None:
    """A warning to print next to cuBLAS results when the environment alters its arithmetic."""
    notes = []
    if environment.get("NVIDIA_TF32_OVERRIDE", "0") != "0":
        notes.append("NVIDIA_TF32_OVERRIDE is set: float32 GEMMs may use TF32 (errors near 1e-4)")
    emulation = sorted(name for name in environment if name.startswith("CUBLAS_"))
    if emulation:
        notes.append(f"{', '.join(emulation)} set: cuBLAS may emulate FP32/FP64 on tensor cores")
    return "; ".join(notes) or None


def _decode_version(code: int) -> str:
    """cublasGetVersion's integer as 'major.minor.patch'.

    cublas_api.h defines CUBLAS_VERSION as major*10000 + minor*100 + patch
    (13.0.2 -> 130002); the headers of some CUDA 10/11 releases used major*1000
    instead (11.6.5 -> 11605). No cuBLAS with the _v2 API has a major below 9,
    so a code under 100000 can only be the older form.
    """
    if code >= 100_000:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


def _colmajor_args(
    M: int, N: int, K: int, a_ptr: int, lda: int, b_ptr: int, ldb: int, c_ptr: int, ldc: int
) -> tuple[int, int, int, int, int, int, int, int, int, int, int]:
    """The column-major GEMM arguments that compute a row-major C = A·B.

    A row-major matrix with row stride ld is, read column-major, its transpose
    with leading dimension ld. So cuBLAS computes C^T (N×M) = B^T (N×K) · A^T
    (K×M) with no transposes: m=N, n=M, k=K, its A is our B and its B is our A.

    Returns (transa, transb, m, n, k, A, lda, B, ldb, C, ldc). cuBLAS wants every
    leading dimension at least 1 even when a matrix is empty, hence the max.
    """
    check_row_major(M, N, K, lda, ldb, ldc)
    return (
        CUBLAS_OP_N,
        CUBLAS_OP_N,
        N,
        M,
        K,
        b_ptr,
        max(1, ldb),
        a_ptr,
        max(1, lda),
        c_ptr,
        max(1, ldc),
    )


def _library_dirs() -> list[Path]:
    """Directories that may hold libcublas.so*, most specific first."""
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    dirs = [Path(root) / "lib64" for root in roots if root]
    # NVIDIA's wheels: nvidia-cublas-cu12 unpacks to nvidia/cublas/lib, the CUDA 13
    # wheel (nvidia-cublas) to nvidia/cu13/lib, next to the other CUDA 13 libraries.
    for entry in sys.path:
        for sub in _WHEEL_DIRS:
            dirs.append(Path(entry or ".") / sub)
    return list(dict.fromkeys(dirs))


_WHEEL_DIRS = ("nvidia/cublas/lib", "nvidia/cu13/lib")
_SONAMES = ("libcublas.so", "libcublas.so.13", "libcublas.so.12", "libcublas.so.11")


def _cublas_candidates(found: str | None) -> list[str]:
    """Names and paths to hand to dlopen, in the order they are tried.

    ``found`` is what ctypes.util.find_library("cublas") returned.
    """
    candidates = [found] if found else []
    candidates += _SONAMES
    for directory in _library_dirs():
        # Newest soname first; 'libcublas.so*' leaves out libcublasLt.
        candidates += sorted(glob.glob(str(directory / "libcublas.so*")), reverse=True)
    return list(dict.fromkeys(candidates))


def _load_cublas(library: str | os.PathLike[str] | None) -> tuple[ctypes.CDLL, str]:
    """Open libcublas: the given one, or the first candidate that loads."""
    tried: list[str] = []
    if library is not None:
        candidates = [os.fspath(library)]
    else:
        found = ctypes.util.find_library("cublas")
        if not found:
            tried.append("ctypes.util.find_library('cublas'): not found")
        candidates = _cublas_candidates(found)
    for candidate in candidates:
        try:
            return ctypes.CDLL(candidate), candidate
        except OSError as error:
            # dlopen's message starts with the name it was given; say it once.
            reason = str(error).removeprefix(f"{candidate}: ")
            tried.append(f"{candidate} ({reason})")
    if library is None:
        cuda_dirs = [str(d) for d in _library_dirs() if not str(d).endswith(_WHEEL_DIRS)]
        tried.append(
            f"libcublas.so* in {', '.join(cuda_dirs)} and in "
            f"{' or '.join(_WHEEL_DIRS)} under the {len(sys.path)} sys.path entries: "
            "none loaded"
        )
    raise VendorUnavailable(
        "cuBLAS is not available: no libcublas could be loaded. Tried: "
        + "; ".join(tried)
        + ". Install the CUDA toolkit or the nvidia-cublas wheel, or set CUDA_HOME."
    )


def _declare(lib: ctypes.CDLL, path: str) -> None:
    """Give the entry points their C signatures, so ctypes passes ints and pointers right."""
    p, i, vp = ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p
    signatures: dict[str, list[Any]] = {
        "cublasCreate_v2": [ctypes.POINTER(p)],
        "cublasDestroy_v2": [p],
        "cublasSetMathMode": [p, i],
        "cublasGetVersion_v2": [p, ctypes.POINTER(i)],
        # handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc
        "cublasSgemm_v2": [p, i, i, i, i, i, vp, vp, i, vp, i, vp, vp, i],
        "cublasDgemm_v2": [p, i, i, i, i, i, vp, vp, i, vp, i, vp, vp, i],
    }
    for name, argtypes in signatures.items():
        try:
            function = getattr(lib, name)
        except AttributeError:
            raise VendorUnavailable(
                f"{path} has no {name}: not a cuBLAS with the _v2 API (CUDA 9 or newer)"
            ) from None
        function.argtypes = argtypes
        function.restype = ctypes.c_int  # cublasStatus_t


def _cublas_error(function: str, status: int) -> VendorError:
    name = cublas_status_name(status)
    hint = _CUBLAS_HINTS.get(status)
    return VendorError(
        f"{function} failed: {name} ({status})" + (f": {hint}" if hint else ""),
        function=function,
        status=status,
    )


class Cublas:
    """A cuBLAS handle, for GEMMs on device pointers from the current CUDA context.

    cuBLAS's runtime API works in whichever driver context is current on the
    calling thread, so the caller makes its PyCUDA context current before
    creating the handle, before each ``gemm`` and before ``close``: the handle
    belongs to that context (cuBLAS allocates its workspace there) and must not
    be used from another.

    The handle is set to CUBLAS_DEFAULT_MATH: float32 products compute in
    float32 (no TF32 tensor cores), float64 in float64. The environment can
    override that (NVIDIA_TF32_OVERRIDE=1 forces TF32): ``math_environment``
    holds the relevant variables as they were when the handle was created, and
    ``math_note`` a warning to report with the results, or None.

    There is no ``__del__``: destroying a handle needs its context current,
    which a garbage collector cannot promise, so call ``close`` (or use the
    handle as a context manager while the context is current).

    Raises ``VendorUnavailable`` when no libcublas loads or no handle can be
    created (no driver or GPU, a driver too old for this cuBLAS, no context).
    """

    def __init__(self, library: str | os.PathLike[str] | None = None) -> None:
        self._handle: ctypes.c_void_p | None = None
        self._lib, self.library_path = _load_cublas(library)
        _declare(self._lib, self.library_path)
        handle = ctypes.c_void_p()
        status = self._lib.cublasCreate_v2(ctypes.byref(handle))
        if status != 0:
            raise VendorUnavailable(
                f"cuBLAS ({self.library_path}) loaded but cannot start: "
                f"{_cublas_error('cublasCreate_v2', status)}"
            )
        self._handle = handle
        try:
            self._check(
                "cublasSetMathMode", self._lib.cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH)
            )
            code = ctypes.c_int()
            self._check(
                "cublasGetVersion_v2", self._lib.cublasGetVersion_v2(handle, ctypes.byref(code))
            )
        except BaseException:
            with contextlib.suppress(VendorError):  # keep the first error, not close's
                self.close()
            raise
        self.version_code = code.value
        self.version = _decode_version(code.value)
        self.math_environment = cublas_math_environment()
        self.math_note = cublas_math_note(self.math_environment)

    @classmethod
    def load(cls, library: str | os.PathLike[str] | None = None) -> Cublas:
        """Same as ``Cublas(library)``: find libcublas and create a handle."""
        return cls(library)

    @property
    def closed(self) -> bool:
        return self._handle is None

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<Cublas {getattr(self, 'version', '?')} from {self.library_path} ({state})>"

    def __enter__(self) -> Cublas:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def dtype_problem(dtype: Any) -> str | None:
        """Why cuBLAS cannot multiply operands of this dtype, or None when it can."""
        dtype = np.dtype(dtype)
        if dtype in (np.float32, np.float64):
            return None
        if dtype.kind in "iu":
            # cublasGemmEx's only integer GEMM takes int8 operands, not wider ones.
            return f"cuBLAS has no {dtype} GEMM (its integer GEMM takes int8 operands only)"
        return f"cuBLAS GEMM is wired for float32 and float64 here, not {dtype}"

    def gemm(
        self,
        dtype: Any,
        M: int,
        N: int,
        K: int,
        a_ptr: int,
        lda: int,
        b_ptr: int,
        ldb: int,
        c_ptr: int,
        ldc: int,
    ) -> None:
        """Row-major C (M×N) = A (M×K) · B (K×N) on device pointers.

        Leading dimensions are row strides in elements. The call only enqueues
        the work, on the default (NULL) stream, and returns at once: time it
        with CUDA events recorded on the default stream around it, and
        synchronize before reading C. With K = 0, C is set to zeros (BLAS's
        C = beta·C with beta = 0, which never reads C; checked on cuBLAS 13.1).

        Raises ``VendorError`` for an unsupported dtype or a failing call and
        ``ValueError`` for sizes or strides that do not describe the product.
        """
        dtype = np.dtype(dtype)
        problem = self.dtype_problem(dtype)
        if problem:
            raise VendorError(problem)
        if self._handle is None:
            raise VendorError("this cuBLAS handle is closed")
        check_row_major(M, N, K, lda, ldb, ldc, int32=True)
        if M == 0 or N == 0:
            return  # no output; K = 0 still goes through, as BLAS then sets C = beta·C = 0
        transa, transb, m, n, k, A, lda_, B, ldb_, C, ldc_ = _colmajor_args(
            M, N, K, a_ptr, lda, b_ptr, ldb, c_ptr, ldc
        )
        scalar: type[ctypes.c_float] | type[ctypes.c_double]
        if dtype == np.float32:
            name, function, scalar = "cublasSgemm_v2", self._lib.cublasSgemm_v2, ctypes.c_float
        else:
            name, function, scalar = "cublasDgemm_v2", self._lib.cublasDgemm_v2, ctypes.c_double
        # alpha and beta are read from host memory (the handle's default pointer
        # mode) before the call returns, so locals are safe.
        alpha, beta = scalar(1.0), scalar(0.0)
        status = function(
            self._handle, transa, transb, m, n, k,
            ctypes.byref(alpha), A, lda_, B, ldb_, ctypes.byref(beta), C, ldc_,
        )  # fmt: skip
        self._check(name, status)

    def close(self) -> None:
        """Destroy the handle; idempotent. The handle's context must be current."""
        handle, self._handle = self._handle, None
        if handle is not None:
            self._check("cublasDestroy_v2", self._lib.cublasDestroy_v2(handle))

    def _check(self, function: str, status: int) -> None:
        if status != 0:
            raise _cublas_error(function, status)
