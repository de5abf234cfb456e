"""The roofline figure: the measured roofs of each device (the bandwidth's slope, the
compute ceiling's flat, labelled with their values), each configuration's points in its
variant's colour and its backend's marker, its largest size emphasised, the legend off the
data; drawn by plots.figures where the runs measured ceilings, and in the report."""

from __future__ import annotations

import json
import warnings
from typing import Any

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex

from xbackend.analysis.roofs import intensity, roofs
from xbackend.figures import plots
from xbackend.figures.roofline import roofline
from xbackend.figures.style import VARIANT_COLOURS
from xbackend.report.page import write_report
from xbackend.results import PointRecord, RunHeader

CEILINGS: dict[str, dict[str, Any]] = {
    "cpu": {"flops_per_s": {"float32": 200e9, "float64": 100e9}, "bytes_per_s": 30e9},
    "opencl": {"flops_per_s": {"float32": 450e9}, "bytes_per_s": 35e9},
}
# Two devices (a device is its name on its host: roofs.roofs gives one roof to each).
DEVICES = {"cpu": "EPYC", "opencl": "Radeon"}
VARIANTS = ("naive", "tiled", "vendor")
SIZES = (32, 64, 128, 256)


def _point(label, variant, n, dtype="float32", status="ok"):
    rng = np.random.default_rng([n, VARIANTS.index(variant), len(label)])
    gflops = float(rng.uniform(0.5, 50.0))
    seconds = 2 * n**3 / gflops / 1e9
    stats = {"median": seconds, "q1": seconds, "q3": seconds, "min": seconds}
    return PointRecord(
        run_id="r", backend=label, label=label, device=DEVICES[label], variant=variant,
        tile=None if variant == "vendor" else 16, dtype=dtype, M=n, K=7 * n // 8, N=n,
        flops=2 * n * n * (7 * n // 8), status=status, kernel_s=stats, end_to_end_s=stats,
        gflops=gflops,
    )  # fmt: skip


def _points(dtypes=("float32",)):
    return [
        _point(label, variant, n, dtype)
        for label in CEILINGS
        for variant in VARIANTS
        for n in SIZES
        for dtype in dtypes
    ]


def _header() -> RunHeader:
    devices = {label: {"name": DEVICES[label], "ceilings": c} for label, c in CEILINGS.items()}
    return RunHeader(run_id="r", devices=devices)


def _drawn(points):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no layout that could not be applied
        figure = roofline(points, roofs([_header()]))
        assert figure is not None
        FigureCanvasAgg(figure).draw()
    return figure


def _lines(figure, prefix):
    return [
        line
        for axes in figure.axes
        for line in axes.get_lines()
        if (line.get_gid() or "").startswith(prefix)
    ]


def test_each_device_has_its_roof_slope_then_flat():
    figure = _drawn(_points())
    (axes,) = figure.axes
    assert axes.get_xscale() == axes.get_yscale() == "log"
    for label, ceilings in CEILINGS.items():
        (roof,) = _lines(figure, f"roof:{label}")
        x, y = np.asarray(roof.get_xdata()), np.asarray(roof.get_ydata())
        compute, bandwidth = ceilings["flops_per_s"]["float32"], ceilings["bytes_per_s"]
        ridge = compute / bandwidth
        assert x[1] == pytest.approx(ridge)  # the slope ends at the ridge
        assert y[0] == pytest.approx(x[0] * bandwidth / 1e9)
        assert y[1] == pytest.approx(y[2]) == pytest.approx(compute / 1e9)
    labels = [text.get_text() for text in axes.texts]
    assert "cpu: 200 GFLOP/s" in labels and "opencl: 450 GFLOP/s" in labels
    assert not any("GB/s" in label for label in labels)  # the legend names the bandwidths
    styles = {line.get_gid(): line.get_linestyle() for line in _lines(figure, "roof:")}
    assert len(set(styles.values())) == 2  # one line style per device


def test_points_sit_at_their_intensity_with_one_colour_per_variant():
    points = _points()
    figure = _drawn(points)
    colours: dict[str, set[str]] = {}
    for line in _lines(figure, "points:"):
        colours.setdefault(line.get_gid()[7:], set()).add(to_hex(line.get_color()))
    assert colours == {v: {VARIANT_COLOURS[v]} for v in VARIANTS}
    markers = {line.get_marker() for line in _lines(figure, "points:")}
    assert len(markers) == 2  # one per backend
    naive_cpu = sorted((p for p in points if p.label == "cpu" and p.variant == "naive"),
                       key=lambda p: p.flops)  # fmt: skip
    (line,) = [
        line
        for line in _lines(figure, "points:naive")
        if list(line.get_ydata()) == [p.gflops for p in naive_cpu]
    ]
    assert list(line.get_xdata()) == pytest.approx([intensity(p) for p in naive_cpu])


def test_the_largest_size_of_each_configuration_is_emphasised():
    points = _points()
    figure = _drawn(points)
    largest = _lines(figure, "largest:")
    assert len(largest) == len(CEILINGS) * len(VARIANTS)
    small = max(line.get_markersize() for line in _lines(figure, "points:"))
    assert all(line.get_markersize() > small for line in largest)
    expected = {(round(intensity(p) or 0.0, 9), p.gflops) for p in points if SIZES[-1] == p.M}
    drawn = {(round(line.get_xdata()[0], 9), line.get_ydata()[0]) for line in largest}
    assert drawn == expected


@pytest.mark.slow
def test_the_legend_is_outside_the_axes_and_names_the_roofs():
    figure = _drawn(_points(("float32", "float64")))
    renderer = figure.canvas.get_renderer()
    (legend,) = figure.legends
    assert all(axes.get_legend() is None for axes in figure.axes)
    box = legend.get_window_extent(renderer)
    assert len(figure.axes) == 2  # one panel per dtype: each its compute ceiling
    for axes in figure.axes:
        assert not box.overlaps(axes.get_window_extent(renderer))
    texts = [text.get_text() for text in legend.get_texts()]
    assert "cpu roof: 30 GB/s" in texts and "opencl roof: 35 GB/s" in texts
    assert {"naive T=16", "tiled T=16", "vendor (reference)", "largest size"} <= set(texts)
    float64 = figure.axes[1]
    # opencl measured no float64 ceiling: its roof there is the bandwidth's slope alone.
    (slope,) = [line for line in float64.get_lines() if line.get_gid() == "roof:opencl"]
    x, y = np.asarray(slope.get_xdata()), np.asarray(slope.get_ydata())
    assert y == pytest.approx(x * 35)


@pytest.mark.slow
def test_no_roofline_without_ceilings_nor_for_wrong_points():
    points = _points()
    assert roofline(points, {}) is None
    assert "roofline" not in dict(plots.figures(points))
    assert "roofline" in dict(plots.figures(points, roofs([_header()])))
    wrong = [_point("cpu", "naive", 64, status="mismatch")]
    assert roofline(wrong, roofs([_header()])) is None


@pytest.mark.slow
def test_the_report_has_the_roofline_and_the_shares(tmp_path):
    header = {"type": "run", **_header().to_dict()}
    lines = [json.dumps(header)] + [json.dumps(p.to_dict()) for p in _points()]
    (tmp_path / "results.jsonl").write_text("\n".join(lines) + "\n")
    write_report([tmp_path], tmp_path)
    markdown = (tmp_path / "report.md").read_text()
    assert "## Roofline" in markdown and "report_figures/roofline.png" in markdown
    assert "| cpu | EPYC | 200 GFLOP/s | 100 GFLOP/s | 30 GB/s |" in markdown
    assert "share of roof" in markdown and (tmp_path / "report_figures/roofline.png").is_file()


def test_a_profiled_configuration_sits_at_the_bytes_its_kernels_moved():
    """Where xbackend profile counted a configuration's DRAM bytes, its points' intensity
    is flops over those bytes; elsewhere over the operation's fewest bytes; the profiled
    points themselves (one run under ncu) are not drawn."""
    import dataclasses

    from xbackend.analysis.roofs import profiled
    from xbackend.profiling.metrics import DRAM_READ, DRAM_WRITE
    from xbackend.results.records import PROFILER_CLOCK

    points = _points()
    chosen = points[5]
    rng = np.random.default_rng(11)
    read, written = (float(rng.uniform(1e6, 1e8)) for _ in range(2))
    counted = dataclasses.replace(
        chosen, run_id="p", clock=PROFILER_CLOCK, end_to_end_s=None,
        counters={DRAM_READ.metric: read, DRAM_WRITE.metric: written},
    )  # fmt: skip
    shown = profiled([*points, counted])
    assert len(shown) == len(points) and counted not in shown
    by_key = {p.key: p for p in shown}
    assert intensity(by_key[chosen.key]) == pytest.approx(chosen.flops / (read + written))
    others = [p for p in points if p.key != chosen.key]
    assert all(intensity(by_key[p.key]) == intensity(p) for p in others)
    assert intensity(chosen) != intensity(by_key[chosen.key])  # the fewest bytes differ
