"""Figures and tables compare kernels with kernels: where the kernels timed themselves on
the GPU's clock, every kernel-time figure draws the span, never the API's time around it;
the launch overhead (API time less span) has a figure and a table of its own; and each
kernel-time figure and table names the clock that timed it.

The results are synthetic (seeded random spans, API times 5 to 10 times the spans),
written as a results folder and read back, so the figures go through the path that
``compare`` and ``plot`` take; every expected number is computed here from the samples.
"""

from __future__ import annotations

import json
import random
import re
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.patches import Rectangle

from xbackend.analysis.clocks import clock_note, overheads, wrapped
from xbackend.analysis.roofs import roofs
from xbackend.analysis.tables import size_table
from xbackend.cli import main
from xbackend.figures import plots
from xbackend.figures.overhead import NAME as OVERHEAD
from xbackend.measuring.timing import Stats
from xbackend.report.page import write_report
from xbackend.results import PointRecord, RunHeader, latest, load

SIZES = [(16 * i, 14 * i, 16 * i) for i in (1, 2, 4, 8, 16)]
KERNEL_FIGURES = ("runtime_by_backend", "runtime_all", "gflops", "speedup")
# label, backend, clock, whether the kernels time themselves (api samples)
BACKENDS = (
    ("cuda", "cuda", "globaltimer", True),
    ("opencl:nvidia", "opencl", "globaltimer", True),
    ("opencl:intel", "opencl", "opencl-profiling", False),
    ("cpu", "cpu", "host", False),
)
VARIANTS = (("naive", 16), ("tiled", 16))


def _point(rng: random.Random, label: str, backend: str, clock: str, stamped: bool,
           variant: str, tile: int, shape: tuple[int, int, int]) -> PointRecord:  # fmt: skip
    """A point with seeded spans; where stamped, API times 5 to 10 times the spans and
    gaps between launches of 1 to 3 µs."""
    M, K, N = shape
    base = 2 * M * K * N / (2e10 if variant == "tiled" else 5e9) + rng.uniform(1e-6, 3e-6)
    kernel = [base * rng.uniform(0.95, 1.05) for _ in range(9)]
    api = [span * rng.uniform(5.0, 10.0) for span in kernel] if stamped else []
    gaps = [rng.uniform(1e-6, 3e-6) for _ in kernel] if stamped else []
    stats = Stats.of(kernel).to_dict()
    return PointRecord(
        run_id="clocks", backend=backend, label=label, device=f"{label} device",
        variant=variant, tile=tile, dtype="float32", M=M, K=K, N=N, flops=2 * M * K * N,
        status="ok", kernel_s=stats, end_to_end_s=Stats.of([t * 20 for t in kernel]).to_dict(),
        kernel_samples_s=kernel, end_to_end_samples_s=[t * 20 for t in kernel],
        gflops=2 * M * K * N / stats["median"] / 1e9, clock=clock, api_samples_s=api,
        gap_samples_s=gaps, launches=4 if stamped else 1,
    )  # fmt: skip


def _points(seed: int, stamped: bool = True) -> list[PointRecord]:
    rng = random.Random(seed)
    return [
        _point(rng, label, backend, clock if stamped else "", has_api and stamped,
               variant, tile, shape)
        for label, backend, clock, has_api in BACKENDS
        for variant, tile in VARIANTS
        for shape in SIZES
    ]  # fmt: skip


