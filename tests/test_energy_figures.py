"""The energy figure and the report's energy section: GFLOP per joule against size, drawn
from the records' readings (``state["energy"]``) and only from them; points without a
reading left out and counted; wrong results crossed, noisy points hollow, throttled and
untrusted ones in no line, as in every figure; no figure and no section where no point
has a reading."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from xbackend.analysis.joules import gflops_per_joule, joules
from xbackend.backends.cpu import CpuBackend
from xbackend.figures import plots
from xbackend.figures.energy import NAME, energy_figure
from xbackend.measuring.timing import Sampling
from xbackend.problems import Shape
from xbackend.report.page import write_report
from xbackend.report.points import three_digits
from xbackend.results import PointRecord, RunHeader
from xbackend.sweep.runner import Plan, run

SEED = 20261128
LABELS = ("cuda", "opencl")
VARIANTS = ("naive", "tiled", "vendor")
SIZES = (64, 128, 256, 512)


def _point(rng: np.random.Generator, label: str, variant: str, n: int, *, energy=True):
    """A verified point with a seeded rate and, where ``energy``, seeded joules."""
    flops = 2 * n * n * n
    gflops = float(rng.uniform(50.0, 5000.0))
    seconds = flops / gflops / 1e9
    stats = {"median": seconds, "q1": seconds * 0.95, "q3": seconds * 1.05, "min": seconds * 0.9}
    state = None
    if energy:
        watts = float(rng.uniform(60.0, 600.0))
        joules = watts * seconds * float(rng.uniform(1.0, 1.3))
        state = {"energy": {"joules_per_product": joules, "watts": watts, "window_s": 1.0,
                            "products": max(1, round(1.0 / seconds))}}  # fmt: skip
    return PointRecord(
        run_id="r", backend=label, label=label, device="Test GPU", variant=variant,
        tile=None if variant == "vendor" else 16, dtype="float32", M=n, K=n, N=n,
        flops=flops, status="ok", kernel_s=stats, end_to_end_s=stats, gflops=gflops,
        state=state,
    )  # fmt: skip


def _points(seed: int = SEED, *, energy=True) -> list[PointRecord]:
    rng = np.random.default_rng(seed)
    return [
        _point(rng, label, variant, n, energy=energy)
        for label in LABELS
        for variant in VARIANTS
        for n in SIZES
    ]


def _lines(figure: Figure, prefix: str) -> dict[str, Line2D]:
    return {
        str(line.get_gid()): line
        for axes in figure.axes
        for line in axes.get_lines()
        if str(line.get_gid()).startswith(prefix)
    }


def _xy(line: Line2D) -> list[tuple[float, float]]:
    """The points a line draws, as numbers."""
    x = np.asarray(line.get_xdata(), dtype=float)
    y = np.asarray(line.get_ydata(), dtype=float)
    return [(float(a), float(b)) for a, b in zip(x, y, strict=True)]


def _legend(figure: Figure) -> list[str]:
    return [text.get_text() for legend in figure.legends for text in legend.get_texts()]


def _expected(points: list[PointRecord], label: str, variant: str) -> list[tuple[int, float]]:
    mine = [p for p in points if (p.label, p.variant) == (label, variant)]
    return sorted((p.M * p.N, p.flops / (joules(p) or 0.0) / 1e9) for p in mine)


@pytest.mark.slow
def test_each_line_draws_its_records_gflops_per_joule(tmp_path):
    points = _points()
    drawn = plots.draw_figures(points, tmp_path)
    assert (tmp_path / f"{NAME}.png").stat().st_size > 0 and (tmp_path / f"{NAME}.svg").exists()
    assert NAME in drawn.pngs
    figure = energy_figure(points)
    assert figure is not None
    lines = _lines(figure, "energy:")
    assert len(lines) == len(LABELS) * len(VARIANTS)
    for label in LABELS:
        for variant in VARIANTS:
            tile = None if variant == "vendor" else 16
            line = lines[f"energy:{label}:{variant}:{tile}"]
            drawn_xy = _xy(line)
            expected = _expected(points, label, variant)
            assert [x for x, _ in drawn_xy] == [x for x, _ in expected]
            assert [y for _, y in drawn_xy] == pytest.approx([y for _, y in expected], rel=1e-12)


def test_a_run_without_energy_draws_no_energy_figure(tmp_path):
    points = _points(energy=False)
    assert energy_figure(points) is None
    assert NAME not in dict(plots.figures(points))
    plots.draw(points, tmp_path)
    assert not (tmp_path / f"{NAME}.png").exists()
    assert (tmp_path / "gflops.png").exists()  # the other figures are drawn as before


def test_points_without_a_reading_are_left_out_and_counted():
    points = _points()
    unread = {2, 5, 9, 17}  # some sizes of some lines: a reading that failed (``unread``)
    for index in unread:
        points[index] = dataclasses.replace(
            points[index], state={"energy": {"unread": "the device has no energy counter"}}
        )
    points[11] = dataclasses.replace(points[11], state=None)  # measured without --energy
    figure = energy_figure(points)
    assert figure is not None
    assert f"left out: {len(unread) + 1} without an energy reading" in _legend(figure)
    drawn = sum(len(_xy(line)) for line in _lines(figure, "energy:").values())
    assert drawn == len(points) - len(unread) - 1


def test_wrong_noisy_throttled_and_untrusted_points_are_drawn_as_every_figure_draws_them():
    points = _points()
    wrong, noisy, throttled, untrusted = 1, 6, 14, 21
    points[wrong] = dataclasses.replace(points[wrong], status="mismatch")
    points[noisy] = dataclasses.replace(points[noisy], flags=["noisy"])
    points[throttled] = dataclasses.replace(points[throttled], flags=["throttled"])
    points[untrusted] = dataclasses.replace(points[untrusted], flags=["above-peak-compute"])
    figure = energy_figure(points)
    assert figure is not None
    lines = _lines(figure, "energy:")
    on_lines = {xy for line in lines.values() for xy in _xy(line)}
    value = {i: (points[i].M * points[i].N, gflops_per_joule(points[i])) for i in range(24)}
    assert value[wrong] not in on_lines  # a wrong result is no point of a line ...
    (cross,) = _lines(figure, "wrong:").values()
    assert _xy(cross) == [value[wrong]]  # ... but a red cross
    assert value[throttled] not in on_lines and value[untrusted] not in on_lines
    assert value[noisy] in on_lines
    (hollow,) = _lines(figure, "noisy:").values()
    assert _xy(hollow) == [value[noisy]]
    legend = _legend(figure)
    assert "wrong result" in legend and "hollow: noisy" in legend
    assert "left out: 1 throttled, 1 above peak" in legend


def _write_run(folder: Path, points: list[PointRecord]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    header = RunHeader(run_id="r", environment={"host": "testhost"})
    lines = [header.to_dict(), *(p.to_dict() for p in points)]
    (folder / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return folder


@pytest.mark.slow  # two whole reports: 6.5 s on the 2-core machine
def test_the_report_has_an_energy_section_only_where_points_have_readings(tmp_path):
    points = _points()
    with_energy = _write_run(tmp_path / "with", points)
    written = write_report([with_energy], tmp_path / "report")
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "## Energy per product" in markdown
    assert any(path.name == f"{NAME}.png" for path in written)
    top = max((p for p in points if (p.label, p.variant) == ("cuda", "tiled")), key=lambda p: p.M)
    reading = joules(top) or 0.0
    size = f"{top.M}×{top.K}·{top.K}×{top.N}"
    row = f"| cuda tiled T=16 | mm | float32 | {size} | {three_digits(reading)} | "
    assert row + f"{three_digits(gflops_per_joule(top) or 0)} |" in markdown
    without = _write_run(tmp_path / "without", _points(energy=False))
    write_report([without], tmp_path / "plain")
    assert "Energy per product" not in (tmp_path / "plain" / "report.md").read_text()
    assert not list((tmp_path / "plain").rglob(f"{NAME}.png"))


class _Meter:
    """A monitor whose energy counter gains a seeded, random number of millijoules at
    each read (never zero): a stand-in for NVML's on a device without one."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.total_mj = 1e6

    def header(self):
        return {}

    def start(self):
        pass

    def sample(self):
        from xbackend.measuring.monitor import SampleState

        return SampleState(False, ())

    def finish(self):
        return {}

    def energy_mj(self):
        self.total_mj += float(self.rng.uniform(50.0, 500.0))
        return self.total_mj


