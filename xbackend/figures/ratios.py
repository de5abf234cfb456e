"""The figure of ``xbackend diff``: B's time over A's against size, per configuration.

One panel per backend (label and device) and operation, batch and data type; in it,
one series per variant (and tile) in the variant's colour (``style.Palette``), each
point the ratio of medians B/A with its 95% bootstrap interval as an error bar. The
band of ±threshold around 1 is shaded: a point whose bar lies inside it is the SAME,
wholly above it SLOWER (marker ▲), wholly below it FASTER (▼), across a bound
UNCERTAIN (a hollow marker). Series of one size are spread a little along x so that
their bars do not hide each other. The legend stands right of the panels.

Beyond :data:`MOST_POINTS` points or :data:`MOST_PANELS` panels, no reader can see one
mark per point (and drawing 60,000 error bars took minutes and gigabytes): the figure is
then a summary, the share of points at or below each ratio (an empirical distribution),
one line per backend, with the band and each backend's verdicts counted in the legend.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import NullFormatter

from xbackend.analysis.diff import FASTER, SAME, SLOWER, UNCERTAIN, Comparison
from xbackend.figures.style import (
    Palette,
    cache_note,
    kernel_style,
    literal,
    output_elements,
    output_label,
    outside_legend,
    series_name,
    short,
    suptitle,
    variant_sort,
)
from xbackend.operations import OPS, operation

# How each verdict's point looks: its marker, and whether it is filled.
_MARKERS = {SAME: ("o", True), SLOWER: ("^", True), FASTER: ("v", True), UNCERTAIN: ("o", False)}
_BAND = "0.88"
_SPREAD = 1.06  # the x factor between two series of one size (the axis is logarithmic)
_MOST_TICKS = 6  # sizes labelled one by one; more: the axis's own decades
# Beyond these, the summary figure: one mark per point would be a blot, slow to draw.
MOST_POINTS = 1000
MOST_PANELS = 24
_MOST_LINES = 10  # backends drawn apart in the summary; the rest together
_STEPS = 200  # quantiles per line of the summary: more than the eye tells apart

Panel = tuple[str, str, str, int, str, str]  # label, device, op, batch, dtype, hosts


def _panel_of(comparison: Comparison) -> Panel:
    key = comparison.key
    return (key.label, key.device, key.op, key.batch, key.dtype, comparison.hosts)


def _panel_sort(panel: Panel) -> tuple[object, ...]:
    label, device, op, batch, dtype, hosts = panel
    return (label, device, OPS.index(op) if op in OPS else len(OPS), op, batch, dtype, hosts)


def _panel_title(panel: Panel) -> str:
    label, device, op, batch, dtype, hosts = panel
    try:
        name = operation(op).title(batch)
    except ValueError:
        name = op
    machine = short(f"{label}: {device}" if device else label)
    if hosts:
        machine += "\n" + short(f"hosts {hosts}")
    return f"{machine}\n{short(f'{name}, {dtype}')}"


def _draw_series(axes: Axes, series: list[Comparison], place: float, colour: str) -> None:
    """One configuration's ratios: a thin line through them and one error bar per point."""
    series = sorted(series, key=lambda c: output_elements(c.key.op, c.key.M, c.key.K, c.key.N))
    xs = [output_elements(c.key.op, c.key.M, c.key.K, c.key.N) * place for c in series]
    variant = series[0].key.variant
    ratios = [c.interval.ratio for c in series if c.interval is not None]
    axes.plot(xs, ratios, color=colour, linestyle=kernel_style(variant), linewidth=1, alpha=0.6)
    for x, comparison in zip(xs, series, strict=True):
        interval = comparison.interval
        if interval is None:
            continue
        marker, filled = _MARKERS.get(comparison.verdict, ("o", False))
        below = max(0.0, interval.ratio - interval.low)
        above = max(0.0, interval.high - interval.ratio)
        axes.errorbar(
            [x],
            [interval.ratio],
            yerr=[[below], [above]],
            color=colour,
            marker=marker,
            markersize=6,
            markerfacecolor=colour if filled else "white",
            capsize=3,
            linewidth=1.2,
            gid=f"ratio:{variant}:{comparison.verdict}",
        )


