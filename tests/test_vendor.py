"""The vendor BLAS bindings, as far as they can be checked without their devices.

cuBLAS's argument mapping is checked in NumPy, by emulating a column-major
GEMM on flat buffers, and the ctypes binding itself against a stand-in
libcublas compiled here (when a C compiler is present) that runs that GEMM on
host memory. A test on a real GPU runs where PyCUDA and cuBLAS work.
"""

from __future__ import annotations

import builtins
import ctypes
import ctypes.util
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from xbackend.backends import cublas as vendor
from xbackend.backends.clblast import Clblast
from xbackend.backends.cublas import (
    CUBLAS_OP_N,
    Cublas,
    _colmajor_args,
    _decode_version,
    cublas_status_name,
)
from xbackend.backends.numpy_blas import numpy_blas_name
from xbackend.backends.vendor import VendorError, VendorUnavailable
from xbackend.problems import Reference, check
from xbackend.pytest_plugin import open_backend, skip_or_fail
from xbackend.results.plan import Target

# -- cuBLAS: loading and status names ------------------------------------------


def test_cublas_without_library_or_device_fails_clearly():
    """No libcublas here: the message lists what was tried. With one but no GPU: says why."""
    try:
        handle = Cublas()
    except VendorUnavailable as error:
        message = str(error)
        if "no libcublas could be loaded" in message:
            assert "find_library" in message or "libcublas.so" in message
            assert "libcublas.so.12" in message
            assert "/usr/local/cuda/lib64" in message
            assert "nvidia/cublas/lib" in message and "nvidia/cu13/lib" in message
        else:
            assert "cublasCreate_v2 failed" in message
            assert "CUBLAS_STATUS_" in message
    except VendorError as error:
        assert "CUBLAS_STATUS_" in str(error)
    else:  # a machine with a working GPU and cuBLAS
        handle.close()
        pytest.skip("cuBLAS works here; the failure path cannot be exercised")


def test_cublas_explicit_missing_library(tmp_path):
    missing = tmp_path / "libcublas.so.99"
    with pytest.raises(VendorUnavailable, match="no libcublas could be loaded") as raised:
        Cublas(missing)
    assert str(missing) in str(raised.value)


def test_cublas_library_without_symbols(tmp_path):
    """A library that loads but is not cuBLAS is refused by name, not with AttributeError."""
    libc = ctypes.util.find_library("c")
    if libc is None:
        pytest.skip("no libc to stand in for a wrong library")
    with pytest.raises(VendorUnavailable, match="has no cublasCreate_v2"):
        Cublas(libc)


def test_candidates_cover_the_documented_places(monkeypatch, tmp_path):
    wheel = tmp_path / "site" / "nvidia" / "cu13" / "lib"
    wheel.mkdir(parents=True)
    (wheel / "libcublas.so.13").touch()
    (wheel / "libcublasLt.so.13").touch()
    toolkit = tmp_path / "cuda" / "lib64"
    toolkit.mkdir(parents=True)
    (toolkit / "libcublas.so.12").touch()
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site")])
    found = vendor._cublas_candidates("libcublas.so.12")
    assert found[:5] == [
        "libcublas.so.12",
        "libcublas.so",
        "libcublas.so.13",
        "libcublas.so.11",
        str(toolkit / "libcublas.so.12"),
    ]
    assert str(wheel / "libcublas.so.13") in found
    assert not any("Lt" in name for name in found)


def test_status_names():
    assert cublas_status_name(0) == "CUBLAS_STATUS_SUCCESS"
    assert cublas_status_name(1) == "CUBLAS_STATUS_NOT_INITIALIZED"
    assert cublas_status_name(3) == "CUBLAS_STATUS_ALLOC_FAILED"
    assert cublas_status_name(7) == "CUBLAS_STATUS_INVALID_VALUE"
    assert cublas_status_name(8) == "CUBLAS_STATUS_ARCH_MISMATCH"
    assert cublas_status_name(11) == "CUBLAS_STATUS_MAPPING_ERROR"
    assert cublas_status_name(13) == "CUBLAS_STATUS_EXECUTION_FAILED"
    assert cublas_status_name(14) == "CUBLAS_STATUS_INTERNAL_ERROR"
    assert cublas_status_name(15) == "CUBLAS_STATUS_NOT_SUPPORTED"
    assert cublas_status_name(16) == "CUBLAS_STATUS_LICENSE_ERROR"
    assert "42" in cublas_status_name(42)


