"""Measured ceilings: the kernels of kernels/*/ceilings compute what they say, the measured
rates are plausible (positive, under the theoretical peaks where known), a run's header
keeps them, and the tables' roof share is computed from them (xbackend.analysis.roofs)."""

from __future__ import annotations

import csv
import dataclasses
import json

import numpy as np
import pytest
from conftest import xbackend_here

from xbackend.analysis.roofs import intensity, roof_of, roof_share, roofs
from xbackend.analysis.tables import size_rows, size_table, write_size_csv
from xbackend.backends import ceilings, compiled
from xbackend.backends.cpu import CpuBackend
from xbackend.backends.peaks import TOLERANCE, peaks
from xbackend.errors import XBackendError
from xbackend.launches.specs import DeviceInfo
from xbackend.measuring.timing import Sampling
from xbackend.problems import Shape
from xbackend.results import PointRecord, RunHeader
from xbackend.sweep.runner import NO_CEILINGS_ENV, Plan, run

COMPILED = ("opencl", "cuda")


def _compiled(backend):
    if backend.name not in COMPILED:
        pytest.skip("the ceilings kernels run on the compiled backends")
    return backend


def _fma_reference(blocks: int, iterations: int, dtype) -> np.ndarray:
    """The recurrence of fma_loop in float64: each thread's chains x ← x·a + b, summed."""
    thread = np.arange(blocks * ceilings.BLOCK)
    a = 0.9990234375
    b = ((thread % 64 + 1) * 0.015625)[:, None]
    x = np.tile(np.arange(ceilings.ACCUMULATORS, dtype=np.float64), (thread.size, 1))
    for _ in range(iterations):
        x = x * a + b
    sums: np.ndarray = x.sum(axis=1)
    return sums


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_fma_loop_computes_its_recurrence(backend, dtype):
    backend = _compiled(backend)
    if backend.dtype_problem(np.dtype(dtype)):
        pytest.skip(f"{backend.device.name} has no {dtype}")
    blocks, iterations = 3, 100
    timed = backend.run_product(ceilings.fma_product(dtype, blocks, iterations), 1, True)
    assert timed.output.dtype == np.dtype(dtype) and timed.output.shape == (blocks * 256,)
    assert len(timed.seconds) == 1 and timed.seconds[0] > 0
    expected = _fma_reference(blocks, iterations, dtype)
    rtol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(timed.output, expected, rtol=rtol)
    # The check can fail: one iteration more or less is far outside the tolerance.
    for other in (iterations - 1, iterations + 1):
        assert not np.allclose(timed.output, _fma_reference(blocks, other, dtype), rtol=rtol)


@pytest.mark.parametrize("vector", [4, 16])
@pytest.mark.parametrize("groups", [None, 2])
def test_the_copy_copies(backend, vector, groups):
    """Seeded random floats, not a multiple of a block; with few groups the grid-stride
    loop goes round several times."""
    backend = _compiled(backend)
    if backend.name == "cuda" and vector == 16:
        pytest.skip("CUDA has no float16 vector: a GPU copies float4s")
    floats = vector * (3 * ceilings.BLOCK + 5)
    source = np.random.default_rng(15).standard_normal(floats).astype(np.float32)
    product = ceilings.copy_product(floats, vector, source)
    if groups is not None:
        (launch,) = product.launches
        launch = dataclasses.replace(launch, grid=(groups, 1, 1))
        product = dataclasses.replace(product, steps=(launch,))
    timed = backend.run_product(product, 2, keep_output=True)
    np.testing.assert_array_equal(timed.output, source)
    assert len(timed.seconds) == 2


def test_a_copy_of_no_whole_vectors_is_refused():
    with pytest.raises(XBackendError, match="whole float4s: 6 floats"):
        ceilings.copy_product(6)
    with pytest.raises(XBackendError, match="whole float8s"):
        ceilings.copy_product(64, 8)


