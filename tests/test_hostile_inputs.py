"""Hostile inputs and surroundings: racing processes, huge strides, odd values and files.

Each test here pins a finding of an adversarial review: what used to crash, hang,
segfault or answer wrongly now works or gets a clear error.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import xbackend
from xbackend.launches.geometries import per_product

SEED = 13

# -- the pip OpenCL runtime's registration, under concurrency ----------------------------

# A process that imports xbackend, waits for the go file (so that all start together),
# then lists the OpenCL platforms through the backend.
_LIST_PLATFORMS = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from xbackend.backends import opencl
    ready, go = Path(sys.argv[1]), Path(sys.argv[2])
    ready.touch()
    while not go.exists():
        time.sleep(0.001)
    names = sorted({device.platform for device in opencl.OpenCLBackend.list_devices()})
    print("|".join(names))
    """
)


def _child_env(cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["XDG_CACHE_HOME"] = str(cache)
    # The parent registered the runtime already (and pointed this at its own folder):
    # every child starts from the environment of a fresh shell.
    env.pop("OCL_ICD_VENDORS", None)
    env.pop("XBACKEND_NO_PIP_OPENCL", None)
    return env


def _pip_runtime_platforms() -> list[str]:
    from xbackend.backends import opencl

    library = Path(sysconfig.get_path("data")) / "lib" / "libintelocl.so"
    if opencl._IMPORT_ERROR is not None or not library.exists():  # no pyopencl
        pytest.skip("no OpenCL runtime installed by pip here")
    return sorted({device.platform for device in opencl.OpenCLBackend.list_devices()})


@pytest.mark.slow
def test_processes_started_together_all_see_the_pip_opencl_runtime(tmp_path):
    expected = _pip_runtime_platforms()
    assert expected
    processes = 12
    for attempt in range(4):
        cache = tmp_path / f"cache{attempt}"  # fresh and empty, shared by this round
        cache.mkdir()
        go = tmp_path / f"go{attempt}"
        ready = [tmp_path / f"ready{attempt}-{n}" for n in range(processes)]
        children = [
            subprocess.Popen(
                [sys.executable, "-c", _LIST_PLATFORMS, str(flag), str(go)],
                env=_child_env(cache),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for flag in ready
        ]
        deadline = time.monotonic() + 120
        while not all(flag.exists() for flag in ready) and time.monotonic() < deadline:
            time.sleep(0.01)
        go.touch()
        outputs = [child.communicate(timeout=120) for child in children]
        for child, (out, err) in zip(children, outputs, strict=True):
            assert child.returncode == 0, err
            assert out.strip().split("|") == expected, (attempt, out, err)


@pytest.mark.slow
def test_an_empty_xdg_cache_home_means_unset(tmp_path):
    _pip_runtime_platforms()
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = _child_env(tmp_path)
    env.update(XDG_CACHE_HOME="", HOME=str(home))
    code = "from xbackend.backends import opencl; print(len(opencl.OpenCLBackend.list_devices()))"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=work, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) > 0
    assert list(work.iterdir()) == []  # no ./xbackend/ in the current directory
    assert (home / ".cache" / "xbackend" / "OpenCL").is_dir()


# -- views whose span passes 32-bit offsets ------------------------------------------------

# Each case makes a small view of a huge array: np.empty reserves the array, and only the
# view's elements are written, so only their pages are ever committed (unless the code
# under test reads the gaps between the rows, which it must not).
_HUGE_VIEW = textwrap.dedent(
    """
    import sys
    import numpy as np
    import xbackend
    from xbackend.problems import Reference, check

    name, device, case, seed = sys.argv[1], sys.argv[2] or None, sys.argv[3], sys.argv[4]
    rng = np.random.default_rng(int(seed))

    def viewed(rows, row_length, columns):
        big = np.empty((rows, row_length), np.float32)
        view = big[:, 8 : 8 + columns]
        view[...] = rng.uniform(-1, 1, view.shape)
        return view

    def fresh(rows, columns):
        return rng.uniform(-1, 1, (rows, columns)).astype(np.float32)

    op = "rmm" if case == "rmm, B's span" else "mm"
    if case == "span over 2**31":  # 3 rows of 2**30 + 16: the last element is past 2**31
        A, B = viewed(3, 2**30 + 16, 4), fresh(4, 5)
    elif case == "row stride over 2**31":
        A, B = viewed(2, 2**31 + 16, 4), fresh(4, 6)
    else:
        A, B = fresh(4, 3), viewed(3, 2**30 + 16, 4)
    reference = Reference.of(A, B, op)
    with xbackend.get_backend(name, device) as backend:
        for variant in backend.runnable_variants(op):
            result = backend.measure(A, B, variant, op=op, warmup=0, samples=0).result
            assert check(result, reference).equal, (variant, result, reference.product)
    print("ok")
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["span over 2**31", "row stride over 2**31", "rmm, B's span"])
def test_a_view_of_a_huge_array_is_computed_not_crashed(backend, case):
    device = "" if backend.name == "cpu" else backend.device.name
    done = subprocess.run(
        [sys.executable, "-c", _HUGE_VIEW, backend.name, device, case, str(SEED)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"rc {done.returncode}\n{done.stdout}\n{done.stderr[-3000:]}"
    assert done.stdout.strip() == "ok"


def test_views_passed_as_they_are_stay_within_twice_their_size():
    from xbackend.launches.operands import INDEX_MAX, row_major_span

    big = np.empty((3, 2**30 + 16), np.float32)  # reserved, never touched
    span, ld = row_major_span(big[:, :4])
    assert span.size == 12 and ld == 4  # copied compactly
    # A span past 32-bit offsets within twice the view's size goes as it is (the kernels'
    # wide build takes it): no copy of its 12 GB.
    span, ld = row_major_span(big[:, 8 : 8 + 2**30])
    assert ld == 2**30 + 16 and span.size > INDEX_MAX and np.shares_memory(span, big)
    wide = np.random.default_rng(SEED).uniform(-1, 1, (40, 640)).astype(np.float32)
    span, ld = row_major_span(wide[:, 5:37])  # 20 times its size: copied compactly
    assert span.size == 40 * 32 and ld == 32 and not np.shares_memory(span, wide)
    span, ld = row_major_span(wide[:, 5:405])  # under twice its size: as it is
    assert ld == 640 and np.shares_memory(span, wide)


def test_the_memory_check_counts_a_views_whole_span(backend, monkeypatch):
    """A view passed as it is puts its span on the device, gaps included."""
    import dataclasses

    from xbackend.launches.operands import row_major_span

    if backend.name == "cpu":
        pytest.skip("the cpu backend copies views compactly")
    rng = np.random.default_rng(SEED)
    A = rng.uniform(-1, 1, (64, 1000)).astype(np.float32)[:, :600]
    B = rng.uniform(-1, 1, (600, 8)).astype(np.float32)
    span_bytes = row_major_span(A)[0].nbytes
    assert span_bytes > 1.5 * A.nbytes
    # Room for A's elements, B and C, but not for A's span.
    room = A.nbytes + B.nbytes + 64 * 8 * 4 + (span_bytes - A.nbytes) // 2
    small = dataclasses.replace(backend.device, global_mem_bytes=room, max_alloc_bytes=None)
    monkeypatch.setattr(backend, "_device", small)
    with pytest.raises(xbackend.DeviceOutOfMemory):
        backend.matmul(A, B, variant="naive")


# -- API values ----------------------------------------------------------------------------


def _operands(M: int = 9, K: int = 7, N: int = 11) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(SEED)
    A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    return A, B


@pytest.mark.parametrize("tile", ["abc", 16.0, True, 16.5, [16], np.float32(16)], ids=repr)
def test_a_tile_that_is_not_an_integer_names_the_valid_tiles(backend, tile):
    A, B = _operands()
    tiled = [v for v in backend.runnable_variants() if backend.variant_spec(v).takes_tile]
    assert tiled
    for variant in tiled:
        runnable = ", ".join(map(str, backend.tiles(variant)))
        with pytest.raises(xbackend.UnsupportedParameter, match="tile") as raised:
            backend.matmul(A, B, variant=variant, tile=tile)
        assert runnable in str(raised.value), (variant, str(raised.value))


def test_a_numpy_integer_tile_is_a_tile(backend):
    from xbackend.problems import Reference, check

    A, B = _operands()
    for variant in backend.runnable_variants():
        spec = backend.variant_spec(variant)
        if spec.takes_tile and not per_product(spec):
            tile = backend.tiles(variant)[0]
            C = backend.matmul(A, B, variant=variant, tile=np.int64(tile))
            assert check(C, Reference.of(A, B)).equal, variant


def test_a_masked_array_is_refused_not_unmasked(backend):
    A, B = _operands()
    masked = np.ma.masked_array(A, mask=A > 0.5)
    for op, args in (("mm", (masked, B)), ("mm", (A, np.ma.masked_array(B))), ("rmm", None)):
        if op == "rmm":
            A2, B2 = _operands(8, 7, 10)
            args = (A2, np.ma.masked_array(B2, mask=B2 < 0))
        assert args is not None
        with pytest.raises(xbackend.UnsupportedParameter, match=r"masked.*filled\(0\)"):
            backend.measure(*args, backend.runnable_variants(op)[0], op=op, samples=0)


def _fresh(backend: xbackend.Backend) -> xbackend.Backend:
    """A backend of its own (compiled programs are cached per backend)."""
    if backend.name == "cpu":
        pytest.skip("the cpu backend compiles nothing")
    return xbackend.get_backend(backend.name, backend.device.name)


@pytest.mark.slow
def test_unusable_opencl_build_options_name_the_variable(backend, monkeypatch):
    if backend.name != "opencl":
        pytest.skip("only the OpenCL backend takes XBACKEND_OPENCL_OPTIONS")
    from xbackend.backends.opencl import BUILD_OPTIONS_ENV

    A, B = _operands()
    for options in ("--garbage", "-cl-std=CL9.9", '-D "unclosed'):
        monkeypatch.setenv(BUILD_OPTIONS_ENV, options)
        refused = pytest.raises(xbackend.XBackendError, match=BUILD_OPTIONS_ENV)
        with _fresh(backend) as fresh, refused:
            fresh.matmul(A, B, variant="naive", tile=8)
    monkeypatch.setenv(BUILD_OPTIONS_ENV, "-cl-opt-disable")  # a good one still works
    with _fresh(backend) as fresh:
        np.testing.assert_allclose(fresh.matmul(A, B, "naive", 8), A @ B, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("content", ["folder", "binary", "nul bytes"])
def test_a_kernel_file_that_is_not_text_is_named(backend, tmp_path, monkeypatch, content):
    from xbackend.launches.kernels import read_kernel

    if backend.name == "cpu":
        pytest.skip("the cpu backend reads no kernel files")
    language, suffix = ("cuda", ".cu") if backend.name == "cuda" else ("opencl", ".cl")
    path = tmp_path / language / f"mm{suffix}"
    path.parent.mkdir()
    if content == "folder":
        path.mkdir()
    elif content == "binary":
        path.write_bytes(np.random.default_rng(SEED).bytes(4096))
    else:
        path.write_bytes(b"\x00\x01\x02__kernel\x00" * 8)
    monkeypatch.setenv("XBACKEND_KERNELS", str(tmp_path))
    with pytest.raises(xbackend.XBackendError, match=f"mm{suffix}"):
        read_kernel("mm", language)
    A, B = _operands()
    with _fresh(backend) as fresh, pytest.raises(xbackend.XBackendError, match=str(path)):
        fresh.matmul(A, B, variant="naive", tile=8)