def test_status_error_names_function_and_status():
    error = vendor._cublas_error("cublasSgemm_v2", 7)
    assert error.function == "cublasSgemm_v2" and error.status == 7
    assert "cublasSgemm_v2 failed: CUBLAS_STATUS_INVALID_VALUE (7)" in str(error)


@pytest.mark.parametrize(
    ("code", "text"),
    [(130002, "13.0.2"), (120304, "12.3.4"), (110902, "11.9.2"), (11605, "11.6.5")],
)
def test_version_decoding(code, text):
    assert _decode_version(code) == text


def test_math_environment(monkeypatch):
    for name in vendor._MATH_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    assert vendor.cublas_math_environment() == {}
    assert vendor.cublas_math_note({}) is None
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")
    environment = vendor.cublas_math_environment()
    assert environment == {"NVIDIA_TF32_OVERRIDE": "0"}
    assert vendor.cublas_math_note(environment) is None  # 0 forbids TF32: nothing to warn of
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "1")
    monkeypatch.setenv("CUBLAS_EMULATE_SINGLE_PRECISION", "1")
    note = vendor.cublas_math_note(vendor.cublas_math_environment())
    assert (
        note is not None
        and "TF32" in note
        and "1e-4" in note
        and "CUBLAS_EMULATE_SINGLE_PRECISION" in note
    )


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [
        (np.float32, None),
        (np.float64, None),
        (np.int32, "integer GEMM takes int8"),
        (np.float16, "float32 and float64"),
    ],
)
def test_cublas_dtype_problem(dtype, expected):
    problem = Cublas.dtype_problem(dtype)
    if expected is None:
        assert problem is None
    else:
        assert problem is not None and expected in problem


# -- cuBLAS: the row-major to column-major mapping ------------------------------


def _colmajor_gemm(m, n, k, A, lda, B, ldb, C, ldc):
    """Reference column-major C = A·B (no transposes) on flat buffers, in place on C."""
    a = np.lib.stride_tricks.as_strided(A, (m, k), (A.itemsize, lda * A.itemsize))
    b = np.lib.stride_tricks.as_strided(B, (k, n), (B.itemsize, ldb * B.itemsize))
    c = np.lib.stride_tricks.as_strided(C, (m, n), (C.itemsize, ldc * C.itemsize))
    c[...] = a @ b


def _padded(rng, rows, cols, ld, dtype=np.float64):
    """A row-major rows×cols matrix in a flat buffer with row stride ld (padding = NaN)."""
    flat = np.full(max(1, rows * ld), np.nan, dtype)
    flat[: rows * ld].reshape(rows, ld)[:, :cols] = rng.uniform(-1, 1, (rows, cols))
    return flat


def test_colmajor_args_mapping():
    args = _colmajor_args(3, 5, 7, 100, 9, 200, 6, 300, 8)
    assert args == (CUBLAS_OP_N, CUBLAS_OP_N, 5, 3, 7, 200, 6, 100, 9, 300, 8)


def test_colmajor_args_empty_dimensions_keep_leading_dimensions_positive():
    args = _colmajor_args(0, 0, 0, 1, 0, 2, 0, 3, 0)
    assert args[2:5] == (0, 0, 0)
    assert min(args[6], args[8], args[10]) >= 1


@pytest.mark.parametrize(
    ("lda", "ldb", "ldc", "message"),
    [(6, 5, 5, "lda = 6"), (7, 4, 5, "ldb = 4"), (7, 5, 4, "ldc = 4")],
)
def test_colmajor_args_rejects_short_rows(lda, ldb, ldc, message):
    with pytest.raises(ValueError, match=message):
        _colmajor_args(3, 5, 7, 0, lda, 0, ldb, 0, ldc)


