"""The figures of machines side by side (``xbackend.analysis.side_by_side``): each machine's time
over the base machine's, one colour per machine.

* ``machines``: one row per configuration (backend, operation, data type, variant, tile)
  at the largest size that the base and another machine both measured; a filled dot
  for the ratio of median kernel times, a hollow square for the end-to-end times, each
  with its 95% bootstrap interval as a bar;
* ``machines_by_size``: one small panel per configuration, the kernel ratio against
  size (solid, with its interval as a band) and the end-to-end ratio (dotted).

The ratio axis is logarithmic (×2 and ×0.5 stand as far from 1), with the band of
±threshold around 1 shaded; the legend stands right of the data. Strings from results
reach the figures only through ``style.literal`` and ``style.short``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

from xbackend.analysis.diff import DEFAULT_THRESHOLD, Comparison
from xbackend.analysis.side_by_side import Machine, Row, line_name, size_name
from xbackend.figures.style import (
    END_TO_END,
    KERNEL,
    output_elements,
    output_label,
    outside_legend,
    short,
    suptitle,
)
from xbackend.results import PointKey

# One colour per machine other than the base (which is the line at 1), in the order met.
# No red: a red cross is a wrong result elsewhere.
MACHINE_COLOURS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
)  # fmt: skip
_BAND = "0.9"
_RATIO_TICKS = (0.1, 0.2, 0.25, 0.33, 0.5, 0.67, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0)
_FINE_TICKS = (0.95, 1.0, 1.05)  # where the ratios lie close to 1
_MOST_SIZE_TICKS = 6  # sizes labelled one by one; more: the axis's own decades
MOST_PANELS = 24  # panels of machines_by_size; the rest are in machines.csv
_ROW_IN = 0.32  # inches per configuration in ``machines``

Line = tuple[str, str, int, str, str, int | None]  # label, op, batch, dtype, variant, tile


def _line(key: PointKey) -> Line:
    return (key.label, key.op, key.batch, key.dtype, key.variant, key.tile)


def _size(key: PointKey) -> str:
    """A size as a tick says it: ``4096³`` for a square product."""
    if key.M == key.K == key.N:
        return (f"{key.batch}×" if key.batch != 1 else "") + f"{key.M}³"
    return size_name(key)


def _elements(key: PointKey) -> int:
    return output_elements(key.op, key.M, key.K, key.N)


def colours(rows: Sequence[Row]) -> dict[Machine, str]:
    """Each machine other than a base its colour, in the order the rows meet them."""
    found: dict[Machine, str] = {}
    for row in rows:
        for side in row.sides:
            if side.machine != row.base and side.machine not in found and row.base is not None:
                found[side.machine] = MACHINE_COLOURS[len(found) % len(MACHINE_COLOURS)]
    return found


def _judged(row: Row) -> bool:
    return any(side.kernel is not None and side.kernel.interval is not None for side in row.sides)


def _ratio_axis(axes: Axes, values: list[float], threshold: float, vertical: bool) -> None:
    """A logarithmic ratio axis over ``values`` (and 1), ticks at round ratios, the band."""
    finite = [v for v in values if v > 0 and math.isfinite(v)] or [1.0]
    low, high = min(min(finite), 1 - threshold) / 1.15, max(max(finite), 1 + threshold) * 1.15
    ticks = _spaced([t for t in _RATIO_TICKS if low <= t <= high], math.log(high / low))
    if len(ticks) < 3:
        ticks = sorted({*ticks, *(t for t in _FINE_TICKS if low <= t <= high)})
    if vertical:
        axes.axvspan(1 - threshold, 1 + threshold, color=_BAND, linewidth=0, zorder=0)
        axes.axvline(1.0, color="0.3", linewidth=1.0, zorder=0.5)
        axes.set_xscale("log")
        axes.set_xlim(low, high)
    else:
        axes.axhspan(1 - threshold, 1 + threshold, color=_BAND, linewidth=0, zorder=0)
        axes.axhline(1.0, color="0.3", linewidth=1.0, zorder=0.5)
        axes.set_yscale("log")
        axes.set_ylim(low, high)
    axis = axes.xaxis if vertical else axes.yaxis
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(lambda value, _: f"{value:g}")
    axis.set_minor_locator(NullLocator())
    axis.set_minor_formatter(NullFormatter())


def _spaced(ticks: list[float], span: float) -> list[float]:
    """``ticks`` at least an eleventh of the (logarithmic) ``span`` apart, 1 always kept."""
    kept = [1.0]
    for tick in sorted(ticks, key=lambda t: abs(math.log(t))):
        if all(abs(math.log(tick / other)) >= span / 11 for other in kept):
            kept.append(tick)
    return sorted(kept)


def _size_axis(axes: Axes, sizes: list[int]) -> None:
    """A logarithmic size axis a little wider than the sizes, labelled with the sizes
    themselves where there are few, else by decades."""
    ticks = sorted(set(sizes))
    axes.set_xscale("log")
    axes.set_xlim(ticks[0] / 1.5, ticks[-1] * 1.5)
    axes.xaxis.set_minor_formatter(NullFormatter())
    if len(ticks) <= _MOST_SIZE_TICKS:
        axes.xaxis.set_minor_locator(NullLocator())
        axes.set_xticks(ticks, [f"{n:,}" for n in ticks])


def _bar(
    axes: Axes, comparison: Comparison | None, place: float, look: dict[str, object], along: bool
) -> list[float]:
    """One ratio with its interval, at ``place`` on the other axis; the values drawn."""
    if comparison is None or comparison.interval is None:
        return []
    ratio, low, high = comparison.interval
    error = [[max(0.0, ratio - low)], [max(0.0, high - ratio)]]
    if along:
        axes.errorbar([ratio], [place], xerr=error, capsize=2.5, linewidth=1.1, **look)  # type: ignore[arg-type]
    else:
        axes.errorbar([place], [ratio], yerr=error, capsize=2.5, linewidth=1.1, **look)  # type: ignore[arg-type]
    return [v for v in (ratio, low, high) if math.isfinite(v)]


def _looks(colour: str) -> tuple[dict[str, object], dict[str, object]]:
    kernel = {"color": colour, "marker": "o", "markersize": 6, "linestyle": "none"}
    end_to_end = {**kernel, "marker": "s", "markerfacecolor": "white", "markersize": 5}
    return kernel, end_to_end


def _handles(
    machine_colours: dict[Machine, str], base: str, threshold: float, meanings: list[Artist]
) -> list[Artist]:
    """The legend: each machine's colour, the base, what the marks mean, the band."""
    handles: list[Artist] = [
        Line2D([], [], color=colour, linewidth=2.5, label=short(machine.name, 48))
        for machine, colour in machine_colours.items()
    ]
    handles.append(Line2D([], [], color="0.3", linewidth=1.0, label=short(f"base: {base}", 48)))
    return [*handles, *meanings, Patch(facecolor=_BAND, label=f"within ±{threshold * 100:.3g}%")]