def test_sizes_saturate_a_gpu_and_shrink_on_a_cpu():
    h100 = DeviceInfo("H100", "NVIDIA", "gpu", compute_units=132, global_mem_bytes=80 * 2**30,
                      cache_bytes=50 * 2**20)  # fmt: skip
    blocks, iterations = ceilings.fma_geometry(h100)
    assert blocks * ceilings.BLOCK == 132 * 2048 * 4 and iterations == 2048
    assert ceilings.copy_floats(h100) == 2**27
    small = dataclasses.replace(h100, global_mem_bytes=2**30, max_alloc_bytes=2**28)
    assert ceilings.copy_floats(small) == 2**26  # a quarter of the memory per buffer
    cpu = DeviceInfo("EPYC", "x86", "cpu", compute_units=2, cache_bytes=32 * 2**20)
    assert ceilings.copy_floats(cpu) == 2**25  # four times the cache, at least
    socket = dataclasses.replace(cpu, cache_bytes=300 * 2**20)
    assert ceilings.copy_floats(socket) == 2**27  # but not a whole socket's cache four times
    assert ceilings.fma_geometry(cpu)[0] == 32


def _plausible(found: ceilings.Ceilings, device: DeviceInfo, dtypes) -> None:
    assert set(found.flops_per_s) == set(dtypes)
    assert found.bytes_per_s is not None and 1e8 < found.bytes_per_s < 1e14
    for dtype, rate in found.flops_per_s.items():
        assert 1e8 < rate < 1e16, dtype
        peak = peaks(device, dtype)
        if peak.flops_per_s is not None:
            assert rate <= TOLERANCE * peak.flops_per_s, (dtype, rate, peak.how)
        if peak.bytes_per_s is not None:
            assert found.bytes_per_s <= TOLERANCE * peak.bytes_per_s
    triad = {"triad"} if found.triad_bytes_per_s is not None else set()
    assert set(found.how) == {*dtypes, "bandwidth", *triad} and found.date


@pytest.mark.slow
def test_the_compiled_ceilings_are_plausible_and_measured_once(backend, monkeypatch):
    backend = _compiled(backend)
    dtypes = [d for d in ("float32", "float64") if not backend.dtype_problem(np.dtype(d))]
    found = backend.ceilings(["int32", *dtypes])  # int32 has no compute ceiling
    _plausible(found, backend.device, dtypes)
    assert "fma_loop" in found.how[dtypes[0]] and "copy" in found.how["bandwidth"]
    # BabelStream's triad, in float64 where the device has it: reads two arrays, writes one.
    assert found.triad_bytes_per_s is not None and 1e8 < found.triad_bytes_per_s < 1e14
    assert found.how["triad"].startswith(f"stream_triad: {ceilings.copy_floats(backend.device)} ")
    assert ceilings.stream_dtype(backend.dtype_problem) in found.how["triad"]

    def again(*_):
        raise AssertionError("measured twice")

    monkeypatch.setattr(compiled, "fma_ceiling", again)
    monkeypatch.setattr(compiled, "copy_ceiling", again)
    monkeypatch.setattr(compiled, "stream_rates", again)
    assert backend.ceilings(dtypes) is found


@pytest.mark.slow
def test_the_cpu_ceilings_are_plausible_and_float64_is_added_once():
    backend = CpuBackend()
    found = backend.ceilings(["float32"])
    _plausible(found, backend.device, ["float32"])
    assert "numpy.matmul" in found.how["float32"] and "copyto" in found.how["bandwidth"]
    both = backend.ceilings(["float32", "float64"])
    assert both.flops_per_s["float32"] == found.flops_per_s["float32"]
    assert both.bytes_per_s == found.bytes_per_s and "float64" in both.flops_per_s
    assert backend.ceilings(["float64"]) is both


SHAPES = [Shape(8, 7, 8), Shape(16, 14, 16)]


class _NoCeilings(CpuBackend):
    name = "broken"

    def ceilings(self, dtypes=("float32",)):
        raise RuntimeError("CL_OUT_OF_RESOURCES\nand more")


def _header(tmp_path, opened):
    plan = Plan(shapes=SHAPES, variants=["vendor"], sampling=Sampling(max_samples=1, min_samples=1))
    records = run(plan, opened, tmp_path, log=lambda line: None)
    header = json.loads((tmp_path / "results.jsonl").read_text().splitlines()[0])
    return header, records