@pytest.mark.parametrize(("M", "N", "K"), [(3, 5, 7), (7, 2, 4), (1, 9, 1), (6, 1, 3)])
@pytest.mark.parametrize("pad", [0, 3])
def test_colmajor_args_compute_the_row_major_product(M, N, K, pad):
    rng = np.random.default_rng(20240611)
    lda, ldb, ldc = K + pad, N + pad + 1, N + 2 * pad
    A = _padded(rng, M, K, lda)
    B = _padded(rng, K, N, ldb)
    C = np.full(M * ldc, np.nan)
    # Hand the emulator the buffers themselves in place of device pointers.
    buffers = {1: A, 2: B, 3: C}
    transa, transb, m, n, k, pa, la, pb, lb, pc, lc = _colmajor_args(
        M, N, K, 1, lda, 2, ldb, 3, ldc
    )
    assert (transa, transb) == (CUBLAS_OP_N, CUBLAS_OP_N)
    _colmajor_gemm(m, n, k, buffers[pa], la, buffers[pb], lb, buffers[pc], lc)
    expected = A.reshape(M, lda)[:, :K] @ B.reshape(K, ldb)[:, :N]
    result = C.reshape(M, ldc)
    np.testing.assert_allclose(result[:, :N], expected, rtol=1e-12)
    assert np.isnan(result[:, N:]).all()  # the padding of C is not written


# -- cuBLAS: the ctypes binding against a stand-in library ----------------------

# A libcublas stand-in: the entry points Cublas uses, with GEMM run column-major
# on host memory, status codes as cuBLAS returns them, and a record of calls.
_FAKE_CUBLAS = r"""
#include <stdlib.h>

static int math_mode = -1, destroyed = 0, created = 0;
int fake_math_mode(void) { return math_mode; }
int fake_destroyed(void) { return destroyed; }
int fake_created(void) { return created; }

int cublasCreate_v2(void **handle) { *handle = malloc(8); created++; return 0; }
int cublasDestroy_v2(void *handle) { free(handle); destroyed++; return 0; }
int cublasSetMathMode(void *handle, int mode) { (void)handle; math_mode = mode; return 0; }
int cublasGetVersion_v2(void *handle, int *v) { (void)handle; *v = 130002; return 0; }

#define GEMM(NAME, T)                                                                     \
int NAME(void *h, int ta, int tb, int m, int n, int k, const T *alpha, const T *A,       \
         int lda, const T *B, int ldb, const T *beta, T *C, int ldc)                      \
{                                                                                         \
    (void)h;                                                                              \
    if (ta != 0 || tb != 0 || m < 0 || n < 0 || k < 0) return 7;                          \
    if (lda < (m > 1 ? m : 1) || ldb < (k > 1 ? k : 1) || ldc < (m > 1 ? m : 1)) return 7;\
    for (int j = 0; j < n; j++)                                                           \
        for (int i = 0; i < m; i++) {                                                     \
            T sum = 0;                                                                    \
            for (int l = 0; l < k; l++) sum += A[i + l * lda] * B[l + j * ldb];           \
            C[i + j * ldc] = *alpha * sum + (*beta == 0 ? 0 : *beta * C[i + j * ldc]);    \
        }                                                                                 \
    return 0;                                                                             \
}
GEMM(cublasSgemm_v2, float)
GEMM(cublasDgemm_v2, double)
"""


@pytest.fixture(scope="module")
def fake_cublas(tmp_path_factory: pytest.TempPathFactory) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        pytest.skip("no C compiler to build the stand-in libcublas")
    root = tmp_path_factory.mktemp("fake_cublas")
    (root / "cublas.c").write_text(_FAKE_CUBLAS)
    library = root / "libcublas.so.13"
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O1", "-o", str(library), str(root / "cublas.c")],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return library


