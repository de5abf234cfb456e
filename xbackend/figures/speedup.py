"""The speed-up against size: how many times faster each variant is than its baseline
(tiled over naive; a user family's kernels over its own naive: ``analysis/speedups.py``).

One line per backend and variant (colour: variant, marker: backend, as in every figure;
the line's dashes: backend too, since most lines are one variant, tiled, on several),
each point the ratio of the two median kernel times with the interval the two medians'
95% intervals allow as an error bar; a hollow marker where either side was noisy or
throttled (the number is drawn, and said to be doubtful, never dropped). Both axes are
logarithmic: 2× and ½× lie as far from the line of 1× (no speed-up), which is drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, NullFormatter

from xbackend.analysis.speedups import Ratio, Speedup, speedups
from xbackend.figures.style import (
    Palette,
    literal,
    output_elements,
    output_label,
    outside_legend,
    short,
    suptitle,
    title_width,
    with_clock_note,
)
from xbackend.results import PointRecord

NAME = "speedup"  # the figure's file name, without suffix


def _x(ratio: Ratio) -> int:
    point = ratio.variant
    return output_elements(point.op, point.M, point.K, point.N)


def _name(found: Speedup) -> str:
    return f"{found.label}: {found.variant} over {found.baseline}"


# Labelled ratios of the speed-up axis, those within its range (logarithmic: a narrow range
# would show one number at most).
_TICKS = (0.1, 0.2, 0.5, 0.8, 1, 1.25, 1.5, 2, 3, 5, 10, 20, 50, 100, 200, 500, 1000)
_DASHES: tuple[Any, ...] = ("-", "--", ":", "-.")  # matplotlib's named line styles


def _draw(axes: Axes, found: Speedup, colour: str, marker: str, dashes: str) -> None:
    xs = [_x(r) for r in found.ratios]
    axes.plot(xs, [r.value for r in found.ratios], color=colour, linewidth=1.2, alpha=0.8,
              linestyle=dashes)  # fmt: skip
    for x, ratio in zip(xs, found.ratios, strict=True):
        axes.errorbar(
            [x], [ratio.value],
            yerr=[[max(0.0, ratio.value - ratio.low)], [max(0.0, ratio.high - ratio.value)]],
            color=colour, marker=marker, markersize=5, capsize=2, linewidth=1,
            markerfacecolor="white" if ratio.doubtful else colour,
            gid=f"speedup:{found.label}:{found.variant}:{'doubtful' if ratio.doubtful else 'ok'}",
        )  # fmt: skip


def speedup_figure(points: Sequence[PointRecord], palette: Palette) -> Figure | None:
    """The figure, or None where no pair was measured at two sizes or more."""
    found = [s for s in speedups(points) if len(s.ratios) > 1]
    if not found:
        return None
    figure = Figure(figsize=(8.5, 4.2), layout="constrained")
    axes = figure.add_subplot()
    axes.axhline(1.0, color="0.45", linewidth=0.8, zorder=0.5)
    labels = list(dict.fromkeys(s.label for s in found))

    def look(each: Speedup) -> tuple[str, str, Any]:
        colour = palette.colour(each.variant, each.largest.variant.tile)
        dashes = _DASHES[labels.index(each.label) % len(_DASHES)]
        return colour, palette.marker(each.label), dashes

    for each in found:
        _draw(axes, each, *look(each))
    axes.set_xscale("log")
    axes.set_yscale("log")
    values = [v for s in found for r in s.ratios for v in (r.low, r.high, 1.0) if v > 0]
    low, high = min(values) / 1.1, max(values) * 1.1
    axes.set_ylim(low, high)
    axes.set_yticks([t for t in _TICKS if low <= t <= high])
    axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}×"))
    axes.yaxis.set_minor_formatter(NullFormatter())
    axes.set_xlabel(output_label(p.op for s in found for p in (s.largest.variant,)))
    axes.set_ylabel("speed-up (baseline's median / variant's)")
    axes.grid(True, which="major", alpha=0.4)
    handles = [
        Line2D([], [], color=look(s)[0], marker=look(s)[1], linestyle=look(s)[2],
               label=short(_name(s)))
        for s in found
    ]  # fmt: skip
    handles.append(
        Line2D([], [], color="0.3", marker="o", markerfacecolor="white", linestyle="",
               label=literal("hollow: noisy or throttled"))
    )  # fmt: skip
    outside_legend(figure, handles, 4.2)
    used = [p for each in found for r in each.ratios for p in (r.baseline, r.variant)]
    heading = "Speed-up against size: each variant over its own naive kernel"
    suptitle(figure, with_clock_note(heading, used, title_width(figure)))
    axes.set_title(
        literal("ratio of median kernel times; bars: from the two medians' 95% intervals"),
        fontsize=8, loc="left",
    )  # fmt: skip
    return figure
