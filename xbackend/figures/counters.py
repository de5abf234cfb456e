"""The figures of ``xbackend profile``: what the kernels load and move, from Nsight Compute.

For each size (and operation and element type), one figure of the chapter's variants
(naive, tiled, vendor: ``counters_…``) and one of the ladder's rungs (``ladder_counters_…``)
where they were profiled. Four panels: global load requests, L2 sectors read, DRAM bytes
(read, and written hatched) and the kernel time, one bar per variant and tile, coloured as
in every figure (``style``: the variant's colour, lighter for a smaller tile). Each bar is
labelled with its value, and a bar of global load requests, where the naive kernel of the
same size was profiled, with how many times fewer it made (``÷16`` for tiled at 16×16: the
fall of the loads is the tile size).
An axis is logarithmic where its values span more than 30×.
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import EngFormatter

from xbackend.analysis.tables import CORE_VARIANTS
from xbackend.figures.style import (
    Palette,
    literal,
    outside_legend,
    series_name,
    short,
    suptitle,
    variant_sort,
    with_cache_note,
)
from xbackend.operations import operation
from xbackend.profiling.metrics import (
    DRAM_READ,
    DRAM_WRITE,
    DURATION,
    L2_SECTORS,
    LOAD_REQUESTS,
    Counter,
    fall,
    scaled,
    value,
)
from xbackend.results import PointRecord
from xbackend.safeio import safe_name

PANELS = (LOAD_REQUESTS, L2_SECTORS, DRAM_READ, DURATION)
_LOG_ABOVE = 30.0  # a panel whose values span more than this gets a log axis
Group = tuple[str, str, int, int, int, int]  # op, dtype, batch, M, K, N


def profiled(points: Sequence[PointRecord]) -> list[PointRecord]:
    """The points with counters to draw: those that ran (a wrong result too)."""
    return [p for p in points if p.counters and p.status in ("ok", "mismatch")]


def figures(points: Sequence[PointRecord]) -> list[tuple[str, Figure]]:
    """Every counters figure of ``points``, each with the file name it is saved under."""
    drawn = profiled(points)
    palette = Palette((p.label, p.variant, p.tile) for p in drawn)
    groups: dict[Group, list[PointRecord]] = {}
    for point in drawn:
        key = (point.op, point.dtype, point.batch, point.M, point.K, point.N)
        groups.setdefault(key, []).append(point)
    found = []
    for group, part in sorted(groups.items()):
        name = safe_name(f"{group[0]}_{group[1]}_{group[3]}x{group[4]}x{group[5]}", limit=80)
        core = [p for p in part if p.variant in CORE_VARIANTS]
        rungs = [p for p in part if p.variant not in CORE_VARIANTS]
        if core:
            title = f"Naive against tiled: loads and traffic, {_group_title(group)}"
            found.append((f"counters_{name}", figure(core, palette, title)))
        if rungs:
            title = f"The ladder: loads and traffic per rung, {_group_title(group)}"
            found.append((f"ladder_counters_{name}", figure(rungs, palette, title)))
    return found


def _group_title(group: Group) -> str:
    op, dtype, batch, M, K, N = group
    try:
        name = operation(op).title(batch)
    except ValueError:
        name = op
    return short(f"{name} {M}×{K}·{K}×{N}, {dtype}", 80)


def _sort(point: PointRecord) -> tuple[object, ...]:
    return (variant_sort(point.variant), point.tile or 0, point.label)


def figure(points: Sequence[PointRecord], palette: Palette, title: str) -> Figure:
    """One figure: a panel per counter of :data:`PANELS`, a bar per point."""
    ordered = sorted(points, key=_sort)
    labels = {p.label for p in ordered}
    names = [
        series_name(p.variant, p.tile) if len(labels) == 1 else f"{p.label} {p.variant}"
        for p in ordered
    ]
    panel_width = max(3.2, 0.55 * len(ordered) + 1.4)
    figure = Figure(figsize=(2 * panel_width + 2.4, 7.6), layout="constrained")
    for index, counter in enumerate(PANELS):
        axes = figure.add_subplot(2, 2, index + 1)
        _panel(axes, ordered, counter, palette, points)
        axes.set_xticks(range(len(ordered)), [literal(n) for n in names], rotation=30, ha="right")
    handles: list[Artist] = [
        Patch(facecolor=palette.colour(p.variant, p.tile), label=literal(name))
        for p, name in zip(ordered, names, strict=True)
    ]
    handles.append(Patch(facecolor="white", edgecolor="0.3", hatch="///", label="DRAM written"))
    source = "Nsight Compute, one run per point"
    suptitle(figure, with_cache_note(f"{title}\n{source}", (p.cache for p in ordered)))
    outside_legend(figure, handles, 7.6)
    return figure


def _panel(
    axes: Axes,
    ordered: Sequence[PointRecord],
    counter: Counter,
    palette: Palette,
    everyone: Sequence[PointRecord],
) -> None:
    """One counter's bars, each labelled with its value and its fall against naive."""
    written = counter == DRAM_READ
    width = 0.4 if written else 0.7
    shown: list[float] = []
    for x, point in enumerate(ordered):
        number = value(point, counter)
        colour = palette.colour(point.variant, point.tile)
        place = x - width / 2 if written else x
        if number is not None and number > 0:
            axes.bar(place, number, width, color=colour, edgecolor="white", linewidth=0.5,
                     gid=f"bar:{counter.column}:{point.variant}")  # fmt: skip
            shown.append(number)
            # The fall of the loads against naive: the tile size, for tiled.
            ratio = fall(point, everyone, counter) if counter == LOAD_REQUESTS else None
            text = scaled(number, counter.unit) + (f"\n÷{ratio:.3g}" if ratio else "")
            axes.annotate(text, (place, number), xytext=(0, 2), textcoords="offset points",
                          ha="center", va="bottom", fontsize=6.5)  # fmt: skip
        if written:
            more = value(point, DRAM_WRITE)
            if more is not None and more > 0:
                axes.bar(x + width / 2, more, width, color="white", edgecolor=colour,
                         hatch="///", linewidth=0.8, gid=f"bar:{DRAM_WRITE.column}")  # fmt: skip
                shown.append(more)
    _finish(axes, shown, counter, len(ordered))


def _finish(axes: Axes, shown: list[float], counter: Counter, bars: int) -> None:
    unit = {"s": "seconds", "B": "bytes", "%": "percent"}.get(counter.unit, "count")
    title = "DRAM bytes read (and written, hatched)" if counter == DRAM_READ else counter.title
    axes.set_title(f"{title} ({unit})", fontsize=9)
    if shown and max(shown) > _LOG_ABOVE * min(shown):
        axes.set_yscale("log")
        axes.set_ylim(min(shown) / 3, max(shown) * 12)  # room for the labels above the bars
    elif shown:
        axes.set_ylim(0, max(shown) * 1.3)
    if counter.unit != "%":
        axes.yaxis.set_major_formatter(EngFormatter(unit=counter.unit, places=None))
    axes.grid(True, axis="y", which="major", alpha=0.4)
    axes.set_xlim(-0.6, max(bars, 1) - 0.4)