def _panel(
    axes: Axes, comparisons: list[Comparison], threshold: float, palette: Palette, ylabel: str
) -> None:
    axes.axhspan(1.0 - threshold, 1.0 + threshold, color=_BAND, linewidth=0, zorder=0)
    axes.axhline(1.0, color="0.45", linewidth=0.8, zorder=0.5)
    by_series: dict[tuple[str, int | None], list[Comparison]] = {}
    for comparison in comparisons:
        by_series.setdefault((comparison.key.variant, comparison.key.tile), []).append(comparison)
    order = sorted(by_series, key=lambda s: (variant_sort(s[0]), s[1] or 0))
    for slot, (variant, tile) in enumerate(order):
        place = _SPREAD ** (slot - (len(order) - 1) / 2)
        colour = palette.colour(variant, tile)
        _draw_series(axes, by_series[(variant, tile)], place, colour)
    _size_axis(axes, [output_elements(c.key.op, c.key.M, c.key.K, c.key.N) for c in comparisons])
    axes.set_xlabel(output_label([c.key.op for c in comparisons]))
    axes.set_ylabel(ylabel)
    _log_ratios(axes, comparisons, threshold)
    axes.grid(True, which="major", alpha=0.4)
    axes.grid(True, which="minor", alpha=0.1)


# The ratios a logarithmic axis is labelled at, those within the panel's range: halving
# and doubling lie as far from 1, and a narrow range still shows numbers.
_RATIO_TICKS = (0.1, 0.2, 0.33, 0.5, 0.67, 0.8, 0.9, 0.95, 0.98, 1.0, 1.02, 1.05, 1.1, 1.25,
                1.5, 2.0, 3.0, 5.0, 10.0)  # fmt: skip


def _spaced(ticks: list[float], low: float, high: float) -> list[float]:
    """Of ``ticks``, 1 and those at least a twelfth of the axis apart going out from it
    (0.95, 0.98, 1, 1.02, 1.05 on an axis from 0.8 to 4 would print over each other)."""
    gap = math.log(high / low) / 12
    kept = [1.0] if low <= 1.0 <= high else []
    for side in ([t for t in ticks if t > 1.0], [t for t in reversed(ticks) if t < 1.0]):
        last = 1.0
        for tick in side:
            if abs(math.log(tick / last)) >= gap:
                kept.append(tick)
                last = tick
    return sorted(kept)


def _log_ratios(axes: Axes, comparisons: list[Comparison], threshold: float) -> None:
    """A logarithmic ratio axis (2× and 0.5× as far from 1; one wide error bar flattens
    no other), spanning every interval and the band, labelled "1.05×"."""
    bounds = [1.0 - threshold, 1.0 + threshold]
    for comparison in comparisons:
        if comparison.interval is not None:
            bounds += [v for v in comparison.interval if np.isfinite(v) and v > 0]
    low, high = min(bounds) / 1.03, max(bounds) * 1.03
    axes.set_yscale("log")
    axes.set_ylim(low, high)
    ticks = _spaced([t for t in _RATIO_TICKS if low <= t <= high], low, high)
    if len(ticks) < 3:  # past 10× either way, or between two of the ladder's steps
        ticks = sorted({low * 1.03, 1.0, high / 1.03})
    axes.set_yticks(ticks, [f"{t:.3g}×" for t in ticks])
    axes.yaxis.set_minor_formatter(NullFormatter())


def _size_axis(axes: Axes, sizes: list[int]) -> None:
    """A logarithmic size axis, a little wider than the sizes (and the series spread over
    them); labelled with the sizes themselves where there are few, else by decades."""
    ticks = sorted(set(sizes))
    axes.set_xscale("log")
    axes.set_xlim(ticks[0] / 1.3, ticks[-1] * 1.3)
    axes.xaxis.set_minor_formatter(NullFormatter())
    if len(ticks) <= _MOST_TICKS:
        axes.set_xticks(ticks, [f"{n:,}" for n in ticks])


