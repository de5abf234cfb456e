"""The roofline: each configuration's arithmetic intensity against the rate it reached,
under the ceilings its device measured.

x is the arithmetic intensity in FLOP per byte (the flops over the operation's fewest bytes
moved, ``roofs.intensity``: there are no counters), y the GFLOP/s of the median kernel
time, both logarithmic. Each device (a backend's label) has its roof, in grey with a line
style of its own: the bandwidth's slope up to the ridge, then the compute ceiling's flat,
each labelled with its measured value (``backends/ceilings.py``, from the run header).
Each configuration's points have its variant's colour and its backend's marker
(``figures/style.py``), joined in order of size; its largest size is drawn larger, with
a dark edge. One panel per data type (each has a compute ceiling of its own); the legend
is right of the panels. Only verified, trusted points are drawn, none throttled (the
legend counts those left out); a noisy point is drawn hollow.

A device on which several backends ran (NumPy and OpenCL on one CPU) has one roof, the
highest ceilings its backends measured (``roofs.roofs``), labelled with their names.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Any, Literal

from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from xbackend.analysis.roofs import Roof, Roofs, intensity, roof_of
from xbackend.figures.style import (
    Palette,
    hollow,
    literal,
    noisy,
    outside_legend,
    panel_grid,
    series_name,
    short,
    suptitle,
    throttled,
    title_width,
    trust_handles,
    variant_sort,
    with_cache_note,
    with_clock_note,
)
from xbackend.measuring.timing import rate_text
from xbackend.results import LineKey, PointRecord

ROOF_COLOUR = "0.35"
RoofStyle = Literal["-", "--", "-.", ":"]
ROOF_STYLES: tuple[RoofStyle, ...] = ("-", "--", "-.", ":")
LARGEST_EDGE = "0.1"
_DTYPES = ("float32", "float64", "int32")
Configuration = tuple[LineKey, int]  # a line, at one batch


def _drawable(point: PointRecord) -> bool:
    return (
        point.status == "ok" and point.trusted and not throttled(point)
        and bool(point.gflops) and bool(intensity(point))
    )  # fmt: skip


def _panels(points: Iterable[PointRecord]) -> dict[str, dict[Configuration, list[PointRecord]]]:
    """Per data type, each configuration's drawable points from the smallest product."""
    panels: dict[str, dict[Configuration, list[PointRecord]]] = defaultdict(dict)
    for point in points:
        if _drawable(point):
            panels[point.dtype].setdefault((point.line_key, point.batch), []).append(point)
    for configurations in panels.values():
        for line in configurations.values():
            line.sort(key=lambda p: (p.flops, p.M, p.K, p.N))
    order = sorted(panels, key=lambda d: (_DTYPES.index(d) if d in _DTYPES else 9, d))
    return {dtype: dict(sorted(panels[dtype].items(), key=_config_sort)) for dtype in order}


def _config_sort(item: tuple[Configuration, list[PointRecord]]) -> tuple[object, ...]:
    (key, batch), _ = item
    return (key.label, key.op, batch, variant_sort(key.variant), key.tile or 0)


def _device_roofs(points: Iterable[PointRecord], roofs: Roofs) -> list[Roof]:
    """One roof per device of the points (``roofs.roofs`` gives every backend on a
    device, in every run on its host, the same one)."""
    found: dict[tuple[str, str, str], Roof] = {}
    for point in points:
        roof = roof_of(point, roofs)
        if roof is not None:
            found.setdefault((roof.label, roof.device, roof.host), roof)
    return [found[key] for key in sorted(found)]


