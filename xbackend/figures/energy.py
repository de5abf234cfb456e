"""The energy per product against size: GFLOP per joule, where ``--energy`` read the
device's energy counter over a window of each point's product launched back to back
(``sampler.measure_energy``, docs/energy.md).

One line per backend and variant (colour: variant, marker: backend, dashed: the vendor's
line, as in every figure), one panel per operation, batch and data type; each point its
flops over its joules per product (``joules.gflops_per_joule``), against the output's
elements. Both axes are logarithmic where the values span more than a decade (the y axis
linear from 0 otherwise: close efficiencies stay comparable by eye). As in the other
figures, only verified and trusted points draw the lines, none throttled (the legend
counts those left out); a noisy point is hollow on its line; a wrong result is a red
cross, on no line, so an efficient but wrong kernel cannot pass for an efficient one.
Measured points without a reading (a run without ``--energy``, a device without a
counter: ``unread``) are left out, and the legend says how many; where no point has a
reading there is no figure.
"""

from __future__ import annotations

from collections.abc import Iterable

from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from xbackend.analysis.clocks import wrapped
from xbackend.analysis.joules import gflops_per_joule
from xbackend.figures.panels import Lines, by_panel, line_entries, panel_figure, size_of
from xbackend.figures.style import (
    WRONG_COLOUR,
    Palette,
    hollow,
    kernel_style,
    literal,
    noisy,
    outside_legend,
    suptitle,
    throttled,
    title_width,
    trust_handles,
)
from xbackend.results import LineKey, PointRecord

NAME = "energy"  # the figure's file name, without suffix
_HOW = (
    "joules per product: the device's energy counter (NVML) over a window of the product "
    "launched back to back (--energy)"
)


def _value(point: PointRecord) -> float:
    found = gflops_per_joule(point)
    assert found is not None  # only points with a reading are drawn
    return found


def _shown(point: PointRecord) -> bool:
    """A point the figure shows: measured with a reading, trusted, not throttled (a
    wrong one as a cross)."""
    return (
        point.measured and point.trusted and not throttled(point)
        and gflops_per_joule(point) is not None
    )  # fmt: skip


def _draw_line(axes: Axes, key: LineKey, points: list[PointRecord], palette: Palette) -> None:
    """A line's verified points (hollow where noisy), and its wrong ones as red crosses."""
    colour, marker = palette.colour(key.variant, key.tile), palette.marker(key.label)
    good = [p for p in points if p.status == "ok"]
    x, y = [size_of(p) for p in good], [_value(p) for p in good]
    axes.plot(
        x, y, color=colour, marker=marker, markersize=4, linewidth=1.6,
        linestyle=kernel_style(key.variant), gid=f"energy:{key.label}:{key.variant}:{key.tile}",
        markevery=[index for index, point in enumerate(good) if not noisy(point)],
    )  # fmt: skip
    shaky = [(a, b) for a, b, point in zip(x, y, good, strict=True) if noisy(point)]
    hollow(axes, shaky, colour, marker, f"noisy:{key.label}:{key.variant}:{key.tile}")
    bad = [p for p in points if p.status != "ok"]
    if bad:
        axes.plot(
            [size_of(p) for p in bad], [_value(p) for p in bad], linestyle="none", marker="x",
            color=WRONG_COLOUR, markersize=9, markeredgewidth=2,
            gid=f"wrong:{key.label}:{key.variant}:{key.tile}",
        )  # fmt: skip


def _draw_panel(axes: Axes, lines: Lines, palette: Palette) -> None:
    for key, points in lines.items():
        _draw_line(axes, key, points, palette)
    values = [_value(p) for points in lines.values() for p in points]
    axes.set_xscale("log")
    if max(values) > 10 * min(values):
        axes.set_yscale("log")
        axes.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        axes.yaxis.set_minor_formatter(NullFormatter())
    else:
        axes.set_ylim(0.0, max(values) * 1.1)
    axes.set_ylabel("GFLOP per joule")
    axes.grid(True, which="major", alpha=0.4)
    axes.grid(True, which="minor", alpha=0.1)


def _handles(
    keys: Iterable[LineKey], palette: Palette, drawn: list[PointRecord], points: list[PointRecord]
) -> list[Artist]:
    """One entry per backend and variant, then what is hollow, crossed and left out."""
    read = [p for p in points if p.measured and gflops_per_joule(p) is not None]
    left_out = [p for p in read if not _shown(p)]
    handles = [*line_entries(keys, palette, styled=True), *trust_handles(drawn, left_out)]
    if any(p.status != "ok" for p in drawn):
        handles.append(
            Line2D([], [], linestyle="none", marker="x", color=WRONG_COLOUR, markeredgewidth=2,
                   label="wrong result")
        )  # fmt: skip
    missing = unread(points)
    if missing:
        handles.append(
            Line2D([], [], linestyle="none", label=f"left out: {missing} without an energy reading")
        )
    return handles


def unread(points: Iterable[PointRecord]) -> int:
    """How many measured points have no reading of their energy."""
    return sum(p.measured and gflops_per_joule(p) is None for p in points)


def energy_figure(points: list[PointRecord], palette: Palette | None = None) -> Figure | None:
    """GFLOP per joule of ``points`` against size; None where no point shown has a reading."""
    panels = by_panel(points, _shown)
    if not panels:
        return None
    figure, palette, drawn = panel_figure(panels, palette, _draw_panel)
    how = map(literal, wrapped(_HOW, title_width(figure)))
    suptitle(figure, "\n".join(["Energy per product: GFLOP per joule against size", *how]))
    keys = [key for lines in panels.values() for key in lines]
    outside_legend(figure, _handles(keys, palette, drawn, points), figure.get_figheight())
    return figure
