"""Issue 54, item 18: PyOpenCL's binary cache failing to write (a file size limit, a full
disk, a cache folder that cannot be made) failed every build, pyopencl 2026.1's fallback
raising ``KeyError: 'PYOPENCL_CACHE_FAILURE_FATAL'``. The cache is only a cache: the
program is built without it, with one warning naming why, and every product is right.

Each case runs in a process of its own, with its own cache folder (``XDG_CACHE_HOME``):
the failure it plants, and the file size limit, stay there."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from xbackend.backends import opencl

TIMEOUT_S = 120
# Builds two programs (two tiles) and checks each product against float64; prints one
# line per product.
PRODUCTS = """
import numpy as np, xbackend
rng = np.random.default_rng(5418)
backend = xbackend.get_backend("opencl")
for tile in (8, 16):
    A = rng.standard_normal((33, 65)).astype(np.float32)
    B = rng.standard_normal((65, 7)).astype(np.float32)
    C = backend.matmul(A, B, variant="tiled", tile=tile)
    exact = A.astype(np.float64) @ B.astype(np.float64)
    print(tile, bool(np.allclose(C, exact, rtol=1e-4, atol=1e-4)))
# PyOpenCL keeps no binaries of its own where the driver caches builds (NVIDIA's does)
from pyopencl.characterize import has_src_build_cache
print("driver-cached" if has_src_build_cache(backend._context.devices[0]) else "binaries")
"""
FILE_LIMIT_BYTES = 2048  # the binary cache's files are larger; the runtime's ICD file is not


def _file_limit() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT_BYTES, FILE_LIMIT_BYTES))


def _products(cache_home: Path, limited: bool) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache_home)}
    env.pop("PYOPENCL_CACHE_FAILURE_FATAL", None)
    env.pop("PYOPENCL_NO_CACHE", None)
    return subprocess.run(
        [sys.executable, "-c", PRODUCTS], env=env, capture_output=True, text=True,
        timeout=TIMEOUT_S, preexec_fn=_file_limit if limited else None, check=False,
    )  # fmt: skip


@pytest.fixture
def _opencl_here() -> None:
    available, reason = opencl.OpenCLBackend.available()
    if not available:
        pytest.skip(f"opencl unavailable: {reason}")


# Where each failure is planted (a file where the cache's folder goes), and what it says.
FAILURES = {
    "binaries' folder under a file": ("pyopencl", "Not a directory"),
    "invoker's folder under a file": ("pytools", "File exists"),
    "file size limit": ("pyopencl", "File too large"),
}


@pytest.mark.slow  # a process each: the fast lane keeps the in-process test below
@pytest.mark.usefixtures("_opencl_here")
@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_a_cache_that_cannot_be_written_builds_without_it(tmp_path, failure):
    cache_home = tmp_path / "cache"
    cache_home.mkdir()
    folder, cause = FAILURES[failure]
    if failure != "file size limit":
        (cache_home / folder).write_text("a file where the cache makes its folder")
    done = _products(cache_home, limited=failure == "file size limit")
    assert done.returncode == 0, done.stderr
    *products, binaries = done.stdout.split()
    assert products == ["8", "True", "16", "True"]
    assert "KeyError" not in done.stderr and "Traceback" not in done.stderr
    warned = [line for line in done.stderr.splitlines() if "PyOpenCL's cache failed" in line]
    if binaries == "driver-cached" and folder == "pyopencl":
        # No binaries of PyOpenCL's to write (NVIDIA's driver caches them): the folder
        # under a file is never made; a file size limit still meets pytools' cache, an
        # SQLite file, which says it as its own "disk I/O error".
        assert len(warned) == (1 if failure == "file size limit" else 0), done.stderr
        if warned:
            assert f"{cache_home / 'pytools'}" in warned[0], warned
            assert cause in warned[0] or "disk I/O error" in warned[0], warned
        return
    assert len(warned) == 1, done.stderr  # once, not at each build
    assert f"{cache_home / folder}" in warned[0] and cause in warned[0], warned
    assert "OpenCL programs are built without its caches in this process" in warned[0]


@pytest.mark.usefixtures("_opencl_here")
def test_a_kernel_that_does_not_compile_still_says_so_without_the_cache(tmp_path, monkeypatch):
    """The uncached build that follows a cache failure reports a compiler error as any
    build does, never as the cache's: no warning blames the cache."""
    import numpy as np
    import pyopencl as cl

    import xbackend
    from xbackend.backends import opencl_build
    from xbackend.errors import KernelCompileError

    def failing(*args: object, **kwargs: object) -> None:
        raise KeyError("PYOPENCL_CACHE_FAILURE_FATAL")

    monkeypatch.setattr(opencl_build, "_cached", failing)
    monkeypatch.setattr(opencl_build, "_cache_failure", None)
    # Turned off by the failure: for this test only (the process's other builds keep it).
    monkeypatch.setattr(cl, "_PYOPENCL_NO_CACHE", cl._PYOPENCL_NO_CACHE)
    backend = xbackend.get_backend("opencl")
    rng = np.random.default_rng(5418)
    A, B = (rng.standard_normal((9, 9)).astype(np.float32) for _ in range(2))
    monkeypatch.setenv(opencl.BUILD_OPTIONS_ENV, "-DTILE=not_a_number")
    with warnings.catch_warnings(record=True) as caught, pytest.raises(KernelCompileError):
        warnings.simplefilter("always")
        backend.matmul(A, B, variant="tiled", tile=8)
    assert not [w for w in caught if issubclass(w.category, opencl_build.ProgramCacheWarning)]


@pytest.mark.usefixtures("_opencl_here")
def test_a_cache_write_that_fails_is_said_once_and_every_product_is_right(tmp_path, monkeypatch):
    """In this process: pyopencl's fallback raises its KeyError over the write's error (a
    file size limit); the build goes on without the cache, one warning names the file and
    the reason, and the next build, another tile, says nothing more."""
    import errno

    import numpy as np
    import pyopencl as cl

    import xbackend
    from xbackend.backends import opencl_build

    binary = tmp_path / "pyopencl" / "binary"

    def failing(*args: object, **kwargs: object) -> None:
        try:
            raise OSError(errno.EFBIG, os.strerror(errno.EFBIG), str(binary))
        except OSError:
            raise KeyError("PYOPENCL_CACHE_FAILURE_FATAL") from None

    monkeypatch.setattr(opencl_build, "_cached", failing)
    monkeypatch.setattr(opencl_build, "_cache_failure", None)
    monkeypatch.setattr(cl, "_PYOPENCL_NO_CACHE", cl._PYOPENCL_NO_CACHE)
    backend = xbackend.get_backend("opencl")
    rng = np.random.default_rng(5418)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for tile in (4, 8):  # a fresh backend builds each tile's program itself
            A = rng.standard_normal((33, 65)).astype(np.float32)
            B = rng.standard_normal((65, 7)).astype(np.float32)
            C = backend.matmul(A, B, variant="tiled", tile=tile)
            exact = A.astype(np.float64) @ B.astype(np.float64)
            assert np.allclose(C, exact, rtol=1e-4, atol=1e-4)
    said = [
        str(w.message) for w in caught if issubclass(w.category, opencl_build.ProgramCacheWarning)
    ]
    assert said == [
        f"PyOpenCL's cache failed ({binary}: File too large); OpenCL programs are built without "
        "its caches in this process, each build taking the compiler's time "
        "(PYOPENCL_NO_CACHE=1 turns them off without this warning)"
    ]
    assert cl._PYOPENCL_NO_CACHE
