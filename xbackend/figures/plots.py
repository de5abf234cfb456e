"""Figures from results: runtime and GFLOP/s against size, per backend and all together.

* ``runtime_by_backend``, the assignment's figure: one panel per backend (and per
  operation, batch and data type where the points have several), naive against tiled
  with the vendor's line as a dashed reference; kernel time solid with its quartile
  band, end-to-end time dotted;
* ``runtime_all``: the same lines of every backend on one axes per operation;
* ``gflops``: their throughput;
* ``ladder``: where the points have variants beyond naive, tiled and vendor, every
  variant's throughput, one panel per backend;
* ``roofline``: where the runs measured their devices' ceilings (``roofs``), every
  configuration's arithmetic intensity against its GFLOP/s under the measured roofs
  (``figures/roofline.py``);
* ``launch_overhead``: where the kernels timed themselves on the GPU's clock and the
  API's clock timed the same launches, what a launch costs beyond its kernel, per
  backend and variant (``figures/overhead.py``);
* ``energy``: where ``--energy`` read the device's energy counter, GFLOP per joule
  against size, per backend and variant (``figures/energy.py``).

Every figure of kernel times names the clock that timed them under its title
(``clocks.clock_note``): a span on the GPU's clock where the kernels have one, never
the API's time around them.

The look of each variant, tile, backend and meaning is fixed (``figures/style.py``):
one colour per variant in every panel and figure, legends outside the data. Points of
a single size (one x per line, the blog's latency runs) are drawn as bars
(``figures/bars.py``). Each figure is written as PNG and SVG. Only verified points
("ok") draw the lines; a point whose result was wrong is drawn as a red cross, so a
fast but wrong kernel cannot pass for a fast one. A point timed faster than its
device's peak (not ``trusted``: its timing is wrong; ``roofs.checked`` adds those above
the device's measured ceiling) or throttled is left out of every figure, and the legend
counts them; a noisy point is drawn hollow on its line. A figure of points timed in
another cache state than warm names it under its title.

Results files may come from anywhere: their strings reach a figure only through
:func:`literal` (a ``$`` is a dollar sign, not mathtext), file names are fixed here,
and every file is written whole, never through a link (``safeio.atomic_write``).
"""

from __future__ import annotations

import dataclasses
import io
import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from xbackend import families
from xbackend.analysis.clocks import has_overhead
from xbackend.analysis.roofs import Roofs, checked, profiled
from xbackend.analysis.tables import CORE_VARIANTS
from xbackend.figures import bars
from xbackend.figures.energy import NAME as ENERGY
from xbackend.figures.energy import energy_figure
from xbackend.figures.overhead import NAME as OVERHEAD
from xbackend.figures.overhead import overhead_figure
from xbackend.figures.roofline import roofline
from xbackend.figures.series import Line, Lines
from xbackend.figures.speedup import NAME as SPEEDUP
from xbackend.figures.speedup import speedup_figure
from xbackend.figures.style import (
    END_TO_END,
    WRONG_COLOUR,
    MinorLogLabels,
    Palette,
    hollow,
    kernel_style,
    literal,
    meaning_handles,
    noisy,
    output_elements,
    output_label,
    outside_legend,
    series_name,
    short,
    suptitle,
    throttled,
    title_width,
    trust_handles,
    variant_sort,
    with_cache_note,
    with_clock_note,
    without_controls,
)
from xbackend.operations import OPS, operation
from xbackend.results import PointRecord
from xbackend.safeio import atomic_write, output_folder, safe_name

__all__ = ["FIGURES", "Drawn", "draw", "draw_figures", "figures", "literal", "save"]

FIGURES = ("runtime_by_backend", "runtime_all", "gflops")  # "ladder", "roofline" where they are


Value = Callable[[PointRecord], float]


def _line_of(point: PointRecord) -> Line:
    return Line(point.line_key, point.batch, point.batched)


def x_of(point: PointRecord) -> int:
    """Where a point sits on the size axis: the elements of one product's output."""
    return output_elements(point.op, point.M, point.K, point.N)


def _lines(points: Iterable[PointRecord]) -> Lines:
    """The lines of ``points``, backend by backend in the order the points first name
    them (``report A B``: A's before B's), then by variant and tile."""
    lines: Lines = defaultdict(list)
    met: dict[tuple[str, str], int] = {}
    for point in points:
        # Measured, not faster than the device can be, and not throttled throughout.
        if point.trusted and not throttled(point):
            lines[_line_of(point)].append(point)
            met.setdefault((point.label, point.device), len(met))
    for line in lines.values():
        line.sort(key=lambda p: (x_of(p), p.K))
    return dict(
        sorted(
            lines.items(),
            key=lambda item: (
                met[(item[0].key.label, item[0].key.device)],
                variant_sort(item[0].key.variant),
                item[0].key.tile or 0,
            ),
        )
    )