def _handles(comparisons: list[Comparison], palette: Palette, threshold: float) -> list[Artist]:
    series = sorted(
        {(c.key.variant, c.key.tile) for c in comparisons},
        key=lambda s: (variant_sort(s[0]), s[1] or 0),
    )
    handles: list[Artist] = [
        Line2D(
            [],
            [],
            color=palette.colour(variant, tile),
            linestyle=kernel_style(variant),
            label=literal(series_name(variant, tile)),
        )
        for variant, tile in series
    ]
    shown = {c.verdict for c in comparisons}
    for verdict, (marker, filled) in _MARKERS.items():
        if verdict in shown:
            face = "0.3" if filled else "white"
            handles.append(
                Line2D(
                    [],
                    [],
                    linestyle="none",
                    marker=marker,
                    color="0.3",
                    markerfacecolor=face,
                    label=verdict.lower(),
                )
            )
    handles.append(Patch(facecolor=_BAND, label=f"within ±{threshold * 100:.3g}%"))
    return handles


def _cache_line(comparisons: list[Comparison]) -> str:
    """The title's line on the cache modes: where they differ, A's and B's."""
    a_modes = sorted({c.a.cache or "warm" for c in comparisons if c.a is not None})
    b_modes = sorted({c.b.cache or "warm" for c in comparisons if c.b is not None})
    if a_modes == b_modes:
        note = cache_note(a_modes)
        return f"\n{literal(note)}" if note else ""
    a_text, b_text = "/".join(a_modes), "/".join(b_modes)
    return "\n" + literal(f"cache: {a_text} in A, {b_text} in B")


