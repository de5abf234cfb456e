"""Verdicts that hold between runs: the A/A floors of ``xbackend diff``
(xbackend/analysis/floors.py)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import xbackend_here

from xbackend.analysis import diff, floors
from xbackend.analysis.diff import Interval
from xbackend.measuring.timing import Stats
from xbackend.results import PointRecord, RunHeader
from xbackend.results.writing import ResultsWriter

SEED = 2411


def _point(variant: str, M: int, seconds: list[float], clock: str, run: str) -> PointRecord:
    return PointRecord(
        run_id=run, backend="cuda", label="cuda", device="H100", variant=variant, tile=16,
        dtype="float32", M=M, K=M, N=M, flops=2 * M**3, status="ok", clock=clock,
        kernel_s=Stats.of(seconds).to_dict(), end_to_end_s=Stats.of(seconds).to_dict(),
        kernel_samples_s=seconds, end_to_end_samples_s=seconds,
    )  # fmt: skip


def _run(run: str, shift: dict[str, float], rng: np.random.Generator) -> list[PointRecord]:
    """A run of two lines at three sizes: kernels of about 3, 30 and 300 µs, timed to
    ±0.3% within the run and moved by ``shift[variant]`` as a whole (between runs)."""
    found = []
    for variant in ("naive", "tiled"):
        for M, seconds in ((16, 3e-6), (64, 3e-5), (256, 3e-4)):
            samples = seconds * shift.get(variant, 1.0) * (1 + 0.003 * rng.standard_normal(20))
            found.append(_point(variant, M, [float(s) for s in samples], "globaltimer", run))
    return found


def test_a_change_is_claimed_only_beyond_the_floor_and_sameness_only_within_the_threshold():
    tight = Interval(1.07, 1.065, 1.075)
    assert diff.verdict(tight, 0.05) == diff.SLOWER
    assert diff.verdict(tight, 0.05, floor=0.08) == diff.UNCERTAIN  # inside what A/A shows
    assert diff.verdict(Interval(1.2, 1.15, 1.25), 0.05, floor=0.08) == diff.SLOWER
    faster = Interval(0.9, 0.89, 0.91)
    assert diff.verdict(faster, 0.05) == diff.FASTER
    assert diff.verdict(faster, 0.05, floor=0.15) == diff.UNCERTAIN  # 1/1.15 = 0.87
    same = Interval(1.01, 1.0, 1.02)
    assert diff.verdict(same, 0.05, floor=0.5) == diff.SAME  # within the threshold still


def test_floors_keep_the_largest_change_of_each_kind_of_point():
    rng = np.random.default_rng(SEED)
    a, b = _run("a", {}, rng), _run("b", {"naive": 1.08, "tiled": 0.97}, rng)
    found = floors.measured(zip(a, b, strict=True), "a / b")
    assert set(found.shares) == {f"H100 | globaltimer 1e{p}" for p in (-6, -5, -4)}
    for kind, share in found.shares.items():
        assert 0.07 < share < 0.09, kind  # the naive line's 8%, larger than tiled's 3%
    smaller = floors.measured(zip(a, _run("c", {"naive": 1.02}, rng), strict=True))
    merged = smaller.merged(found)
    assert merged.shares == found.shares and merged.pairs == 2


def test_a_floors_file_round_trips_and_a_bad_one_is_named(tmp_path):
    found = floors.Floors({"globaltimer 1e-6": 0.021, "host 1e-3": 0.4}, 3, "test")
    path = tmp_path / "floors.json"
    floors.save(found, path)
    assert floors.load(path) == found
    bad = tmp_path / "bad.json"
    for text in ("[]", '{"floors": {"host 1e-3": -0.1}}', '{"floors": {"x": "nan"}}', "{"):
        bad.write_text(text)
        with pytest.raises(ValueError, match=r"bad\.json: not a floors file"):
            floors.load(bad)


def test_the_shipped_floors_are_a_floors_file_with_how_they_were_measured():
    shipped = floors.shipped()
    assert shipped.pairs > 0 and shipped.how
    assert all(0 <= share < float("inf") for share in shipped.shares.values())
    # On the GPU the kernels' own clock leaves room for a 10% verdict (docs/measurement.md).
    spans = [share for kind, share in shipped.shares.items()
             if kind.rpartition(" | ")[2].startswith("globaltimer ")]  # fmt: skip
    assert spans and max(spans) * floors.MARGIN < 0.10
    # Each device's floors say which device: the H200's were measured keyed by it.
    assert any(kind.startswith("NVIDIA H200 | globaltimer ") for kind in shipped.shares)
    assert "H200" in shipped.how


def _write(folder: Path, points: list[PointRecord]) -> Path:
    with ResultsWriter(folder, RunHeader(points[0].run_id)) as writer:
        for point in points:
            writer.append(point)
    return folder


def _xb(*args: str) -> subprocess.CompletedProcess[str]:
    """The command in this process: what it says and writes is what these tests read."""
    return xbackend_here(*args)


def test_diff_writes_floors_from_an_aa_pair_and_judges_through_them(tmp_path):
    """An A/A pair moved by 6% between runs (tight intervals inside each): SLOWER by the
    threshold alone, UNCERTAIN through the floors the pair itself wrote; a real 25%
    slowdown of one line is still SLOWER through them."""
    rng = np.random.default_rng(SEED)
    a = _write(tmp_path / "a", _run("ra", {}, rng))
    b = _write(tmp_path / "b", _run("rb", {"naive": 1.06, "tiled": 1.06}, rng))
    slowed = _write(tmp_path / "c", _run("rc", {"naive": 1.25, "tiled": 1.0}, rng))
    common = ["--no-plots", "--out", str(tmp_path / "d")]
    alone = _xb("diff", str(a), str(b), "--floors", "none", *common)
    assert alone.returncode == 0 and "6 SLOWER" in alone.stdout, alone.stdout + alone.stderr
    made = tmp_path / "floors.json"
    wrote = _xb("diff", str(a), str(b), "--floors", "none", "--write-floors", str(made), *common)
    assert wrote.returncode == 0 and made.exists(), wrote.stderr
    assert json.loads(made.read_text())["pairs"] == 1
    through = _xb("diff", str(a), str(b), "--floors", str(made), *common)
    assert "SLOWER" not in through.stdout and "6 UNCERTAIN" in through.stdout, through.stdout
    real = _xb("diff", str(a), str(slowed), "--floors", str(made), *common)
    assert "3 SLOWER" in real.stdout, real.stdout
    rows = (tmp_path / "d" / "diff.csv").read_text()
    assert "floor" in rows.splitlines()[0]


def test_points_of_another_clock_or_device_have_no_floor():
    rng = np.random.default_rng(SEED)
    found = floors.measured(zip(_run("a", {}, rng), _run("b", {"naive": 1.3}, rng), strict=True))
    point = _run("d", {}, rng)[0]
    assert found.floor(point) == floors.BOUND  # 30% with the margin, bounded
    for other in (dataclasses.replace(point, clock="opencl-profiling"),
                  dataclasses.replace(point, device="NVIDIA H200")):  # fmt: skip
        assert found.floor(other) == 0.0


@pytest.mark.parametrize("shift", [1.6, 3.0, 40.0])
def test_no_floor_hides_a_change_of_one_and_a_half(shift):
    """Issue 38, item 2: shipped floors of 0.7-1187 once made diff blind for whole clocks.
    However large the changes a floors file holds, a 1.5x change clears its floor."""
    rng = np.random.default_rng(SEED)
    a, b = _run("a", {}, rng), _run("b", {"naive": 1.9 if shift < 2 else 1.95}, rng)
    huge = floors.Floors({kind: shift for kind in floors.measured(zip(a, b, strict=True)).shares})
    point = a[0]
    floor = huge.floor(point)
    assert floor <= floors.BOUND
    assert diff.verdict(Interval(1.5, 1.47, 1.53), 0.05, floor) == diff.SLOWER
    assert diff.verdict(Interval(1 / 1.5, 0.65, 0.68), 0.05, floor) == diff.FASTER


@pytest.mark.parametrize("shift", [2.2, 2.5, 10.0, 0.3])
def test_a_change_of_twice_or_more_is_no_aa_floor(shift):
    """An A/B pair given to --write-floors (one line 2x slower) adds no floor for it: the
    change is left out, and counted."""
    rng = np.random.default_rng(SEED)
    a, b = _run("a", {}, rng), _run("b", {"naive": shift}, rng)
    found = floors.measured(zip(a, b, strict=True))
    assert found.refused == 3  # the naive line, at three sizes
    assert all(share < 0.05 for share in found.shares.values())  # tiled's own noise


def test_a_format_1_file_applies_to_every_device(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"format": 1, "pairs": 2, "floors": {"globaltimer 1e-6": 0.1}}))
    old = floors.load(path)
    rng = np.random.default_rng(SEED)
    point = _run("a", {}, rng)[0]
    for device in ("H100", "NVIDIA H200"):
        assert old.floor(dataclasses.replace(point, device=device)) == pytest.approx(0.15)


@pytest.mark.parametrize(
    "text",
    ['{"pairs": 1e400, "floors": {}}', '{"pairs": -1, "floors": {}}',
     '{"pairs": "3", "floors": {}}', "[" * 100_000 + "]" * 100_000,
     '{"floors": {"k": 1e400}}'],
)  # fmt: skip
def test_a_floors_file_that_overflows_or_nests_deep_is_refused_by_name(tmp_path, text):
    """Issue 38, item 15: OverflowError and RecursionError tracebacks before."""
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    with pytest.raises(ValueError, match=r"bad\.json: not a floors file"):
        floors.load(bad)


def test_a_floors_file_that_is_a_fifo_is_refused_unread(tmp_path):
    """--floors names a file a user chose: a FIFO (or /dev/zero) is refused by name, as the
    tune cache refuses one, never waited on."""
    fifo = tmp_path / "floors.fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=r"floors\.fifo: not a floors file \(not a regular"):
        floors.load(fifo)


XEON = "Intel(R) Xeon(R) Processor"


def _cpu_vendor(run: str, seconds: float, rng: np.random.Generator) -> PointRecord:
    """The CPU's BLAS at 16×14: a call under a microsecond, timed by the host's clock."""
    samples = [float(s) for s in seconds * (1 + 0.01 * rng.standard_normal(40))]
    return dataclasses.replace(
        _point("vendor", 16, samples, "host", run), backend="cpu", label="cpu", device=XEON,
        tile=None, K=14,
    )  # fmt: skip


SHORTEST_20 = floors.Floors({f"{XEON} | host 1e-6": 0.2, f"{XEON} | host 1e-3": 0.5}, 1, "pairs")


@pytest.mark.parametrize("found_floors", [SHORTEST_20, floors.shipped()])
def test_a_point_below_every_class_takes_the_shortest_class_floor(found_floors):
    """The CPU's BLAS read SLOWER at 16×14 on the idle machine, 826 ns → 918 ns (1.11×), a
    point below every class measured: judged by the 5% threshold alone. Now the shortest
    class's floor holds it; a change of 1.5× still clears it."""
    rng = np.random.default_rng(SEED)
    a = _cpu_vendor("a", 826e-9, rng)
    floor = found_floors.floor(a)
    assert 0.11 < floor <= floors.BOUND
    (eleven,) = diff.compare_points([a], [_cpu_vendor("b", 918e-9, rng)], floors=found_floors)
    assert eleven.verdict == diff.UNCERTAIN
    assert eleven.note == f"a change within the A/A floor ±{floor * 100:.3g}%"
    assert eleven.floor_from.startswith(
        f"{XEON}: host, 1-10 µs, the shortest class measured, for a point of 100-1000 ns, from "
    )
    (half,) = diff.compare_points([a], [_cpu_vendor("b", 1.5 * 826e-9, rng)], floors=found_floors)
    assert half.verdict == diff.SLOWER


def test_a_class_between_or_above_those_measured_is_not_filled():
    rng = np.random.default_rng(SEED)
    assert SHORTEST_20.floor(_cpu_vendor("a", 826e-9, rng)) == pytest.approx(0.3)
    for seconds in (30e-6, 3.0):  # between 1e-6 and 1e-3; above 1e-3
        assert SHORTEST_20.floor(_cpu_vendor("a", seconds, rng)) == 0.0
    gpu = dataclasses.replace(_cpu_vendor("a", 826e-9, rng), device="NVIDIA H200")
    assert SHORTEST_20.floor(gpu) == 0.0  # another device's classes are not its own