@pytest.mark.slow
def test_the_run_header_keeps_the_ceilings_or_why_not(tmp_path, monkeypatch):
    monkeypatch.delenv(NO_CEILINGS_ENV, raising=False)
    header, records = _header(tmp_path, [("cpu", CpuBackend()), ("broken", _NoCeilings())])
    kept = header["devices"]["cpu"]["ceilings"]
    assert kept["flops_per_s"]["float32"] > 0 and kept["bytes_per_s"] > 0
    assert kept["statistic"] == "best" and "numpy.matmul" in kept["how"]["float32"]
    assert header["devices"]["broken"]["ceilings"] == {
        "problem": "RuntimeError: CL_OUT_OF_RESOURCES"
    }
    assert {r.status for r in records} == {"ok"}  # the comparison ran all the same
    # The tables take the roof from the header just written.
    loaded_roofs = roofs([RunHeader.from_dict(header)])
    assert set(loaded_roofs) == {(header["run_id"], "cpu")}
    shares = [roof_share(r, loaded_roofs) for r in records if r.label == "cpu"]
    assert all(share is not None and share > 0 for share in shares)


def test_no_ceilings_where_the_environment_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv(NO_CEILINGS_ENV, "1")
    header, _ = _header(tmp_path, [("broken", _NoCeilings())])
    assert "ceilings" not in header["devices"]["broken"]


# -- the roof share --------------------------------------------------------------------------

COMPUTE, BANDWIDTH = 400e9, 40e9  # ridge at 10 FLOP/byte


def _point(n: int, seconds: float, *, dtype="float32", status="ok", label="opencl", run_id="r"):
    stats = {"median": seconds, "q1": seconds, "q3": seconds, "min": seconds}
    return PointRecord(
        run_id=run_id, backend=label, label=label, device="dev", variant="tiled", tile=16,
        dtype=dtype, M=n, K=n, N=n, flops=2 * n**3, status=status, kernel_s=stats,
        end_to_end_s=stats, gflops=2 * n**3 / seconds / 1e9,
    )  # fmt: skip


def _roofs(**ceilings_):
    device = {"name": "dev", "ceilings": ceilings_}
    return roofs([RunHeader(run_id="r", devices={"opencl": device})])


def test_the_roof_share_is_the_rate_over_the_roof_at_the_intensity():
    found = _roofs(flops_per_s={"float32": COMPUTE}, bytes_per_s=BANDWIDTH)
    small, large = _point(16, 1e-5), _point(512, 2e-3)
    # n×n×n in float32: 2n³ flops over 3·4·n² bytes = n/6 FLOP/byte.
    assert intensity(small) == pytest.approx(16 / 6) and intensity(large) == pytest.approx(512 / 6)
    memory_roof = 16 / 6 * BANDWIDTH  # under the ridge: the bandwidth's slope
    assert roof_share(small, found) == pytest.approx(small.gflops * 1e9 / memory_roof)
    assert roof_share(large, found) == pytest.approx(large.gflops * 1e9 / COMPUTE)
    roof = roof_of(small, found)
    assert roof is not None and roof.label == "opencl"


def test_no_share_without_a_roof_or_a_verified_point():
    found = _roofs(flops_per_s={"float32": COMPUTE}, bytes_per_s=BANDWIDTH)
    assert roof_share(_point(64, 1e-4, dtype="int32"), found) is None  # no compute ceiling
    assert roof_share(_point(64, 1e-4, status="mismatch"), found) is None
    assert roof_share(_point(64, 1e-4, run_id="other"), found) is None  # another run
    assert roof_share(_point(64, 1e-4), _roofs(bytes_per_s=BANDWIDTH)) is None
    assert _roofs(problem="RuntimeError: no device") == {}
    # A label that tells overlapping runs apart still finds its run's roof.
    assert roof_share(_point(64, 1e-4, label="opencl (run r)"), found) is not None


def test_the_tables_show_the_roof_where_the_run_measured_it(tmp_path):
    found = _roofs(flops_per_s={"float32": COMPUTE}, bytes_per_s=BANDWIDTH)
    points = [_point(16, 1e-5), _point(512, 2e-3)]
    rows = size_rows(points, found)
    assert [row["roof_share"] for row in rows] == [roof_share(p, found) for p in points]
    assert rows[1]["roof_gflops"] == pytest.approx(COMPUTE / 1e9)
    header = size_table(points, roofs=found).splitlines()[1]
    assert header.split()[-1] == "roof"
    share = roof_share(points[1], found)
    assert share is not None and f"{share * 100:.2g}%" in size_table(points, roofs=found)
    assert "roof" not in size_table(points).splitlines()[1].split()
    with write_size_csv(points, tmp_path, found).open() as file:
        written = list(csv.DictReader(file))
    assert float(written[1]["roof_share"]) == pytest.approx(share)
    assert float(written[0]["intensity"]) == pytest.approx(16 / 6)
    assert write_size_csv(points, tmp_path).read_text().splitlines()[1].endswith(",,")