class _MeteredCpu(CpuBackend):
    def __init__(self, seed: int):
        super().__init__()
        self.meter = _Meter(seed)

    def monitor(self):
        return self.meter


@pytest.mark.slow
def test_a_run_with_a_counter_draws_what_it_recorded(tmp_path):
    """The whole path: a run whose device has a (stand-in) counter records joules, and
    the figures compare draws from its records show them."""
    shapes = [Shape(16, 14, 16), Shape(32, 28, 32), Shape(64, 56, 64)]
    sampling = Sampling(max_samples=3, min_samples=3, energy_s=0.02)
    plan = Plan(shapes=shapes, variants=["naive", "vendor"], sampling=sampling)
    records = run(plan, [("cpu", _MeteredCpu(SEED))], tmp_path, log=lambda line: None)
    assert all(gflops_per_joule(p) is not None for p in records)
    plots.draw(records, tmp_path)
    assert (tmp_path / f"{NAME}.png").exists()
    figure = energy_figure(records)
    assert figure is not None
    for gid, line in _lines(figure, "energy:").items():
        variant = gid.split(":")[2]
        mine = sorted((p for p in records if p.variant == variant), key=lambda p: p.M)
        assert [y for _, y in _xy(line)] == pytest.approx([gflops_per_joule(p) for p in mine])