def ratio_figure(
    comparisons: Sequence[Comparison],
    threshold: float,
    *,
    time: str = "kernel",
    names: tuple[str, str] = ("A", "B"),
) -> Figure:
    """The ratios B/A of every point that has a verdict, one panel per backend and product
    (beyond :data:`MOST_POINTS` points or :data:`MOST_PANELS` panels, the summary of
    :func:`summary_figure`).

    ``names``: how the title names A and B. Where the points were not all timed with a
    warm cache, or A's and B's cache modes differ, a line under the title says so.
    """
    judged = [c for c in comparisons if c.interval is not None]
    if not judged:
        raise ValueError("no point measured in both runs: nothing to draw")
    panels: dict[Panel, list[Comparison]] = {}
    for comparison in judged:
        panels.setdefault(_panel_of(comparison), []).append(comparison)
    if len(judged) > MOST_POINTS or len(panels) > MOST_PANELS:
        return summary_figure(judged, threshold, time=time, names=names)
    columns = min(3, len(panels))
    rows = -(-len(panels) // columns)
    height = 3.6 * rows + 1.0
    figure = Figure(figsize=(4.8 * columns + 2.4, height), layout="constrained")
    palette = Palette((c.key.label, c.key.variant, c.key.tile) for c in judged)
    ylabel = f"B / A, median {time} time"
    for index, panel in enumerate(sorted(panels, key=_panel_sort)):
        axes = figure.add_subplot(rows, columns, index + 1)
        _panel(axes, panels[panel], threshold, palette, ylabel)
        axes.set_title(_panel_title(panel), fontsize=9)
    title = (
        f"B ({short(names[1], 40)}) against A ({short(names[0], 40)}): ratio of median "
        f"{time} times, bars: 95% bootstrap interval"
    )
    suptitle(figure, title + _cache_line(judged))
    outside_legend(figure, _handles(judged, palette, threshold), height)
    return figure


# -- the summary of many points ----------------------------------------------------------------


def _backends(judged: Sequence[Comparison]) -> list[tuple[str, list[Comparison]]]:
    """The summary's lines: the points of each backend (label, device and hosts), the
    largest first, those beyond :data:`_MOST_LINES` together as one."""
    by: dict[str, list[Comparison]] = {}
    for c in judged:
        name = f"{c.key.label}: {c.key.device}" if c.key.device else c.key.label
        by.setdefault(f"{name} (hosts {c.hosts})" if c.hosts else name, []).append(c)
    order = sorted(by.items(), key=lambda item: (-len(item[1]), item[0]))
    if len(order) <= _MOST_LINES:
        return order
    kept, rest = order[: _MOST_LINES - 1], order[_MOST_LINES - 1 :]
    merged = [c for _, group in rest for c in group]
    return [*kept, (f"{len(rest)} other backends", merged)]


def _share_line(axes: Axes, group: list[Comparison], name: str, colour: str) -> None:
    """One backend's ratios as the share of its points at or below each ratio, drawn
    through at most :data:`_STEPS` of their quantiles (what the eye can tell apart)."""
    ratios = np.array([c.interval.ratio for c in group if c.interval is not None])
    ratios = np.sort(ratios[np.isfinite(ratios) & (ratios > 0)])
    if ratios.size == 0:
        return
    shares = np.linspace(1.0 / ratios.size, 1.0, min(ratios.size, _STEPS))
    xs = np.quantile(ratios, shares, method="inverted_cdf")
    axes.step(
        [xs[0], *xs], [0.0, *shares], where="post", color=colour, linewidth=1.4,
        label=literal(name), gid=f"share:{name}",
    )  # fmt: skip


# The verdicts' bars in the summary: colour, and the order they are stacked in.
_VERDICT_BARS = ((FASTER, "#2ca02c"), (SAME, "0.7"), (UNCERTAIN, "white"), (SLOWER, "#d62728"))


def _verdict_bars(axes: Axes, lines: list[tuple[str, list[Comparison]]]) -> None:
    """How many of each backend's points got each verdict, one stacked bar a backend."""
    left = np.zeros(len(lines))
    for verdict, colour in _VERDICT_BARS:
        counted = np.array([sum(c.verdict == verdict for c in group) for _, group in lines])
        axes.barh(
            range(len(lines)), counted, left=left, color=colour, edgecolor="0.3",
            linewidth=0.6, label=verdict.lower(),
        )  # fmt: skip
        left += counted
    axes.set_yticks(range(len(lines)), [short(name, 32) for name, _ in lines], fontsize=8)
    axes.invert_yaxis()
    axes.set_xlabel("points")
    axes.set_title("verdicts", fontsize=9)


def _ratio_axis(axes: Axes, judged: Sequence[Comparison], threshold: float) -> None:
    """The summary's ratio axis: logarithmic where the ratios span a factor of 4 or
    more, else linear (a narrow logarithmic axis shows no number at all)."""
    ratios = [c.interval.ratio for c in judged if c.interval is not None and c.interval.ratio > 0]
    low = min([*ratios, 1.0 - threshold])
    high = max([*ratios, 1.0 + threshold])
    if np.isfinite(high) and high / low >= 4:
        axes.set_xscale("log")
        axes.xaxis.set_minor_formatter(NullFormatter())


def summary_figure(
    judged: Sequence[Comparison],
    threshold: float,
    *,
    time: str = "kernel",
    names: tuple[str, str] = ("A", "B"),
) -> Figure:
    """Many points at once: for each backend, the share of its points whose ratio B/A is
    at or below each value (one line, of at most :data:`_STEPS` steps, whatever the
    number of points), with the band of ±threshold shaded; beside it, each backend's
    verdicts counted. Its size and the time it takes to draw do not grow with the
    number of points."""
    figure = Figure(figsize=(12.0, 5.4), layout="constrained")
    axes, bars = figure.subplots(1, 2, width_ratios=(3, 1))
    axes.axvspan(1.0 - threshold, 1.0 + threshold, color=_BAND, linewidth=0, zorder=0)
    axes.axvline(1.0, color="0.45", linewidth=0.8, zorder=0.5)
    lines = _backends(judged)
    for index, (name, group) in enumerate(lines):
        _share_line(axes, group, name, f"C{index % 10}")
    _ratio_axis(axes, judged, threshold)
    axes.set_xlabel(f"B / A, median {time} time")
    axes.set_ylabel("share of points at or below")
    axes.set_ylim(0.0, 1.02)
    axes.grid(True, which="major", alpha=0.4)
    _verdict_bars(bars, lines)
    title = (
        f"B ({short(names[1], 40)}) against A ({short(names[0], 40)}): {len(judged):,} points, "
        f"too many to draw one by one;\nthe share of each backend's points at each ratio of "
        f"median {time} times (band: within ±{threshold * 100:.3g}%)"
    )
    suptitle(figure, title + _cache_line(list(judged)))
    handles: list[Artist] = [
        line for line in axes.get_lines() if str(line.get_gid()).startswith("share:")
    ]
    handles.append(Patch(facecolor=_BAND, label=f"within ±{threshold * 100:.3g}%"))
    handles += bars.get_legend_handles_labels()[0]
    outside_legend(figure, handles, 5.4)
    return figure