def _draw_roof(
    axes: Axes, roof: Roof, dtype: str, span: tuple[float, float], style: RoofStyle, place: int
) -> None:
    """The roof over the x range ``span``: the slope to the ridge, then the flat, each
    labelled with its ceiling; ``place``, the roof's number in the panel, moves its labels
    along the lines so that those of roofs alike do not overlap."""
    low, high = span
    compute = roof.flops_per_s.get(dtype)
    bandwidth = roof.bytes_per_s
    if bandwidth is None and compute is None:
        return
    ridge = compute / bandwidth if compute and bandwidth else math.nan
    if compute is None or bandwidth is None:
        x = [low, high]
    else:
        x = [low, ridge, high] if low < ridge < high else [low, high]
    y = [min(compute or math.inf, value * (bandwidth or math.inf)) / 1e9 for value in x]
    axes.plot(
        x, y, color=ROOF_COLOUR, linestyle=style, linewidth=1.5, zorder=1,
        gid=f"roof:{roof.label}",
    )  # fmt: skip
    text: dict[str, Any] = {"fontsize": 7, "color": ROOF_COLOUR, "gid": f"roof_label:{roof.label}"}
    name = literal(roof.label)  # the legend names the device
    # The first roof's labels sit above its lines, the others' below them, one line
    # of text further each: roofs of alike devices (CUDA and OpenCL on one GPU) share
    # their lines, and their labels would overlap.
    below = -3 - 10 * (place - 1)
    if compute is not None:
        # At the flat's start, where the points of high intensity do not reach.
        start = ridge * 1.2 if low < ridge < high else low * 1.2
        offset, vertical = ((4, 3), "bottom") if place == 0 else ((4, below), "top")
        axes.annotate(
            f"{name}: {rate_text(compute, 'FLOP')}", (start, compute / 1e9), xytext=offset,
            textcoords="offset points", ha="left", va=vertical, **text,
        )  # fmt: skip
    # The bandwidths are in the legend ("cuda roof: 3.01 TB/s"): on the slopes their labels
    # crossed the lines and each other.


def _draw_configuration(
    axes: Axes, key: LineKey, points: list[PointRecord], palette: Palette
) -> None:
    colour, marker = palette.colour(key.variant, key.tile), palette.marker(key.label)
    x = [intensity(p) or math.nan for p in points]
    y = [p.gflops or math.nan for p in points]
    steady = [index for index, point in enumerate(points) if not noisy(point)]
    axes.plot(
        x, y, color=colour, marker=marker, markersize=3.5, linewidth=0.8, alpha=0.75,
        zorder=2, gid=f"points:{key.variant}", markevery=steady,
    )  # fmt: skip
    hollow(axes, [(a, b) for a, b, p in zip(x, y, points, strict=True) if noisy(p)],
           colour, marker, f"noisy:{key.variant}")  # fmt: skip
    # The largest size: large, with a dark edge; hollow in the line's colour where noisy.
    face, edge = ("none", colour) if noisy(points[-1]) else (colour, LARGEST_EDGE)
    axes.plot(
        x[-1:], y[-1:], linestyle="none", color=colour, marker=marker, markersize=9,
        markerfacecolor=face, markeredgecolor=edge, markeredgewidth=1.4, zorder=3,
        gid=f"largest:{key.variant}",
    )  # fmt: skip


def _span(
    configurations: dict[Configuration, list[PointRecord]], roofs: list[Roof], dtype: str
) -> tuple[float, float]:
    """The x range of a panel: its points', widened to show every ridge."""
    x = [intensity(p) or 1.0 for line in configurations.values() for p in line]
    for roof in roofs:
        compute = roof.flops_per_s.get(dtype)
        if compute and roof.bytes_per_s:
            x.append(compute / roof.bytes_per_s)
    return min(x) / 2, max(x) * 3


def _heights(
    configurations: dict[Configuration, list[PointRecord]], roofs: list[Roof], dtype: str
) -> tuple[float, float]:
    """The y range of a panel: its points' and its compute ceilings', with room; a slope
    with no ceiling above it leaves through the top."""
    y = [p.gflops or 1.0 for line in configurations.values() for p in line]
    y += [roof.flops_per_s[dtype] / 1e9 for roof in roofs if dtype in roof.flops_per_s]
    return min(y) / 2.5, max(y) * 2.5


Styles = dict[tuple[str, str], RoofStyle]  # (label, device) -> the line style of its roof