def _kernel(point: PointRecord, stat: str = "median") -> float:
    return (point.kernel_s or {})[stat]


def _gflops(point: PointRecord) -> float:
    return math.nan if point.gflops is None else point.gflops


def _group_sort(group: tuple[str, int, str]) -> tuple[object, ...]:
    op, batch, dtype = group
    return (OPS.index(op) if op in OPS else len(OPS), op, batch, dtype)


def _group_title(group: tuple[str, int, str]) -> str:
    op, batch, dtype = group
    try:
        name = operation(op).title(batch)
    except ValueError:
        name = op
    return f"{name}, {dtype}"


@dataclasses.dataclass(frozen=True)
class Panels:
    """How a figure is cut into panels, what it draws in each, and how it names lines."""

    by_backend: bool  # a panel per backend, else every backend on one axes
    value: Value
    ylabel: str
    title: str
    band_and_end_to_end: bool = False
    left_out: tuple[PointRecord, ...] = ()  # the measured points no line draws


def _panels(lines: Lines, by_backend: bool) -> dict[tuple[object, ...], Lines]:
    """Lines per panel: per (operation, batch, data type), and per backend if asked."""
    panels: dict[tuple[object, ...], Lines] = defaultdict(dict)
    for line, points in lines.items():
        group = (line.key.op, line.batch, line.key.dtype)
        backend = (line.key.label, line.key.device) if by_backend else ()
        panels[(group, *backend)][line] = points
    # Backends keep the order of the lines (as the points met them): sorted stays stable.
    return dict(sorted(panels.items(), key=lambda item: _group_sort(item[0][0])))  # type: ignore[arg-type]


def _draw_line(
    axes: Axes, line: Line, points: list[PointRecord], style: Panels, palette: Palette
) -> None:
    good = [p for p in points if p.status == "ok"]
    x = [x_of(p) for p in good]
    key = line.key
    colour = palette.colour(key.variant, key.tile)
    y = [style.value(p) for p in good]
    axes.plot(
        x,
        y,
        color=colour,
        linestyle=kernel_style(key.variant),
        marker=palette.marker(key.label),
        markersize=3.5,
        linewidth=1.6,
        gid=f"kernel:{key.variant}",
        markevery=[index for index, point in enumerate(good) if not noisy(point)],
    )
    shaky = [(a, b) for a, b, point in zip(x, y, good, strict=True) if noisy(point)]
    hollow(axes, shaky, colour, palette.marker(key.label), f"noisy:{key.variant}")
    if style.band_and_end_to_end:
        axes.fill_between(
            x,
            [_kernel(p, "q1") for p in good],
            [_kernel(p, "q3") for p in good],
            color=colour,
            alpha=0.2,
            linewidth=0,
        )
        timed = [p for p in good if p.end_to_end_s]  # a profiled point has no end-to-end
        axes.plot(
            [x_of(p) for p in timed],
            [(p.end_to_end_s or {})["median"] for p in timed],
            color=colour,
            linestyle=END_TO_END,
            linewidth=1.2,
            gid=f"end_to_end:{key.variant}",
        )
    bad = [p for p in points if p.status == "mismatch"]
    if bad:
        axes.plot(
            [x_of(p) for p in bad],
            [style.value(p) for p in bad],
            linestyle="none",
            marker="x",
            color=WRONG_COLOUR,
            markersize=9,
            markeredgewidth=2,
            gid="wrong",
        )


def _series_names(lines: Lines, style: Panels, palette: Palette) -> dict[Line, str]:
    """The legend's name of each line. Where panels are per backend, the lines of one
    variant drawn alike (one colour) are one entry, named by the tiles they share
    ("naive" where one backend's has none, "tiled T=16/64" where backends differ)."""
    if not style.by_backend:
        return {line: f"{line.key.label} {series_name(line.key.variant, line.key.tile)}"
                for line in lines}  # fmt: skip
    alike: dict[tuple[str, str], set[int | None]] = defaultdict(set)
    for line in lines:
        alike[(line.key.variant, palette.colour(line.key.variant, line.key.tile))].add(
            line.key.tile
        )
    names = {}
    for line in lines:
        variant = line.key.variant
        tiles = alike[(variant, palette.colour(variant, line.key.tile))]
        if len(tiles) == 1 or None in tiles:
            tile = line.key.tile if len(tiles) == 1 else None
            names[line] = series_name(variant, tile)
        else:
            shown = "/".join(str(tile) for tile in sorted(t for t in tiles if t is not None))
            names[line] = series_name(variant, None).replace(variant, f"{variant} T={shown}", 1)
    return names