def test_binding_sets_default_math_and_reads_version(fake_cublas):
    with Cublas(fake_cublas) as blas:
        assert blas.version == "13.0.2" and blas.version_code == 130002
        assert blas.library_path == str(fake_cublas)
        lib = ctypes.CDLL(str(fake_cublas))
        assert lib.fake_math_mode() == vendor.CUBLAS_DEFAULT_MATH == 0
        assert "13.0.2" in repr(blas) and "open" in repr(blas)
    assert blas.closed


def test_binding_close_is_idempotent(fake_cublas):
    lib = ctypes.CDLL(str(fake_cublas))
    blas = Cublas.load(fake_cublas)
    before = lib.fake_destroyed()
    blas.close()
    blas.close()
    assert lib.fake_destroyed() == before + 1
    with pytest.raises(VendorError, match="closed"):
        blas.gemm(np.float32, 1, 1, 1, 0, 1, 0, 1, 0, 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("M", "N", "K", "pad"), [(5, 3, 7, 0), (4, 9, 2, 3), (1, 1, 1, 1)])
def test_binding_gemm_row_major(fake_cublas, dtype, M, N, K, pad):
    rng = np.random.default_rng(7)
    lda, ldb, ldc = K + pad, N + pad, N + 2 * pad
    A = _padded(rng, M, K, lda, dtype)
    B = _padded(rng, K, N, ldb, dtype)
    C = np.full(M * ldc, np.nan, dtype)
    with Cublas(fake_cublas) as blas:
        # Host addresses stand in for device pointers: the stand-in reads them directly.
        blas.gemm(dtype, M, N, K, A.ctypes.data, lda, B.ctypes.data, ldb, C.ctypes.data, ldc)
    expected = A.reshape(M, lda)[:, :K].astype(np.float64) @ B.reshape(K, ldb)[:, :N]
    result = C.reshape(M, ldc)
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(result[:, :N], expected, rtol=tolerance, atol=tolerance)
    assert np.isnan(result[:, N:]).all()


def test_binding_gemm_zero_sizes(fake_cublas):
    C = np.full(6, np.nan, np.float32)
    with Cublas(fake_cublas) as blas:
        blas.gemm(np.float32, 0, 3, 4, 0, 4, 0, 3, C.ctypes.data, 3)  # M = 0: nothing
        assert np.isnan(C).all()
        blas.gemm(np.float32, 2, 3, 0, 0, 0, 0, 3, C.ctypes.data, 3)  # K = 0: C = 0
    np.testing.assert_array_equal(C, 0)


def test_binding_gemm_refuses_bad_arguments(fake_cublas):
    with Cublas(fake_cublas) as blas:
        with pytest.raises(VendorError, match="integer GEMM"):
            blas.gemm(np.int32, 1, 1, 1, 0, 1, 0, 1, 0, 1)
        with pytest.raises(ValueError, match="ldc = 2"):
            blas.gemm(np.float32, 2, 3, 4, 0, 4, 0, 3, 0, 2)
        with pytest.raises(ValueError, match="does not fit"):
            blas.gemm(np.float32, 2**31, 1, 1, 0, 1, 0, 1, 0, 1)


def test_binding_reports_a_failing_status(fake_cublas, monkeypatch):
    """A nonzero status becomes VendorError naming the call and the status."""
    monkeypatch.setattr(
        vendor,
        "_colmajor_args",
        lambda *args: (1, 0, 1, 1, 1, 0, 1, 0, 1, 0, 1),  # transa = T: the stand-in says 7
    )
    with Cublas(fake_cublas) as blas, pytest.raises(VendorError) as raised:
        blas.gemm(np.float64, 1, 1, 1, 0, 1, 0, 1, 0, 1)
    assert raised.value.function == "cublasDgemm_v2"
    assert raised.value.status == 7
    assert "CUBLAS_STATUS_INVALID_VALUE" in str(raised.value)


# -- cuBLAS on a real GPU (skipped without PyCUDA, a GPU and cuBLAS) ------------


