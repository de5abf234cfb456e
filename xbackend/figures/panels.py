"""Figures of one value against size, a panel per (operation, batch, data type), a line per
backend and variant: what the launch overhead's and the energy's figures share.

A figure module says which points it shows and how a panel is drawn; ``by_panel`` groups
the points, ``panel_figure`` lays out the panels under a title, and ``line_entries`` gives
the legend's line per backend and variant (colour: variant, marker: backend, as in every
figure; dashed for the vendor's line where the figure draws it so).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from xbackend.figures.style import (
    Palette,
    kernel_style,
    literal,
    output_elements,
    output_label,
    panel_grid,
    series_name,
    short,
    variant_sort,
)
from xbackend.operations import operation
from xbackend.results import LineKey, PointRecord

Group = tuple[str, int, str]  # op, batch, dtype
Lines = dict[LineKey, list[PointRecord]]  # each line's points, by size


def size_of(point: PointRecord) -> int:
    """The x of every such figure: the output's elements."""
    return output_elements(point.op, point.M, point.K, point.N)


def _line_sort(item: tuple[LineKey, list[PointRecord]]) -> tuple[object, ...]:
    key, _ = item
    return (key.label, key.device, variant_sort(key.variant), key.tile or 0)


def by_panel(
    points: Iterable[PointRecord], shown: Callable[[PointRecord], bool]
) -> dict[Group, Lines]:
    """Per (operation, batch, data type), each line's ``shown`` points by size."""
    panels: dict[Group, Lines] = defaultdict(dict)
    for point in points:
        if shown(point):
            group = (point.op, point.batch, point.dtype)
            panels[group].setdefault(point.line_key, []).append(point)
    for lines in panels.values():
        for line in lines.values():
            line.sort(key=lambda p: (size_of(p), p.K))
    return {group: dict(sorted(panels[group].items(), key=_line_sort)) for group in sorted(panels)}


def panel_title(group: Group) -> str:
    op, batch, dtype = group
    try:
        name = operation(op).title(batch)
    except ValueError:
        name = op
    return short(f"{name}, {dtype}")


def panel_figure(
    panels: dict[Group, Lines], palette: Palette | None,
    draw: Callable[[Axes, Lines, Palette], None],
) -> tuple[Figure, Palette, list[PointRecord]]:  # fmt: skip
    """The panels laid out, each drawn by ``draw``; with the palette (made of the points
    drawn where none is given) and the points drawn."""
    drawn = [p for lines in panels.values() for line in lines.values() for p in line]
    if palette is None:
        palette = Palette((p.label, p.variant, p.tile) for p in drawn)
    figure, rows, columns = panel_grid(len(panels), (5.4, 3.8), (3.0, 1.0))
    for index, (group, lines) in enumerate(panels.items()):
        axes = figure.add_subplot(rows, columns, index + 1)
        draw(axes, lines, palette)
        axes.set_title(panel_title(group), fontsize=9)
        axes.set_xlabel(output_label([group[0]]))
    return figure, palette, drawn


def line_entries(keys: Iterable[LineKey], palette: Palette, styled: bool = False) -> list[Artist]:
    """The legend's line per backend and variant (``styled``: the vendor's dashed)."""
    entries: dict[str, Artist] = {}
    for key in keys:
        name = literal(f"{key.label} {series_name(key.variant, key.tile)}")
        style = kernel_style(key.variant) if styled else "-"
        entries.setdefault(
            name,
            Line2D([], [], color=palette.colour(key.variant, key.tile), linestyle=style,
                   marker=palette.marker(key.label), markersize=4, label=name),
        )  # fmt: skip
    return list(entries.values())