@pytest.mark.parametrize("op", list(ceilings.STREAM))
def test_babelstreams_operations_compute_what_they_say(backend, op):
    """Each of stream_copy, _mul, _add and _triad on seeded random floats, an odd number
    of them (the last block partly idle), against NumPy's."""
    backend = _compiled(backend)
    rng = np.random.default_rng(42)
    n = 5 * ceilings.BLOCK + 3
    arrays = {name: rng.standard_normal(n).astype(np.float32) for name in "abc"}
    product = ceilings.stream_product(op, n, "float32", arrays)
    output = backend.run_product(product, 1, keep_output=True).output
    s = np.float32(ceilings.STREAM_SCALAR).astype(np.float64)
    a, b, c = (arrays[name].astype(np.float64) for name in "abc")
    expected = {"copy": a, "mul": s * c, "add": a + b, "triad": b + s * c}[op]
    # The triad may fuse its multiply and add (one rounding where NumPy takes two).
    np.testing.assert_allclose(output, expected, rtol=1e-6, atol=1e-6)
    assert not np.allclose(output, {"copy": b, "mul": c, "add": a, "triad": b + c}[op])


@pytest.mark.parametrize("rounds", [1, 7])
def test_the_intensity_sweeps_kernel_runs_its_rounds(backend, rounds):
    """Each element through ``rounds`` fused multiply-adds, against the recurrence in
    float64; one round more or less is outside the tolerance."""
    backend = _compiled(backend)
    n = 3 * ceilings.BLOCK + 11
    source = np.random.default_rng(rounds).standard_normal(n).astype(np.float32)
    product = ceilings.intensity_product(rounds, n, "float32", source)
    output = backend.run_product(product, 1, keep_output=True).output

    def recurrence(count: int) -> np.ndarray:
        x = source.astype(np.float64)
        for _ in range(count):
            x = x * 0.9990234375 + 0.015625
        return x

    np.testing.assert_allclose(output, recurrence(rounds), rtol=1e-5, atol=1e-6)
    assert not np.allclose(output, recurrence(rounds + 1), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_the_command_puts_each_apis_ceilings_side_by_side(tmp_path):
    """``xbackend ceilings`` on this machine's two backends: the FMA loop and the copy of
    each, BabelStream's four and two points of the intensity sweep on the compiled one,
    and the second's ratio to the first."""
    out = tmp_path / "ceilings.json"
    command = ["ceilings", "--dtypes", "float32"]  # in this process: what it says and writes
    done = xbackend_here(*command, "--backends", "opencl,cpu", "--sweep", "1,4", "--json",
                         str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = json.loads(out.read_text())
    assert list(found) == ["opencl", "cpu"]
    streams = [f"stream {op}" for op in ceilings.STREAM]
    sweep = ["sweep 1 (0.25 FLOP/B)", "sweep 4 (1 FLOP/B)"]
    assert list(found["opencl"]["quantities"]) == ["fma float32", "copy (roof)", *streams, *sweep]
    assert list(found["cpu"]["quantities"]) == ["fma float32", "copy (roof)"]
    assert all(q["value"] > 0 for each in found.values() for q in each["quantities"].values())
    header, *rows = done.stdout.splitlines()[2:]
    assert header.split()[-1] == "cpu/opencl" and len(rows) == 8
    fma = found["cpu"]["quantities"]["fma float32"]["value"]
    ratio = fma / found["opencl"]["quantities"]["fma float32"]["value"]
    assert rows[0].split()[-1] == f"{ratio:.3f}"
    refused = xbackend_here(*command, "--backends", "cpu,nosuch")
    assert refused.returncode == 1 and "unknown backend 'nosuch'" in refused.stderr