def test_cublas_on_gpu():
    drv = pytest.importorskip("pycuda.driver", reason="PyCUDA is not installed")
    try:
        drv.init()
        context = drv.Device(0).make_context()
    except Exception as error:  # no driver or no device
        pytest.skip(f"no CUDA device: {error}")
    try:
        try:
            blas = Cublas()
        except VendorUnavailable as error:
            pytest.skip(str(error))
        with blas:
            rng = np.random.default_rng(3)
            M, N, K, pad = 67, 45, 33, 5
            for dtype in (np.float32, np.float64):
                A = rng.uniform(-1, 1, (M, K + pad)).astype(dtype)
                B = rng.uniform(-1, 1, (K, N + pad)).astype(dtype)
                C = np.full((M, N + pad), np.nan, dtype)
                a, b, c = drv.to_device(A), drv.to_device(B), drv.to_device(C)
                blas.gemm(dtype, M, N, K, int(a), K + pad, int(b), N + pad, int(c), N + pad)
                drv.memcpy_dtoh(C, c)
                expected = A[:, :K].astype(np.float64) @ B[:, :N].astype(np.float64)
                tolerance = 1e-4 if dtype == np.float32 else 1e-12
                np.testing.assert_allclose(C[:, :N], expected, rtol=tolerance, atol=tolerance)
                assert np.isnan(C[:, N:]).all()
            if blas.math_note is None:
                # No TF32: its 10-bit mantissa would leave errors near 1e-4 at this size.
                n = 1024
                A = rng.standard_normal((n, n)).astype(np.float32)
                B = rng.standard_normal((n, n)).astype(np.float32)
                C = np.empty((n, n), np.float32)
                a, b, c = drv.to_device(A), drv.to_device(B), drv.to_device(C)
                blas.gemm(np.float32, n, n, n, int(a), n, int(b), n, int(c), n)
                drv.memcpy_dtoh(C, c)
                expected = A.astype(np.float64) @ B.astype(np.float64)
                assert np.abs(C - expected).max() / np.abs(expected).max() < 2e-5
    finally:
        context.pop()


# -- CLBlast --------------------------------------------------------------------


def test_clblast_unavailable_without_pyclblast(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyclblast", None)
    ok, reason = Clblast.available()
    assert ok is False
    assert reason == (
        "pyclblast is not installed: "
        "apt-get install libclblast-dev && pip install 'xbackend[clblast]'"
    )
    with pytest.raises(VendorUnavailable, match="libclblast-dev"):
        Clblast()


def test_clblast_without_its_shared_library(monkeypatch):
    """pyclblast built, libclblast.so.1 gone: the reason says which library and where."""
    real_import = builtins.__import__

    def failing_import(name, *args, **kwargs):
        if name == "pyclblast":
            raise ImportError("libclblast.so.1: cannot open shared object file")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "pyclblast", raising=False)
    monkeypatch.setattr(builtins, "__import__", failing_import)
    ok, reason = Clblast.available()
    assert ok is False
    assert "libclblast.so.1" in reason and "LD_LIBRARY_PATH" in reason


def test_opencl_vendor_lines_name_clblast():
    from xbackend.backends.opencl import OpenCLBackend

    gemm, reduced = OpenCLBackend.VENDOR_LINES
    assert "CLBlast" in gemm and "CLBlast" in reduced


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [
        (np.float32, None),
        (np.float64, None),
        (np.int32, "no integer GEMM"),
        (np.complex64, "float32 and float64"),
    ],
)
def test_clblast_dtype_problem(dtype, expected):
    problem = Clblast.dtype_problem(dtype)
    if expected is None:
        assert problem is None
    else:
        assert problem is not None and expected in problem


def test_clblast_dtype_problem_without_double_support():
    class Device:
        name = "Tiny GPU "
        double_fp_config = 0

    problem = Clblast.dtype_problem(np.float64, Device())  # type: ignore[arg-type]
    assert problem == "Tiny GPU has no double precision, which CLBlast needs"
    assert Clblast.dtype_problem(np.float32, Device()) is None  # type: ignore[arg-type]