def _dots_meaning() -> list[Artist]:
    return [
        Line2D([], [], color="0.3", marker="o", linestyle="none", label="kernel time"),
        Line2D(
            [],
            [],
            color="0.3",
            marker="s",
            markerfacecolor="white",
            linestyle="none",
            label="end-to-end time",
        ),
    ]


def _lines_meaning() -> list[Artist]:
    return [
        Line2D([], [], color="0.3", linestyle=KERNEL, label="kernel time (band: 95% interval)"),
        Line2D([], [], color="0.3", linestyle=END_TO_END, label="end-to-end time"),
    ]


def _base_name(rows: Sequence[Row]) -> str:
    names = list(dict.fromkeys(row.base.name for row in rows if row.base is not None))
    return ", ".join(names) if names else "none"


def largest(rows: Sequence[Row]) -> list[Row]:
    """Per configuration, the row of the largest size that has a ratio, in row order."""
    found: dict[Line, Row] = {}
    for row in rows:
        if not _judged(row):
            continue
        line, held = _line(row.configuration), found.get(_line(row.configuration))
        if (
            held is None
            or _elements(row.configuration) * row.configuration.batch
            >= _elements(held.configuration) * held.configuration.batch
        ):
            found[line] = row
    return list(found.values())


def by_configuration(rows: Sequence[Row], threshold: float = DEFAULT_THRESHOLD) -> Figure:
    """``machines``: a row of ratios per configuration at its largest judged size."""
    shown = largest(rows)
    if not shown:
        raise ValueError("no configuration timed on the base machine and another: no ratio")
    machine_colours = colours(shown)
    height = max(3.0, _ROW_IN * len(shown) * max(1, len(machine_colours)) ** 0.5 + 1.6)
    figure = Figure(figsize=(10.5, height), layout="constrained")
    axes = figure.add_subplot(1, 1, 1)
    values: list[float] = []
    step = 0.5 / max(1, len(machine_colours))
    for place, row in enumerate(reversed(shown)):
        for slot, (machine, colour) in enumerate(machine_colours.items()):
            side = row.side(machine)
            if side is None:
                continue
            kernel, end_to_end = _looks(colour)
            offset = place + 0.25 - step * (slot + 0.5)
            values += _bar(axes, side.kernel, offset + step * 0.2, kernel, along=True)
            values += _bar(axes, side.end_to_end, offset - step * 0.2, end_to_end, along=True)
    names = [f"{line_name(r.configuration)} at {_size(r.configuration)}" for r in shown]
    axes.set_yticks(range(len(shown)), [short(name, 70) for name in reversed(names)], fontsize=8)
    axes.set_ylim(-0.6, len(shown) - 0.4)
    _ratio_axis(axes, values, threshold, vertical=True)
    axes.set_xlabel("machine / base: ratio of median times (below 1: faster than the base)")
    axes.grid(True, axis="x", alpha=0.4)
    suptitle(
        figure,
        "Machines side by side, each configuration at the largest size timed on both; "
        "bars: 95% bootstrap interval",
    )
    handles = _handles(machine_colours, _base_name(shown), threshold, _dots_meaning())
    outside_legend(figure, handles, height)
    return figure


