"""Bars for points of a single size: one group per operation and data type, one bar per
variant (and tile), one panel per backend; ``runtime_all`` puts every backend on one
axes and tells them apart by hatching.

Lines through one x each would stack every series at one place; bars keep them apart.
The time axis is logarithmic only where the values span more than 30×, so close
latencies stay comparable by eye. A wrong result is a hatched bar with a red cross; a
skipped or failed point says so where its bar would be. Only trusted points reach here
(``plots`` leaves out those timed above the device's peak); the title names the cache
mode where it is not warm.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from xbackend.figures.series import Lines
from xbackend.figures.style import (
    WRONG_COLOUR,
    Palette,
    literal,
    outside_legend,
    series_name,
    short,
    suptitle,
    title_width,
    variant_sort,
    with_cache_note,
    with_clock_note,
)
from xbackend.operations import OPS, operation
from xbackend.results import PointRecord

HATCHES = ("", "//", "..", "\\\\", "oo", "--", "++")
Series = tuple[str, str, str, int | None]  # label, device, variant, tile
Group = tuple[str, int, str]  # op, batch, dtype


def _median(point: PointRecord) -> float:
    return (point.kernel_s or {})["median"]


def _gflops(point: PointRecord) -> float:
    return math.nan if point.gflops is None else point.gflops


def _group_name(group: Group) -> str:
    op, batch, dtype = group
    try:
        name = operation(op).title(batch)
    except ValueError:
        name = op
    return f"{short(name, 20)}\n{short(dtype, 20)}"


def _group_sort(group: Group) -> tuple[object, ...]:
    op, batch, dtype = group
    return (OPS.index(op) if op in OPS else len(OPS), op, batch, dtype)


def figures(lines: Lines, palette: Palette) -> list[tuple[str, Figure]]:
    """The run folder's figures of single-size points, as bars."""
    points = [point for line_points in lines.values() for point in line_points]
    time = "median kernel time (s)"
    rate = "GFLOP/s (median kernel time)"
    return [
        (
            "runtime_by_backend",
            _figure(points, palette, _median, time, True, "Kernel time per backend"),
        ),
        (
            "runtime_all",
            _figure(points, palette, _median, time, False, "Kernel time, every backend"),
        ),
        ("gflops", _figure(points, palette, _gflops, rate, True, "Throughput per backend")),
    ]


def _series(point: PointRecord) -> Series:
    return (point.label, point.device, point.variant, point.tile)


def _series_sort(series: Series) -> tuple[object, ...]:
    label, device, variant, tile = series
    return (variant_sort(variant), tile or 0, label, device)


def _figure(
    points: list[PointRecord],
    palette: Palette,
    value: Callable[[PointRecord], float],
    ylabel: str,
    by_backend: bool,
    title: str,
) -> Figure:
    panels: dict[tuple[str, ...], list[PointRecord]] = {}
    for point in points:
        panels.setdefault((point.label, point.device) if by_backend else (), []).append(point)
    groups = sorted({(p.op, p.batch, p.dtype) for p in points}, key=_group_sort)
    labels = sorted({p.label for p in points})
    most = max(len({_series(p) for p in part}) for part in panels.values())
    width = min(22.0, 2.0 + len(groups) * (0.22 * most + 0.5))
    height = 3.4 * len(panels) + 0.8
    figure = Figure(figsize=(width + 2.6, height), layout="constrained")
    handles: dict[str, Artist] = {}
    for index, (panel, part) in enumerate(panels.items()):  # as the points met them
        axes = figure.add_subplot(len(panels), 1, index + 1)
        series = sorted({_series(p) for p in part}, key=_series_sort)
        for place, group in enumerate(groups):
            for slot, one in enumerate(series):
                found = [p for p in part if _series(p) == one and (p.op, p.batch, p.dtype) == group]
                if found:
                    x = place - 0.4 + 0.8 / len(series) * (slot + 0.5)
                    hatch = "" if by_backend else HATCHES[labels.index(one[0]) % len(HATCHES)]
                    _bar(axes, found[-1], x, 0.8 / len(series), palette, value, hatch)
        for label, _device, variant, tile in series:
            name = (
                series_name(variant, tile)
                if by_backend
                else f"{label} {series_name(variant, tile)}"
            )
            hatch = "" if by_backend else HATCHES[labels.index(label) % len(HATCHES)]
            handles.setdefault(
                literal(name),
                Patch(facecolor=palette.colour(variant, tile), hatch=hatch, label=literal(name)),
            )
        _finish(axes, part, value, groups, ylabel)
        if panel:
            axes.set_title(short(f"{panel[0]}: {panel[1]}", 90), fontsize=9)
    if any(p.status == "mismatch" for p in points):
        handles["wrong result"] = Line2D(
            [],
            [],
            linestyle="none",
            marker="x",
            color=WRONG_COLOUR,
            markeredgewidth=2,
            label="wrong result",
        )
    measured = [p for p in points if p.measured]
    title = with_cache_note(title, (p.cache for p in measured))
    suptitle(figure, with_clock_note(title, measured, title_width(figure)))
    outside_legend(figure, list(handles.values()), height)
    return figure


def _finish(
    axes: Axes,
    part: list[PointRecord],
    value: Callable[[PointRecord], float],
    groups: list[Group],
    ylabel: str,
) -> None:
    values = [value(p) for p in part if p.measured and value(p) > 0]
    if values and max(values) > 30 * min(values):
        axes.set_yscale("log")
    axes.margins(y=0.15)
    axes.set_xticks(range(len(groups)), [_group_name(group) for group in groups])
    axes.set_xlim(-0.5, len(groups) - 0.5)
    axes.set_ylabel(ylabel)
    axes.grid(True, axis="y", which="major", alpha=0.4)


def _bar(
    axes: Any,
    point: PointRecord,
    x: float,
    width: float,
    palette: Palette,
    value: Callable[[PointRecord], float],
    hatch: str,
) -> None:
    if not point.measured:
        axes.text(x, 0.02, literal(point.status), rotation=90, fontsize=7, ha="center",
                  va="bottom", color="grey", transform=axes.get_xaxis_transform())  # fmt: skip
        return
    wrong = point.status == "mismatch"
    axes.bar(
        x,
        value(point),
        width,
        color=palette.colour(point.variant, point.tile),
        hatch="xx" if wrong else hatch,
        edgecolor=WRONG_COLOUR if wrong else "white",
        linewidth=0.5,
        gid=f"bar:{point.variant}",
    )
    if wrong:
        axes.plot(
            [x], [value(point)], linestyle="none", marker="x", color=WRONG_COLOUR, markersize=9
        )