def _handles(lines: Lines, style: Panels, palette: Palette) -> list[Artist]:
    """The figure's legend: one entry per series drawn alike (backend too where panels
    mix them), then what the line styles and hollow markers mean, and what was left out."""
    entries: dict[str, Artist] = {}
    names = _series_names(lines, style, palette)
    for line in lines:
        key = line.key
        entries.setdefault(
            literal(names[line]),
            Line2D(
                [],
                [],
                color=palette.colour(key.variant, key.tile),
                linestyle=kernel_style(key.variant),
                marker=None if style.by_backend else palette.marker(key.label),
                markersize=4,
            ),
        )
    handles: list[Artist] = []
    for label, handle in entries.items():
        handle.set_label(label)
        handles.append(handle)
    handles += meaning_handles(style.band_and_end_to_end)
    drawn = [p for points in lines.values() for p in points if p.status == "ok"]
    handles += trust_handles(drawn, style.left_out)
    if any(p.status == "mismatch" for points in lines.values() for p in points):
        handles.append(
            Line2D(
                [],
                [],
                linestyle="none",
                marker="x",
                color=WRONG_COLOUR,
                markeredgewidth=2,
                label="wrong result",
            )
        )
    return handles


def _grid(lines: Lines, style: Panels, palette: Palette) -> Figure:
    """A figure of line panels (see :func:`_panels`), one legend right of them all."""
    panels = _panels(lines, style.by_backend)
    columns = min(3, len(panels))
    rows = -(-len(panels) // columns)
    height = 3.6 * rows + 0.8
    figure = Figure(figsize=(4.6 * columns + 2.6, height), layout="constrained")
    several_groups = len({key[0] for key in panels}) > 1
    for index, (panel_key, panel_lines) in enumerate(panels.items()):
        axes = figure.add_subplot(rows, columns, index + 1)
        for line, points in panel_lines.items():
            _draw_line(axes, line, points, style, palette)
        group = panel_key[0]
        title = [f"{panel_key[1]}: {panel_key[2]}"] if style.by_backend else []
        if several_groups or not style.by_backend:
            title.append(_group_title(group))  # type: ignore[arg-type]
        axes.set_title("\n".join(short(part) for part in title), fontsize=9)
        _finish(axes, style.ylabel, [line.key.op for line in panel_lines])
    drawn = [point for points in lines.values() for point in points]
    heading = with_cache_note(style.title, (point.cache for point in drawn))
    suptitle(figure, with_clock_note(heading, drawn, title_width(figure)))
    outside_legend(figure, _handles(lines, style, palette), height)
    return figure


def _finish(axes: Axes, ylabel: str, ops: list[str]) -> None:
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.xaxis.set_minor_formatter(MinorLogLabels())
    axes.set_xlabel(output_label(ops))
    axes.set_ylabel(ylabel)
    axes.grid(True, which="major", alpha=0.4)
    axes.grid(True, which="minor", alpha=0.1)


def save(figure: Figure, folder: Path, name: str, dpi: int = 130) -> tuple[list[Path], bytes]:
    """Write ``figure`` as ``name``.png and .svg in ``folder``; return the paths and the PNG.

    ``name`` is the caller's, never a string from results; ``folder`` must exist.
    Each file is rendered in memory and replaces its target in one rename, so a
    symbolic link there is refused rather than written through. A figure without a
    layout gets the constrained one (which makes room for titles and outside legends).
    """
    if name != safe_name(name, limit=255):
        raise ValueError(f"{name!r} is not a safe file name")
    without_controls(figure)
    if figure.get_layout_engine() is None:
        figure.set_layout_engine("constrained")
    paths = []
    png = b""
    for suffix in ("png", "svg"):
        buffer = io.BytesIO()
        figure.savefig(buffer, format=suffix, dpi=dpi)
        path = folder / f"{name}.{suffix}"
        atomic_write(path, buffer.getvalue())
        paths.append(path)
        if suffix == "png":
            png = buffer.getvalue()
    return paths, png


@dataclasses.dataclass(frozen=True)
class Drawn:
    """The figures of some points, written: so that a report can show them without
    drawing them again."""

    points: list[PointRecord]
    pngs: dict[str, tuple[Path, bytes]]  # figure name -> its PNG file and the bytes in it
    written: list[Path]

    def shows(self, points: list[PointRecord]) -> bool:
        """Whether these figures are of exactly ``points`` (the same records)."""
        return {id(point) for point in points} == {id(point) for point in self.points}


def draw(points: list[PointRecord], folder: Path, roofs: Roofs | None = None) -> list[Path]:
    """Write every figure for ``points`` into ``folder``; return the files written.
    ``roofs``: the ceilings their runs measured (``roofs.roofs``), for the roofline."""
    return draw_figures(points, folder, roofs=roofs).written


def draw_figures(
    points: list[PointRecord], folder: Path, dpi: int = 130, roofs: Roofs | None = None
) -> Drawn:
    """Write every figure for ``points`` into ``folder``; say what was written."""
    output_folder(folder)
    written: list[Path] = []
    pngs: dict[str, tuple[Path, bytes]] = {}
    for name, figure in figures(points, roofs):
        paths, png = save(figure, folder, name, dpi)
        written += paths
        pngs[name] = (paths[0], png)
    return Drawn(list(points), pngs, written)


_TIME = "median kernel time (s)"
_RATE = "GFLOP/s (2·M·N·K per product, median kernel time)"


def figures(points: list[PointRecord], roofs: Roofs | None = None) -> list[tuple[str, Figure]]:
    """Every figure for ``points``, with the file name (without suffix) it is saved as;
    the roofline where ``roofs`` (their runs' ceilings) has the roof of one of them."""
    points = checked(points, roofs or {})  # one rule: the device's measured ceilings too
    lines = _lines(points)
    if not lines:
        untrusted = sum(p.measured and not p.trusted for p in points)
        why = f" ({untrusted} timed above the device's peak, left out)" if untrusted else ""
        raise ValueError(f"no measured points to draw{why}")
    palette = Palette((line.key.label, line.key.variant, line.key.tile) for line in lines)
    roof = roofline(profiled(points), roofs, palette) if roofs else None
    out = tuple(p for p in points if p.measured and (not p.trusted or throttled(p)))
    found = _size_figures(lines, palette, out)
    if roof is not None:
        found.append(("roofline", roof))
    speedup = speedup_figure(points, palette)
    if speedup is not None:
        found.append((SPEEDUP, speedup))
    overhead = overhead_figure(points, palette) if has_overhead(points) else None
    if overhead is not None:
        found.append((OVERHEAD, overhead))
    energy = energy_figure(points, palette)  # where --energy read the device's counter
    return [*found, (ENERGY, energy)] if energy is not None else found


def _size_figures(
    lines: Lines, palette: Palette, out: tuple[PointRecord, ...]
) -> list[tuple[str, Figure]]:
    """The figures against size (bars where every line has one size); ``out``: the
    measured points left out of them, for the legend's count."""
    if all(len({x_of(p) for p in line}) == 1 for line in lines.values()):
        return bars.figures(lines, palette)
    # The assignment's lines, and a user's own kernels (--kernels) beside them; the shipped
    # rungs above tiled have the ladder figure.
    shipped = families.shipped_variants()
    core = {
        line: pts
        for line, pts in lines.items()
        if line.key.variant in CORE_VARIANTS or line.key.variant not in shipped
    }
    ladder = len(core) < len(lines)
    core = core or lines
    heading = "Naive against tiled" if ladder or len(core) > 1 else "Runtime"
    found = [
        (
            "runtime_by_backend",
            _grid(
                core,
                Panels(
                    True,
                    _kernel,
                    "time (s)",
                    f"{heading}, per backend: median kernel time, "
                    "band: quartiles; dotted: end-to-end with transfers",
                    True,
                    out,
                ),
                palette,
            ),
        ),
        (
            "runtime_all",
            _grid(
                core,
                Panels(False, _kernel, _TIME, f"{heading}: every backend", False, out),
                palette,
            ),
        ),
        (
            "gflops",
            _grid(
                core,
                Panels(False, _gflops, _RATE, "Throughput from the median kernel time", False, out),
                palette,
            ),
        ),
    ]
    if ladder:
        title = "The ladder: every variant's throughput, per backend"
        found.append(
            ("ladder", _grid(lines, Panels(True, _gflops, _RATE, title, False, out), palette))
        )
    return found
