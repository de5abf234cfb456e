"""The launch overhead against size: what a launch costs beyond its kernel.

Where the kernels timed themselves on the GPU's clock (``clock`` "globaltimer"), the
API's clock timed the same launches (``api_samples_s``); a point's overhead is the API's
median less the kernels' span (``PointRecord.overhead_s``), in µs per launch. One line
per backend and variant (colour: variant, marker: backend, as in every figure), one panel
per operation, batch and data type; dotted, where batches recorded it, the gap between
launches on the device; a hollow marker where a sample was a single launch (no batch
shares the launch's fixed costs, so it costs more). The y axis is logarithmic where the
values span more than a decade and are all above zero (a negative overhead, the two
clocks disagreeing, is kept). Only verified, trusted points with an overhead are drawn,
none throttled.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Final

from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from xbackend.analysis.clocks import OVERHEAD_MEANING, wrapped
from xbackend.figures.panels import Lines, by_panel, line_entries, panel_figure, size_of
from xbackend.figures.style import (
    Palette,
    literal,
    outside_legend,
    suptitle,
    throttled,
    title_width,
)
from xbackend.results import LineKey, PointRecord

NAME = "launch_overhead"  # the figure's file name, without suffix
_GAP: Final = ":"


def _drawable(point: PointRecord) -> bool:
    return (
        point.status == "ok" and point.trusted and not throttled(point)
        and point.overhead_s is not None
    )  # fmt: skip


def _micro(seconds: float | None) -> float:
    return math.nan if seconds is None else seconds * 1e6


def _draw_line(axes: Axes, key: LineKey, points: list[PointRecord], palette: Palette) -> None:
    """A line's overheads; hollow where a sample was one launch (no batch to share the
    launch's fixed costs, so its overhead is larger)."""
    colour, marker = palette.colour(key.variant, key.tile), palette.marker(key.label)
    x = [size_of(p) for p in points]
    y = [_micro(p.overhead_s) for p in points]
    axes.plot(
        x, y, color=colour, marker=marker, markersize=4, linewidth=1.6,
        gid=f"overhead:{key.label}:{key.variant}",
    )  # fmt: skip
    single = [(a, b) for a, b, p in zip(x, y, points, strict=True) if p.launches == 1]
    if single:
        axes.plot(
            *zip(*single, strict=True), linestyle="none", color=colour, marker=marker,
            markersize=5, markerfacecolor="white", gid=f"single:{key.label}:{key.variant}",
        )  # fmt: skip


def _draw_panel(axes: Axes, lines: Lines, palette: Palette) -> None:
    values: list[float] = []
    for key, points in lines.items():
        colour = palette.colour(key.variant, key.tile)
        x = [size_of(p) for p in points]
        y = [_micro(p.overhead_s) for p in points]
        _draw_line(axes, key, points, palette)
        gaps = [_micro(p.gap_median_s) for p in points]
        if any(math.isfinite(gap) for gap in gaps):
            axes.plot(
                x, gaps, color=colour, linestyle=_GAP, linewidth=1.2,
                gid=f"gap:{key.label}:{key.variant}",
            )  # fmt: skip
        values += [v for v in (*y, *gaps) if math.isfinite(v)]
    axes.set_xscale("log")
    if values and min(values) > 0 and max(values) > 10 * min(values):
        axes.set_yscale("log")
        axes.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        axes.yaxis.set_minor_formatter(NullFormatter())
    else:
        axes.axhline(0.0, color="0.6", linewidth=0.8)
    axes.set_ylabel("launch overhead (µs per launch)")
    axes.grid(True, which="major", alpha=0.4)
    axes.grid(True, which="minor", alpha=0.1)


def _handles(keys: Iterable[LineKey], palette: Palette, gaps: bool, single: bool) -> list[Artist]:
    """One entry per backend and variant, then what the line styles mean."""
    handles = line_entries(keys, palette)
    handles.append(Line2D([], [], color="0.3", label="overhead: API time − span"))
    if single:
        handles.append(
            Line2D([], [], linestyle="none", color="0.3", marker="o", markerfacecolor="white",
                   label="hollow: one launch a sample")
        )  # fmt: skip
    if gaps:
        handles.append(
            Line2D([], [], color="0.3", linestyle=_GAP, label="gap between launches (device)")
        )
    return handles


def overhead_figure(points: list[PointRecord], palette: Palette | None = None) -> Figure | None:
    """The launch overhead of ``points`` against size; None where none has one."""
    panels = by_panel(points, _drawable)
    if not panels:
        return None
    figure, palette, drawn = panel_figure(panels, palette, _draw_panel)
    keys = [key for lines in panels.values() for key in lines]
    gaps = any(p.gap_median_s is not None for p in drawn)
    meaning = wrapped(OVERHEAD_MEANING[0].upper() + OVERHEAD_MEANING[1:], title_width(figure))
    suptitle(figure, "\n".join(["Launch overhead per launch", *map(literal, meaning)]))
    single = any(p.launches == 1 for p in drawn)
    outside_legend(figure, _handles(keys, palette, gaps, single), figure.get_figheight())
    return figure