def _panel(
    axes: Axes, series: list[Row], machine_colours: dict[Machine, str], threshold: float
) -> list[float]:
    values: list[float] = []
    series = sorted(series, key=lambda r: _elements(r.configuration))
    for machine, colour in machine_colours.items():
        for time, style in (("kernel", KERNEL), ("end-to-end", END_TO_END)):
            found = [
                (_elements(r.configuration), c.interval)
                for r in series
                for side in [r.side(machine)]
                if side is not None
                for c in [side.compared(time)]
                if c is not None and c.interval is not None
            ]
            if not found:
                continue
            xs = [x for x, _ in found]
            ratios = [i.ratio for _, i in found]
            axes.plot(xs, ratios, color=colour, linestyle=style, marker="o", markersize=3)
            if time == "kernel":
                lows, highs = [i.low for _, i in found], [i.high for _, i in found]
                axes.fill_between(xs, lows, highs, color=colour, alpha=0.18, linewidth=0)
                values += lows + highs
            values += ratios
    return values


def by_size(rows: Sequence[Row], threshold: float = DEFAULT_THRESHOLD) -> Figure:
    """``machines_by_size``: one panel per configuration, the ratios against size."""
    panels: dict[Line, list[Row]] = {}
    for row in rows:
        if _judged(row):
            panels.setdefault(_line(row.configuration), []).append(row)
    if not panels:
        raise ValueError("no configuration timed on the base machine and another: no ratio")
    every = len(panels)
    chosen = list(panels)[:MOST_PANELS]
    machine_colours = colours([row for line in chosen for row in panels[line]])
    columns = min(3, math.ceil(len(chosen) ** 0.5))
    count = -(-len(chosen) // columns)
    height = 2.6 * count + 1.2
    figure = Figure(figsize=(3.9 * columns + 2.6, height), layout="constrained")
    values: list[float] = []
    grid = [figure.add_subplot(count, columns, index + 1) for index in range(len(chosen))]
    for axes, line in zip(grid, chosen, strict=True):
        values += _panel(axes, panels[line], machine_colours, threshold)
        _size_axis(axes, [_elements(r.configuration) for r in panels[line]])
        axes.set_title(short(line_name(panels[line][0].configuration), 52), fontsize=8)
        axes.tick_params(labelsize=7)
        axes.grid(True, which="major", alpha=0.4)
        axes.set_xlabel(output_label([line[1]]), fontsize=7)
    for axes in grid:
        _ratio_axis(axes, values, threshold, vertical=False)
    grid[0].set_ylabel("machine / base, median time", fontsize=7)
    more = (
        f" (the first {len(chosen)} of {every}; all in machines.csv)" if every > len(chosen) else ""
    )
    suptitle(
        figure,
        f"Machines side by side against size{more}: kernel solid (band: 95% interval), "
        "end-to-end dotted",
    )
    handles = _handles(machine_colours, _base_name(rows), threshold, _lines_meaning())
    outside_legend(figure, handles, height)
    return figure


def figures(rows: Sequence[Row], threshold: float = DEFAULT_THRESHOLD) -> list[tuple[str, Figure]]:
    """The figures of ``rows`` with their file names: ``machines``, and
    ``machines_by_size`` where a configuration has ratios at more than one size."""
    if not any(_judged(row) for row in rows):
        return []
    found = [("machines", by_configuration(rows, threshold))]
    lines = [_line(row.configuration) for row in rows if _judged(row)]
    if len(lines) > len(set(lines)):
        found.append(("machines_by_size", by_size(rows, threshold)))
    return found
