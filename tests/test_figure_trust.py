"""Figures draw no point as data that its record flags: a noisy point is a hollow marker
on its line (never a filled one), a throttled point and one timed faster than its device
can run (flagged above its peak, or above the device's measured compute ceiling) are in
no line at all; the legend says what hollow means and how many points were left out."""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from xbackend.analysis.roofs import ABOVE_CEILING, intensity, roofs
from xbackend.figures import plots
from xbackend.figures.roofline import roofline
from xbackend.figures.series import Line
from xbackend.results import PointRecord, RunHeader

CEILING = 200e9  # FLOP/s float32, measured on the one device
LABELS = ("cpu", "opencl")
VARIANTS = ("naive", "tiled", "vendor")
SIZES = (32, 64, 96, 128, 160, 192)


def _point(rng: np.random.Generator, label: str, variant: str, n: int) -> PointRecord:
    gflops = float(rng.uniform(1.0, 150.0))  # under the ceiling: a time that can be
    flops = 2 * n * n * (7 * n // 8)
    seconds = flops / gflops / 1e9
    stats = {"median": seconds, "q1": seconds * 0.9, "q3": seconds * 1.1, "min": seconds * 0.8}
    end_to_end = {name: value * 1.7 for name, value in stats.items()}
    return PointRecord(
        run_id="r", backend=label, label=label, device="EPYC", variant=variant,
        tile=None if variant == "vendor" else 16, dtype="float32", M=n, K=7 * n // 8, N=n,
        flops=flops, status="ok", kernel_s=stats, end_to_end_s=end_to_end, gflops=gflops,
    )  # fmt: skip


def _flagged(seed: int = 26) -> tuple[list[PointRecord], dict[str, set[tuple[str, str, int]]]]:
    """Points of two backends on one device, some flagged at random: noisy, throttled,
    above the theoretical peak (the record's flag), or faster than the measured ceiling
    (no flag in the record: ``roofs.checked`` adds it). The largest size is never left
    out, so that every line has points."""
    rng = np.random.default_rng(seed)
    points: list[PointRecord] = []
    flagged: dict[str, set[tuple[str, str, int]]] = {"noisy": set(), "out": set()}
    for label in LABELS:
        for variant in VARIANTS:
            for n in SIZES:
                point = _point(rng, label, variant, n)
                draw = rng.uniform()
                key = (label, variant, n)
                if draw < 0.3:
                    point = dataclasses.replace(point, flags=["noisy"])
                    flagged["noisy"].add(key)
                elif n != SIZES[-1] and draw < 0.4:
                    point = dataclasses.replace(point, flags=["throttled"])
                    flagged["out"].add(key)
                elif n != SIZES[-1] and draw < 0.5:
                    point = dataclasses.replace(point, flags=["above-peak-compute"])
                    flagged["out"].add(key)
                elif n != SIZES[-1] and draw < 0.6:
                    faster = point.kernel_s or {}
                    seconds = point.flops / (CEILING * 1.5)  # half again the ceiling
                    point = dataclasses.replace(
                        point, gflops=CEILING * 1.5 / 1e9,
                        kernel_s={**faster, "median": seconds},
                    )  # fmt: skip
                    flagged["out"].add(key)
                points.append(point)
    assert flagged["noisy"] and flagged["out"]  # the seed flags some of each
    return points, flagged


def _header() -> RunHeader:
    ceilings = {"flops_per_s": {"float32": CEILING}, "bytes_per_s": 30e9}
    slower = {"flops_per_s": {"float32": CEILING / 5}, "bytes_per_s": 20e9}
    devices = {
        "cpu": {"name": "EPYC", "ceilings": slower},  # NumPy measured less on the same cores
        "opencl": {"name": "EPYC", "ceilings": ceilings},
    }
    return RunHeader(run_id="r", environment={"host": "vm"}, devices=devices)


def _markers(figure: Figure) -> tuple[set[tuple[float, float]], set[tuple[float, float]]]:
    """Every marker the figure's axes draw, as (x, y): those filled and those hollow."""
    filled: set[tuple[float, float]] = set()
    hollow: set[tuple[float, float]] = set()
    for axes in figure.axes:
        for line in axes.get_lines():
            if line.get_marker() in (None, "None", "", " "):
                continue
            x, y = _data(line)
            every: Any = line.get_markevery()  # the figures give a list of places, or None
            shown = range(len(x)) if every is None else [int(index) for index in every]
            face = line.get_markerfacecolor()
            empty = face == "none" or to_rgba(face)[3] == 0
            for index in shown:
                (hollow if empty else filled).add((_round(x[index]), _round(y[index])))
    return filled, hollow


def _line_data(figure: Figure) -> set[tuple[float, float]]:
    """Every (x, y) any line of the figure passes through, markers or not."""
    return {
        (_round(x), _round(y))
        for axes in figure.axes
        for line in axes.get_lines()
        for x, y in zip(*_data(line), strict=True)
    }


def _data(line: Line2D) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(line.get_xdata(), dtype=float), np.asarray(line.get_ydata(), dtype=float)


def _round(value: float) -> float:
    return float(f"{float(value):.9g}")


def _legend(figure: Figure) -> list[str]:
    return [text.get_text() for legend in figure.legends for text in legend.get_texts()]


def _drawn(figure: Figure) -> Figure:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no layout that could not be applied
        FigureCanvasAgg(figure).draw()
    return figure


def _where(point: PointRecord, name: str) -> tuple[float, float]:
    """Where a figure puts a point: its x and y in that figure."""
    if name == "roofline":
        return _round(intensity(point) or math.nan), _round(point.gflops or math.nan)
    x = plots.x_of(point)
    y = point.gflops if name == "gflops" else (point.kernel_s or {})["median"]
    return _round(x), _round(y or math.nan)


@pytest.mark.parametrize("name", ["runtime_by_backend", "runtime_all", "gflops", "roofline"])
def test_no_figure_draws_a_flagged_point_as_data(name):
    points, flagged = _flagged()
    found = dict(plots.figures(points, roofs([_header()])))
    figure = _drawn(found[name])
    filled, hollow = _markers(figure)
    data = _line_data(figure)
    for point in points:
        key = (point.label, point.variant, point.M)
        where = _where(point, name)
        if key in flagged["noisy"]:
            assert where in hollow and where not in filled, (name, key)
        elif key in flagged["out"]:
            assert where not in data, (name, key)  # in no line, no marker
        else:
            assert where in filled, (name, key)
    texts = _legend(figure)
    assert "hollow: noisy" in texts
    # Every measured point the figure's lines leave out, counted.
    assert any(text.startswith("left out: ") for text in texts), texts


def test_the_legend_counts_the_points_left_out():
    points, flagged = _flagged()
    throttled = sum("throttled" in p.flags for p in points)
    above = len(flagged["out"]) - throttled
    figure = _drawn(dict(plots.figures(points, roofs([_header()])))["runtime_all"])
    assert f"left out: {throttled} throttled, {above} above peak" in _legend(figure)


def test_a_point_above_the_measured_ceiling_is_flagged_where_tables_and_figures_see_it():
    from xbackend.analysis.tables import size_rows

    points, flagged = _flagged()
    rows = size_rows(points, roofs([_header()]))
    above = {
        (row["backend"], row["variant"], row["M"])
        for row in rows
        if ABOVE_CEILING in str(row["flags"]).split(",")
    }
    recorded = {(p.label, p.variant, p.M) for p in points if p.flags and p.flags[0] != "noisy"}
    assert above and above == flagged["out"] - recorded
    peak = {(p.label, p.variant, p.M) for p in points if "above-peak-compute" in p.flags}
    for row in rows:
        key = (row["backend"], row["variant"], row["M"])
        if key in above:  # flagged as a time beyond the device's peak is, in every column
            assert "above-peak-compute" in str(row["flags"]).split(",")
        if key in above | peak:
            assert row["roof_share"] is None and row["speedup_vs_naive"] is None
        elif row["status"] == "ok":
            assert isinstance(row["roof_share"], float) and row["roof_share"] <= 1.0


def test_a_figure_of_only_steady_points_says_nothing_of_noise():
    rng = np.random.default_rng(7)
    points = [_point(rng, "cpu", variant, n) for variant in VARIANTS for n in SIZES]
    figure = _drawn(roofline(points, roofs([_header()])) or Figure())
    filled, hollow = _markers(figure)
    assert filled and not hollow
    texts = _legend(figure)
    assert "hollow: noisy" not in texts and not any(t.startswith("left out") for t in texts)


def test_hollow_markers_are_hollow_in_the_saved_png(tmp_path):
    """The PNG itself: a noisy point's marker has the background at its centre, a steady
    point's the line's colour (pixels of the saved file, not the artists)."""
    from matplotlib.image import imread

    from xbackend.figures.style import Palette

    rng = np.random.default_rng(3)
    steady = _point(rng, "cpu", "naive", 64)
    # Each a line of one point, so that no line runs through either marker's centre.
    noisy = dataclasses.replace(_point(rng, "cpu", "tiled", 128), flags=["noisy"])
    figure = Figure(figsize=(4, 3), dpi=100)
    axes = figure.add_subplot(1, 1, 1)
    style = plots.Panels(True, lambda p: (p.kernel_s or {})["median"], "s", "t")
    palette = Palette([("cpu", "naive", 16), ("cpu", "tiled", 16)])
    for point in (steady, noisy):
        plots._draw_line(axes, Line(point.line_key, 1, False), [point], style, palette)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlim(plots.x_of(steady) / 2, plots.x_of(noisy) * 2)
    plots.save(figure, tmp_path, "one", dpi=100)
    image = imread(tmp_path / "one.png")  # the layout is final once it is saved
    height = image.shape[0]
    centres = []
    for point in (steady, noisy):
        x, y = axes.transData.transform((plots.x_of(point), (point.kernel_s or {})["median"]))
        centres.append(image[round(float(height - y)), round(float(x))][:3])
    colour = np.asarray(to_rgba(palette.colour("naive", 16))[:3])
    assert np.allclose(centres[0], colour, atol=0.1)  # filled: the line's colour
    assert np.allclose(centres[1], 1.0, atol=0.1)  # hollow: white at its centre