def _write(folder: Path, points: list[PointRecord], old: bool = False) -> Path:
    """A results folder of ``points``; ``old``: as files from before clocks were recorded."""
    header = {
        "type": "run", "run_id": "clocks", "timestamp": "2026-11-25T01:00:00+00:00",
        "environment": {"host": "testhost"}, "devices": {},
        "plan": {"shapes": [list(shape) for shape in SIZES], "seed": 0},
    }  # fmt: skip
    lines = [header]
    for point in points:
        line = point.to_dict()
        if old:
            for field in ("clock", "api_samples_s", "gap_samples_s"):
                line.pop(field, None)
        lines.append(line)
    folder.mkdir(parents=True)
    (folder / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return folder


def _read(folder: Path) -> list[PointRecord]:
    return latest(load([folder]).points)


def _floats(values: Any) -> list[float]:
    return [float(value) for value in np.asarray(values, dtype=float)]


def _kernel_lines(figure: Any) -> list[tuple[list[float], list[float]]]:
    """The (x, y) of every line a figure draws for a kernel (not end-to-end, not wrong)."""
    return [
        (_floats(line.get_xdata()), _floats(line.get_ydata()))
        for axes in figure.axes
        for line in axes.get_lines()
        if (line.get_gid() or "").startswith("kernel:")
    ]


def _one_line(title: str) -> str:
    """A title as one line (figures wrap the clock's note to their width)."""
    return " ".join(title.splitlines())


@pytest.fixture(scope="module")
def stamped(tmp_path_factory: pytest.TempPathFactory) -> list[PointRecord]:
    return _read(_write(tmp_path_factory.mktemp("stamped") / "run", _points(seed=23)))


def test_the_synthetic_api_times_are_far_from_the_spans(stamped):
    with_api = [p for p in stamped if p.api_samples_s]
    assert len(with_api) == 2 * len(VARIANTS) * len(SIZES)
    for point in with_api:
        assert point.api_median_s is not None and point.kernel_median_s is not None
        assert 4.5 < point.api_median_s / point.kernel_median_s < 10.5


def test_kernel_figures_draw_the_span_medians_not_the_api_medians(stamped):
    found = dict(plots.figures(stamped))
    spans = {round(p.kernel_median_s or 0, 15) for p in stamped}
    apis = {round(p.api_median_s, 15) for p in stamped if p.api_median_s is not None}
    rates = {round(p.flops / (p.kernel_median_s or 1) / 1e9, 6) for p in stamped}
    for name in ("runtime_by_backend", "runtime_all"):
        drawn = {round(y, 15) for _, ys in _kernel_lines(found[name]) for y in ys}
        assert drawn == spans, name
        assert not drawn & apis, name
    gflops = {round(y, 6) for _, ys in _kernel_lines(found["gflops"]) for y in ys}
    assert gflops == rates


def test_every_kernel_line_is_its_points_span_at_its_size(stamped):
    """Not only the same set of values: each line's y at each x is that point's span."""
    figure = dict(plots.figures(stamped))["runtime_by_backend"]
    spans = {(p.M * p.N, p.kernel_median_s) for p in stamped}
    apis = {(p.M * p.N, p.api_median_s) for p in stamped if p.api_median_s}
    for xs, ys in _kernel_lines(figure):
        for x, y in zip(xs, ys, strict=True):
            assert any(x == sx and y == pytest.approx(s, rel=1e-12) for sx, s in spans)
            assert not any(x == ax and y == pytest.approx(a, rel=1e-3) for ax, a in apis)


@pytest.mark.slow
def test_kernel_figures_name_the_clock_of_each_backend(stamped):
    note = clock_note(stamped)
    assert note == (
        "kernel time: GPU clock inside the kernels (globaltimer) for cuda, opencl:nvidia; "
        "OpenCL profiling events for opencl:intel; host clock for cpu"
    )
    for name, figure in plots.figures(stamped):
        if name in KERNEL_FIGURES:
            assert note in _one_line(figure.get_suptitle()), name
    assert note in size_table(stamped)


def test_the_overhead_figure_draws_api_less_span_per_launch(stamped):
    found = dict(plots.figures(stamped))
    assert OVERHEAD in found
    lines = {
        str(line.get_gid()): _floats(line.get_ydata())
        for axes in found[OVERHEAD].axes
        for line in axes.get_lines()
        if (line.get_gid() or "").startswith(("overhead:", "gap:"))
    }
    with_api = [p for p in stamped if p.api_samples_s]
    assert {gid.split(":", 1)[1] for gid in lines if gid.startswith("overhead:")} == {
        f"{p.label}:{p.variant}" for p in with_api
    }
    for point in with_api:
        drawn = lines[f"overhead:{point.label}:{point.variant}"]
        expected = ((point.api_median_s or 0) - (point.kernel_median_s or 0)) * 1e6
        api, span = (
            statistics.median(point.api_samples_s),
            statistics.median(point.kernel_samples_s),
        )
        assert expected == pytest.approx((api - span) * 1e6)
        assert any(value == pytest.approx(expected, rel=1e-9) for value in drawn)
        gaps = lines[f"gap:{point.label}:{point.variant}"]
        gap = statistics.median(point.gap_samples_s) * 1e6
        assert any(value == pytest.approx(gap, rel=1e-9) for value in gaps)


@pytest.mark.slow
def test_the_overhead_figure_is_written_only_where_api_samples_exist(tmp_path):
    folder = _write(tmp_path / "stamped", _points(seed=5))
    assert main(["plot", str(folder)]) == 0
    assert (folder / f"{OVERHEAD}.png").is_file()
    plain = [
        PointRecord(**{**p.__dict__, "api_samples_s": [], "gap_samples_s": []})
        for p in _points(seed=5)
    ]
    folder = _write(tmp_path / "plain", plain)
    assert main(["plot", str(folder)]) == 0
    assert (folder / "runtime_all.png").is_file()
    assert not (folder / f"{OVERHEAD}.png").exists()
    assert OVERHEAD not in dict(plots.figures(_read(folder)))


def _markdown_table(markdown: str, first: str) -> list[list[str]]:
    """The Markdown table whose header starts with ``first``: rows of cells."""
    rows: list[list[str]] = []
    for line in markdown.splitlines():
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            if cells[0] == first or rows:
                if rows and cells[0] == first:
                    break
                rows.append(cells)
        elif rows:
            break
    return [row for row in rows if not re.fullmatch(r":?-+:?", row[0])]


@pytest.mark.slow
def test_the_report_has_the_overhead_table_with_the_right_numbers(tmp_path):
    points = _points(seed=11)
    folder = _write(tmp_path / "run", points)
    write_report([folder], tmp_path / "out")
    markdown = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "## Launch overhead" in markdown and "Launch overhead</h2>" in page
    assert "what a launch costs beyond the kernel" in markdown
    assert (tmp_path / "out" / "report_figures" / f"{OVERHEAD}.png").is_file()
    rows = _markdown_table(markdown, "backend")
    assert rows[0][:5] == ["backend", "variant", "sizes", "launches a sample",
                           "overhead, median (µs)"]  # fmt: skip
    table = {(row[0], row[1]): row for row in rows[1:]}
    assert set(table) == {
        (label, f"{variant} T={tile}")
        for label, _, _, has_api in BACKENDS
        if has_api
        for variant, tile in VARIANTS
    }
    for (label, variant), row in table.items():
        line = [p for p in points if p.label == label and f"{p.variant} T={p.tile}" == variant]
        each = [statistics.median(p.api_samples_s) - statistics.median(p.kernel_samples_s)
                for p in line]  # fmt: skip
        gaps = [statistics.median(p.gap_samples_s) for p in line]
        assert row[2] == str(len(SIZES)) and row[3] == "4"
        assert float(row[4]) == pytest.approx(statistics.median(each) * 1e6, rel=2e-3)
        low, high = (float(v) for v in row[5].split(" – "))
        assert low == pytest.approx(min(each) * 1e6, rel=2e-3)
        assert high == pytest.approx(max(each) * 1e6, rel=2e-3)
        assert float(row[6]) == pytest.approx(statistics.median(gaps) * 1e6, rel=2e-3)
    assert clock_note(points)[1:] in markdown  # the head and the size table name the clock


def test_overheads_leave_out_points_without_api_samples_and_untrusted_ones():
    points = _points(seed=3)
    untrusted = points[0]
    assert untrusted.api_samples_s
    points[0] = PointRecord(**{**untrusted.__dict__, "flags": ["above-peak-compute"]})
    found = {(o.label, o.variant): o for o in overheads(points)}
    assert set(found) == {(label, v) for label in ("cuda", "opencl:nvidia") for v, _ in VARIANTS}
    assert found[(untrusted.label, untrusted.variant)].points == len(SIZES) - 1


@pytest.mark.slow
def test_older_files_draw_as_before(tmp_path):
    """Records without a clock or api fields: the same figures, no clock line, no
    overhead figure, and the report has no overhead section."""
    points = _points(seed=7, stamped=False)
    old = _read(_write(tmp_path / "old", points, old=True))
    assert all(p.clock == "" and not p.api_samples_s for p in old)
    found = dict(plots.figures(old))
    assert set(found) == set(KERNEL_FIGURES)
    assert clock_note(old) == ""
    for name in KERNEL_FIGURES:
        assert "kernel time:" not in found[name].get_suptitle()
    drawn = {round(y, 15) for _, ys in _kernel_lines(found["runtime_all"]) for y in ys}
    assert drawn == {round(p.kernel_median_s or 0, 15) for p in old}
    write_report([tmp_path / "old"], tmp_path / "out")
    markdown = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "Launch overhead" not in markdown and "kernel time:" not in markdown.lower()


@pytest.mark.slow
def test_the_roofline_and_bars_name_the_clock_and_draw_the_span(stamped):
    ceilings = {"flops_per_s": {"float32": 5e13}, "bytes_per_s": 3e12}
    header = RunHeader(
        run_id="clocks",
        devices={
            label: {"name": f"{label} device", "ceilings": ceilings} for label, *_ in BACKENDS
        },
    )
    found = dict(plots.figures(stamped, roofs([header])))
    roof = found["roofline"]
    assert clock_note(stamped) in _one_line(roof.get_suptitle())
    rates = {round(p.flops / (p.kernel_median_s or 1) / 1e9, 6) for p in stamped}
    drawn = {
        round(y, 6)
        for axes in roof.axes
        for line in axes.get_lines()
        if (line.get_gid() or "").startswith("points:")
        for y in _floats(line.get_ydata())
    }
    assert drawn == rates
    smallest = SIZES[0][0]
    one_size = [p for p in stamped if smallest == p.M]
    bars = dict(plots.figures(one_size))
    assert clock_note(one_size) in _one_line(bars["runtime_all"].get_suptitle())
    heights = {
        round(patch.get_height(), 15)
        for axes in bars["runtime_all"].axes
        for patch in axes.patches
        if isinstance(patch, Rectangle) and patch.get_height() > 0
    }
    assert heights == {round(p.kernel_median_s or 0, 15) for p in one_size}


def test_a_label_timed_by_two_clocks_names_the_variants_of_the_other():
    points = [p for p in _points(seed=2) if p.label == "opencl:intel"]
    vendor = PointRecord(**{**points[0].__dict__, "variant": "vendor", "tile": None,
                            "clock": "host"})  # fmt: skip
    note = clock_note([*points, vendor])
    assert note == (
        "kernel time: OpenCL profiling events for opencl:intel; "
        "host clock for opencl:intel (vendor)"
    )
    lines = wrapped(note, 40)
    assert all(len(line) <= 40 for line in lines) and " ".join(lines) == note


def test_single_launches_and_batches_have_rows_of_their_own():
    points = [p for p in _points(seed=13) if p.label == "cuda" and p.variant == "naive"]
    single = {SIZES[0], SIZES[1]}
    points = [
        PointRecord(**{**p.__dict__, "launches": 1, "gap_samples_s": []})
        if (p.M, p.K, p.N) in single else p
        for p in points
    ]  # fmt: skip
    found = overheads(points)
    assert [(o.launches, o.points, o.gap_s is None) for o in found] == [
        ((1, 1), 2, True),
        ((4, 4), len(SIZES) - 2, False),
    ]
    for row in found:
        part = [p for p in points if (p.launches > 1) == (row.launches[0] > 1)]
        each = [(p.api_median_s or 0) - (p.kernel_median_s or 0) for p in part]
        assert row.median_s == pytest.approx(statistics.median(each))
