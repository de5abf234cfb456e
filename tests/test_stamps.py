"""The device clock read inside the kernels (kernels/*/stamp.h, measuring/stamps.py): the
hooks cost nothing where they are off, the spans are read right, and a device without
the clock keeps its API's."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xbackend
from xbackend.backends import registry
from xbackend.errors import XBackendError
from xbackend.launches.kernels import has_stamps, without_stamps
from xbackend.measuring.stamps import CLOCK, StampSlots, StampTimer, spans
from xbackend.measuring.timing import Stats
from xbackend.results.records import PointRecord

ROOT = Path(__file__).resolve().parent.parent
HOOKED = [
    path
    for path in sorted((ROOT / "kernels").glob("*/*.c[lu]"))
    if has_stamps(path.stem, "cuda" if path.suffix == ".cu" else "opencl")
]
KERNEL = re.compile(r"^void\s+(\w+)\s*\(", re.MULTILINE)


def test_the_kernel_files_of_products_take_the_hooks():
    names = {path.name for path in HOOKED}
    assert names == {f"{stem}{suffix}" for stem in ("mm", "mm_reg", "mm_warp", "rmm")
                     for suffix in (".cu", ".cl")}  # fmt: skip


@pytest.mark.parametrize("path", HOOKED, ids=lambda p: p.name)
def test_every_kernel_stamps_at_its_start_and_its_end(path):
    """Each kernel takes the parameter, enters first and exits last: a kernel without
    its exit would leave its slot unstamped; one exiting early would cut its span."""
    text = path.read_text()
    bodies = re.split(r"^void\s+\w+\s*\(", text, flags=re.MULTILINE)[1:]
    assert len(bodies) == len(KERNEL.findall(text)) > 0
    for body in bodies:
        parameters, _, code = body.partition("{")
        assert parameters.rstrip().endswith("STAMP_PARAMETER)")
        code = code[: code.index("\n}")]  # the kernel's body, to its closing brace
        statements = [line.strip() for line in code.strip().splitlines() if line.strip()]
        assert statements[0] == "STAMP_ENTER;" and statements[-1] == "STAMP_EXIT;"
        assert code.count("STAMP_ENTER") == code.count("STAMP_EXIT") == 1


def _preprocessed(text: str, path: Path, *defines: str) -> str:
    """``text`` preprocessed as ``path`` is built: its family's folder, and stamp.h's
    of its language (kernels/cuda or kernels/opencl)."""
    folder = path.parent
    stamps = ROOT / "kernels" / ("cuda" if path.suffix == ".cu" else "opencl")
    done = subprocess.run(
        ["cpp", "-P", "-I", str(folder), "-I", str(stamps), *defines, "-"],
        input=text, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    # Tokens: whitespace matters only between two words.
    code = re.sub(r"\s*([^\w\s])\s*", r"\1", re.sub(r"\s+", " ", done.stdout)).strip()
    return re.sub(r"([;{}]);", r"\1", code)  # a hook that is nothing leaves a null statement


@pytest.mark.skipif(shutil.which("cpp") is None, reason="no C preprocessor (cpp)")
@pytest.mark.parametrize("path", HOOKED, ids=lambda p: p.name)
def test_without_stamp_the_hooks_are_nothing(path):
    """The code a build without STAMP compiles is the code of the file without the
    hooks, token for token (the null statements ``;`` the hooks leave aside): so the
    tuning database's digests (of the file without them) still name the kernels they
    were tuned for."""
    text = path.read_text()
    bare = without_stamps(text)
    assert "STAMP" not in bare
    assert _preprocessed(text, path) == _preprocessed(bare, path)
    # The comparison can fail: with STAMP the hooks are code.
    assert _preprocessed(text, path, "-DSTAMP") != _preprocessed(bare, path)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
@pytest.mark.parametrize("path", [p for p in HOOKED if p.suffix == ".cu"], ids=lambda p: p.name)
def test_a_stamped_cuda_build_reads_the_globaltimer(path, tmp_path):
    ptx = tmp_path / "k.ptx"
    subprocess.run(
        ["nvcc", "-ptx", "-arch=sm_90", "-DSTAMP", "-I", str(ROOT / "kernels" / "cuda"),
         str(path), "-o", str(ptx)],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    code = ptx.read_text()
    kernels = len(KERNEL.findall(path.read_text()))
    assert code.count("%globaltimer") >= 2 * kernels
    assert code.count("atom.global.min.u64") + code.count("red.global.min.u64") == kernels


def _slots(entries: list[int], exits: list[int]) -> np.ndarray[Any, Any]:
    return np.array(list(zip(entries, exits, strict=True)), np.uint64)


def test_spans_of_a_batch_sum_the_kernels_and_average_the_gaps():
    rng = np.random.default_rng(11)
    steps, launches = 2, 4
    durations = rng.integers(500, 5000, size=(launches, steps))
    pauses = rng.integers(32, 9000, size=launches * steps)
    entries, exits, now = [], [], int(rng.integers(10**12, 10**13))
    for duration, pause in zip(durations.ravel(), pauses, strict=True):
        entries.append(now)
        exits.append(now + int(duration))
        now += int(duration) + int(pause)
    total, gap = spans(_slots(entries, exits), launches)
    assert total == pytest.approx(durations.sum() * 1e-9)
    # Between launches: from the last step of one to the first step of the next.
    between = pauses.reshape(launches, steps)[:-1, -1]
    assert gap == pytest.approx(between.mean() * 1e-9)
    first, no_gap = spans(_slots(entries[:2], exits[:2]), 1)
    assert first == pytest.approx(durations[0].sum() * 1e-9) and no_gap is None


@pytest.mark.parametrize(
    "entries, exits",
    [([2**64 - 1], [5000]), ([1000], [0]), ([5000], [1000])],
    ids=["never-entered", "never-exited", "exit-before-entry"],
)
def test_a_slot_no_kernel_stamped_is_an_error(entries, exits):
    with pytest.raises(XBackendError, match="unstamped or ending before it starts"):
        spans(_slots(entries, exits), 1)


class _HostMemory:
    """A Device's buffers and copies, in host arrays: enough for StampSlots."""

    def allocate(self, nbytes: int, access: str) -> np.ndarray[Any, Any]:
        return np.full(nbytes // 8, 7, np.uint64)  # not what reset writes

    def free(self, buffer: Any) -> None:
        buffer[:] = 0

    def upload(self, copies: Any) -> None:
        for buffer, array in copies:
            buffer[: array.size] = array.ravel()

    def download(self, target: np.ndarray[Any, Any], buffer: Any) -> None:
        target.ravel()[:] = buffer[: target.size]


class _ApiClock:
    clock, gave_up = "cuda-events", False

    def __init__(self, seconds: float):
        self.seconds = seconds

    def __call__(self, steps: Any, launches: int = 1) -> float:
        for _ in range(launches):
            for queue in steps:
                queue()
        return self.seconds


def test_a_stamp_timer_gives_spans_with_the_apis_time_beside_them():
    """Each launch writes the slot it is given, as a stamped kernel does; the timer resets
    them, reads them back, and keeps the API's time per launch."""
    slots = StampSlots(_HostMemory())  # type: ignore[arg-type]
    clock = iter(range(10**9, 10**10, 1000))

    def kernel(duration: int) -> Any:
        def queue() -> None:
            slot = int(slots.take())
            entry = next(clock)
            slots.buffer[2 * slot : 2 * slot + 2] = (entry, entry + duration)

        return queue

    timer = StampTimer(_ApiClock(40e-6), slots)
    total = timer([kernel(300), kernel(200)], launches=4)
    assert total == pytest.approx(4 * 500e-9)
    assert timer.api_s == pytest.approx(10e-6) and timer.clock == CLOCK
    assert timer.gap_s == pytest.approx((1000 - 200) * 1e-9)
    # A slot a launch left alone (its kernel built without STAMP) is refused.
    with pytest.raises(XBackendError):
        timer([kernel(300), lambda: None], launches=1)


def test_a_point_keeps_the_apis_time_and_says_its_overhead():
    rng = np.random.default_rng(5)
    spans_s = list(rng.uniform(1e-6, 2e-6, 9))
    api_s = [s + 7e-6 for s in spans_s]
    point = PointRecord(
        run_id="r1", backend="opencl", label="opencl:nvidia", device="H100", variant="naive",
        tile=16, dtype="float32",
        M=16, K=14, N=16, flops=2 * 16 * 14 * 16, status="ok", clock=CLOCK,
        kernel_s=Stats.of(spans_s).to_dict(), kernel_samples_s=spans_s,
        end_to_end_s=Stats.of(api_s).to_dict(), end_to_end_samples_s=api_s,
        api_samples_s=api_s, gap_samples_s=[0.0, 6.9e-6],
    )  # fmt: skip
    again = PointRecord.from_dict(point.to_dict())
    assert again.api_samples_s == api_s and again.gap_samples_s == [0.0, 6.9e-6]
    assert again.overhead_s == pytest.approx(7e-6)
    bad = {**point.to_dict(), "gap_samples_s": [-1e-6]}
    with pytest.raises(ValueError, match="gap_samples_s"):
        PointRecord.from_dict(bad)
    plain = {key: value for key, value in point.to_dict().items() if "api" not in key}
    assert PointRecord.from_dict(plain).overhead_s is None


@pytest.fixture
def opencl_on_a_cpu():
    available, reason = registry.backend_class("opencl").available()
    if not available:
        pytest.skip(reason)
    backend = xbackend.get_backend("opencl")
    if backend.device.kind != "cpu":
        backend.close()
        pytest.skip("the OpenCL device is not a CPU")
    yield backend
    backend.close()


def test_a_device_without_its_own_clock_keeps_its_apis(opencl_on_a_cpu):
    rng = np.random.default_rng(3)
    A, B = rng.standard_normal((19, 23), np.float32), rng.standard_normal((23, 17), np.float32)
    measured = opencl_on_a_cpu.measure(A, B, "naive", samples=3, min_samples=3)
    assert measured.clock == "opencl-profiling"
    assert measured.api_s == [] and measured.gap_s == []
    np.testing.assert_allclose(measured.result, A @ B, rtol=1e-4, atol=1e-4)


def test_a_clock_mode_that_does_not_exist_is_named(opencl_on_a_cpu, monkeypatch):
    monkeypatch.setenv("XBACKEND_CLOCK", "gpu")
    A = np.random.default_rng(4).standard_normal((8, 8), np.float32)
    with pytest.raises(XBackendError, match="XBACKEND_CLOCK='gpu'"):
        opencl_on_a_cpu.measure(A, A, "naive", samples=1, min_samples=1)


@pytest.mark.parametrize("name", ["cuda", "opencl:nvidia"])
def test_nvidia_kernels_time_themselves_and_the_api_clock_stays_beside(name, monkeypatch):
    """On an NVIDIA GPU: every kernel product is stamped, its span no longer than the
    API's time of the same launches; XBACKEND_CLOCK=api gives the API's clock alone."""
    backend_name, _, device = name.partition(":")
    available, reason = registry.backend_class(backend_name).available()
    if not available:
        pytest.skip(reason)
    try:
        backend = xbackend.get_backend(backend_name, device or None)
    except XBackendError as error:
        pytest.skip(str(error))
    rng = np.random.default_rng(8)
    A, B = rng.standard_normal((70, 45), np.float32), rng.standard_normal((45, 66), np.float32)
    with backend:
        for variant in ("naive", "tiled", "warp_db"):
            measured = backend.measure(A, B, variant, samples=5, min_samples=5)
            np.testing.assert_allclose(measured.result, A @ B, rtol=1e-4, atol=1e-4)
            assert measured.clock == CLOCK and len(measured.api_s) == 5
            # Events bracket the launches the stamps are inside of (0.5 µs: their tick).
            assert np.median(measured.api_s) > np.median(measured.kernel_s) - 0.5e-6
        monkeypatch.setenv("XBACKEND_CLOCK", "api")
        plain = backend.measure(A, B, "naive", samples=3, min_samples=3)
        assert plain.clock != CLOCK and plain.api_s == []


def test_a_library_call_is_timed_between_markers_on_the_device(opencl_on_a_cpu):
    problem = opencl_on_a_cpu.variant_problem("vendor", np.dtype(np.float32))
    if problem:
        pytest.skip(problem)
    rng = np.random.default_rng(9)
    A, B = rng.standard_normal((37, 29), np.float32), rng.standard_normal((29, 41), np.float32)
    measured = opencl_on_a_cpu.measure(A, B, "vendor", samples=3, min_samples=3)
    assert measured.clock == "opencl-markers" and not any(measured.marks)
    assert min(measured.kernel_s) > 0
    np.testing.assert_allclose(measured.result, A @ B, rtol=1e-4, atol=1e-4)


def test_a_library_that_waits_behind_the_markers_gate_is_let_through(opencl_on_a_cpu):
    """A call that waits for its own queue while the gate holds it would wait forever: the
    watchdog opens the gate, the sample is marked, and the next one is not."""
    from xbackend.backends import opencl_device

    cl = pytest.importorskip("pyopencl")
    queue = opencl_on_a_cpu._queue
    timer = opencl_device._MarkerTimer(opencl_on_a_cpu._context, queue)
    timer.GIVE_UP_S = 0.2
    assert timer([queue.finish]) >= 0 and timer.gave_up  # finish waits for the gate
    assert timer([lambda: cl.enqueue_marker(queue)]) >= 0 and not timer.gave_up