# -- CLBlast on the OpenCL device (XBACKEND_REQUIRE=clblast: a failure, not a skip) --


@pytest.fixture(scope="module")
def clblast_opencl():
    """The OpenCL backend with CLBlast usable; without either, a skip with its reason."""
    opened = open_backend(Target("opencl"))
    ok, reason = Clblast.available()
    if not ok:
        opened.close()
        skip_or_fail("clblast", reason)
    yield opened
    opened.close()


def _clblast_dtype(backend, dtype):
    problem = backend.variant_problem("vendor", np.dtype(dtype))
    if problem:
        pytest.skip(problem)
    return dtype


# Odd sizes, one past CLBlast's indirect-GEMM threshold (pad and transpose kernels).
CLBLAST_SHAPES = [(1, 1, 1), (7, 5, 3), (33, 17, 65), (130, 67, 129), (400, 257, 386)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("M", "K", "N"), CLBLAST_SHAPES)
@pytest.mark.parametrize("op", ["mm", "rmm"])
def test_clblast_vendor_line_is_equal(clblast_opencl, op, M, K, N, dtype):
    dtype = _clblast_dtype(clblast_opencl, dtype)
    if op == "rmm":
        M, N = M + M % 2, N + N % 2
    rng = np.random.default_rng(M * K * N)
    A = rng.uniform(-1, 1, (M, K)).astype(dtype)
    B = rng.uniform(-1, 1, (K, N)).astype(dtype)
    result = clblast_opencl.measure(A, B, "vendor", op=op, warmup=0, samples=1).result
    verdict = check(result, Reference.of(A, B, op))
    assert verdict.equal, verdict


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["mm", "rmm"])
def test_clblast_vendor_line_on_strided_views(clblast_opencl, op, dtype):
    """Sub-matrices go with their row stride as CLBlast's leading dimension."""
    dtype = _clblast_dtype(clblast_opencl, dtype)
    rng = np.random.default_rng(5)
    big_A = rng.uniform(-1, 1, (40, 70)).astype(dtype)
    big_B = rng.uniform(-1, 1, (50, 60)).astype(dtype)
    A, B = big_A[3:37, 5:38], big_B[7:40, 1:43]  # 34×33 · 33×42, rows longer than they are
    assert not (A.flags.c_contiguous or B.flags.c_contiguous)
    result = clblast_opencl.measure(A, B, "vendor", op=op, warmup=0, samples=0).result
    assert check(result, Reference.of(A, B, op)).equal


def test_clblast_zero_sized_and_empty_k(clblast_opencl):
    for M, K, N in [(0, 3, 4), (4, 0, 6)]:
        A, B = np.ones((M, K), np.float32), np.ones((K, N), np.float32)
        np.testing.assert_array_equal(clblast_opencl.matmul(A, B, "vendor"), np.zeros((M, N)))


def test_gpu_clblast_script_says_what_it_needs(tmp_path):
    """scripts/gpu_clblast.sh (the GPU machine's CLBlast build) refuses clearly without
    its .deb files; its build was checked by hand against debs unpacked in /tmp."""
    script = Path(__file__).resolve().parent.parent / "scripts" / "gpu_clblast.sh"
    done = subprocess.run(
        ["bash", str(script), str(tmp_path / "prefix")],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "DEBS": str(tmp_path), "SDIST": str(tmp_path)},
        timeout=60,
    )
    assert done.returncode == 2
    assert f"no .deb files in {tmp_path}" in done.stderr


# -- NumPy ----------------------------------------------------------------------


def test_numpy_blas_name():
    name = numpy_blas_name()
    assert isinstance(name, str) and name.strip()


def test_numpy_blas_name_falls_back(monkeypatch):
    def old_show_config(*args, **kwargs):
        raise TypeError("show_config() got an unexpected keyword argument 'mode'")

    monkeypatch.setattr(np, "show_config", old_show_config)
    assert numpy_blas_name() == "NumPy's BLAS"