def _panel(
    axes: Axes,
    dtype: str,
    configurations: dict[Configuration, list[PointRecord]],
    roofs: Roofs,
    palette: Palette,
    styles: Styles,
) -> None:
    drawn = _device_roofs((p for line in configurations.values() for p in line), roofs)
    span = _span(configurations, drawn, dtype)
    for place, roof in enumerate(drawn):
        _draw_roof(axes, roof, dtype, span, styles[(roof.label, roof.device)], place)
    for (key, _), line in configurations.items():
        _draw_configuration(axes, key, line, palette)
    axes.set_xscale("log")
    axes.set_yscale("log")
    for axis in (axes.xaxis, axes.yaxis):
        axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        axis.set_minor_formatter(NullFormatter())
    axes.set_xlim(*span)
    axes.set_ylim(*_heights(configurations, drawn, dtype))
    axes.set_xlabel("arithmetic intensity (FLOP/byte: flops / fewest bytes moved)")
    axes.set_ylabel("GFLOP/s (median kernel time)")
    roofed = any(dtype in roof.flops_per_s for roof in drawn)
    axes.set_title(short(dtype if roofed else f"{dtype} (no compute ceiling)"), fontsize=9)
    axes.grid(True, which="major", alpha=0.4)
    axes.grid(True, which="minor", alpha=0.1)


def _handles(
    configurations: list[Configuration], devices: list[Roof], styles: Styles, palette: Palette
) -> list[Artist]:
    """Colours (variants), markers (backends), line styles (roofs), and the largest size."""
    # One entry per colour: a variant's tiles drawn alike ("naive" with and without a
    # tile, "tiled T=16/64" where backends differ) are one line of the legend.
    tiles: dict[tuple[str, str], set[int | None]] = defaultdict(set)
    for key, _ in configurations:
        tiles[(key.variant, palette.colour(key.variant, key.tile))].add(key.tile)
    variants: list[Artist] = []
    for (variant, colour), alike in tiles.items():
        numbers = sorted(tile for tile in alike if tile is not None)
        name = series_name(variant, numbers[0] if len(alike) == 1 and numbers else None)
        if len(numbers) > 1 and None not in alike:
            name = name.replace(variant, f"{variant} T={'/'.join(map(str, numbers))}", 1)
        variants.append(Line2D([], [], color=colour, label=literal(name)))
    backends: dict[str, Artist] = {}
    for key, _ in configurations:
        marker = palette.marker(key.label)
        label = literal(key.label)
        backends.setdefault(label, Line2D([], [], linestyle="none", color="0.4", marker=marker,
                                          label=label))  # fmt: skip
    roofs = []
    for roof in devices:
        name = f"{_roof_name(roof)} roof"
        if roof.bytes_per_s is not None:
            name += f": {rate_text(roof.bytes_per_s, 'B')}"
        style = styles[(roof.label, roof.device)]
        roofs.append(Line2D([], [], color=ROOF_COLOUR, linestyle=style, label=literal(name)))
    largest = Line2D([], [], linestyle="none", marker="o", markersize=8, markerfacecolor="0.6",
                     markeredgecolor=LARGEST_EDGE, label="largest size")  # fmt: skip
    return [*variants, *backends.values(), *roofs, largest]


def _roof_name(roof: Roof) -> str:
    """ "cpu, opencl (AMD EPYC)": the backends that share a roof, with their device
    where several do (one roof for them all)."""
    shared = ", " in roof.label and roof.device
    return f"{roof.label} ({roof.device})" if shared else roof.label


def roofline(
    points: list[PointRecord], roofs: Roofs, palette: Palette | None = None
) -> Figure | None:
    """The roofline of ``points`` under ``roofs`` (``roofs.roofs`` of their runs); None
    where no drawable point has a roof (runs that measured no ceilings)."""
    panels = _panels(points)
    drawable = [p for panel in panels.values() for line in panel.values() for p in line]
    devices = _device_roofs(drawable, roofs)
    if not devices:
        return None
    styles = {
        (roof.label, roof.device): ROOF_STYLES[index % len(ROOF_STYLES)]
        for index, roof in enumerate(devices)
    }
    if palette is None:
        palette = Palette((p.label, p.variant, p.tile) for p in drawable)
    figure, rows, columns = panel_grid(len(panels), (5.8, 4.6), (3.2, 0.8))
    for index, (dtype, configurations) in enumerate(panels.items()):
        axes = figure.add_subplot(rows, columns, index + 1)
        _panel(axes, dtype, configurations, roofs, palette, styles)
    title = "Roofline: every configuration under its device's measured ceilings"
    title = with_cache_note(title, (p.cache for p in drawable))
    suptitle(figure, with_clock_note(title, drawable, title_width(figure)))
    every = [config for panel in panels.values() for config in panel]
    handles = [*_handles(every, devices, styles, palette), *trust_handles(drawable, points)]
    outside_legend(figure, handles, figure.get_figheight())
    return figure
