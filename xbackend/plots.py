"""Figures from results: runtime and GFLOP/s against size, per backend and all together.

Each figure is written as PNG and SVG. Only verified points ("ok") draw the
lines; a point whose result was wrong is drawn as a red cross, so a fast but
wrong kernel cannot pass for a fast one.

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
from typing import Any, NamedTuple

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from xbackend.operations import DEFAULT
from xbackend.results import LineKey, PointRecord
from xbackend.safeio import atomic_write, output_folder, safe_name

FIGURES = ("runtime_by_backend", "runtime_all", "gflops")
_MARKERS = "osD^v<>ph*"


class Line(NamedTuple):
    """A line of a figure: one configuration at one batch (the batch changes the product)."""

    key: LineKey
    batch: int
    batched: bool


def _line_of(point: PointRecord) -> Line:
    return Line(point.line_key, point.batch, point.batched)


def literal(text: object) -> str:
    """``text`` as matplotlib should show it: as written, never as mathtext.

    Matplotlib reads a string with an even number of unescaped ``$`` as mathtext, so a
    label such as ``a$x^{`` next to a device ``b$y`` stops the drawing with a parse
    error. Escaped, every ``$`` is drawn as it is.
    """
    return str(text).replace("$", r"\$")


def _variant_name(line: Line) -> str:
    """The variant and tile, and the operation and dtype where they are not mm, float32."""
    key = line.key
    name = f"{key.variant} T={key.tile}" if key.tile else key.variant
    if key.op != DEFAULT:
        name = f"{key.op} {name}" + (f" ×{line.batch}" if line.batched else "")
    return name if key.dtype == "float32" else f"{name} {key.dtype}"


def _lines(points: Iterable[PointRecord]) -> dict[Line, list[PointRecord]]:
    lines: dict[Line, list[PointRecord]] = defaultdict(list)
    for point in points:
        if point.measured:
            lines[_line_of(point)].append(point)
    for line in lines.values():
        line.sort(key=lambda p: (p.M * p.N, p.K))
    return dict(
        sorted(
            lines.items(),
            key=lambda item: (item[0].key.label, item[0].key.variant, item[0].key.tile or 0),
        )
    )


def _outputs(point: PointRecord) -> int:
    return point.M * point.N


_LINESTYLES = ("-", "--", "-.", (0, (5, 1, 1, 1)))


def _styles(
    lines: dict[Line, list[PointRecord]],
    colour_of: Callable[[Line], str],
    marker_of: Callable[[Line], str],
) -> dict[Line, dict[str, Any]]:
    """Styles from parts of the line key, so one thing looks the same everywhere.

    ``colour_of`` picks the colour, ``marker_of`` the marker and line style.
    """
    colours = sorted({colour_of(key) for key in lines})
    markers = sorted({marker_of(key) for key in lines})
    styles = {}
    for key in lines:
        m = markers.index(marker_of(key))
        styles[key] = {
            "color": f"C{colours.index(colour_of(key)) % 10}",
            "marker": _MARKERS[m % len(_MARKERS)],
            "linestyle": _LINESTYLES[m % len(_LINESTYLES)],
            "markersize": 3,
        }
    return styles


def _kernel(point: PointRecord, stat: str) -> float:
    return (point.kernel_s or {})[stat]


def _draw_time(
    axes: Axes, line: list[PointRecord], label: str, style: dict[str, Any], end_to_end: bool
) -> None:
    good = [p for p in line if p.status == "ok"]
    x = [_outputs(p) for p in good]
    median = [_kernel(p, "median") for p in good]
    (drawn,) = axes.plot(x, median, label=label, **style)
    axes.fill_between(
        x,
        [_kernel(p, "q1") for p in good],
        [_kernel(p, "q3") for p in good],
        color=drawn.get_color(),
        alpha=0.2,
        linewidth=0,
    )
    if end_to_end:
        axes.plot(
            x,
            [(p.end_to_end_s or {})["median"] for p in good],
            color=drawn.get_color(),
            linestyle=":",
            linewidth=1,
        )
    _draw_mismatches(axes, line, lambda p: _kernel(p, "median"))


def _draw_mismatches(
    axes: Axes, line: list[PointRecord], value: Callable[[PointRecord], float]
) -> None:
    bad = [p for p in line if p.status == "mismatch"]
    if bad:
        axes.plot(
            [_outputs(p) for p in bad],
            [value(p) for p in bad],
            "x",
            color="red",
            markersize=9,
            markeredgewidth=2,
            label="wrong result",
        )


def _finish(axes: Axes, ylabel: str) -> None:
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("output elements M·N")
    axes.set_ylabel(ylabel)
    axes.grid(True, which="major", alpha=0.4)
    axes.grid(True, which="minor", alpha=0.1)
    handles, labels = axes.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    axes.legend(unique.values(), unique.keys(), fontsize=8)


def save(figure: Figure, folder: Path, name: str, dpi: int = 130) -> tuple[list[Path], bytes]:
    """Write ``figure`` as ``name``.png and .svg in ``folder``; return the paths and the PNG.

    ``name`` is the caller's, never a string from results; ``folder`` must exist.
    Each file is rendered in memory and replaces its target in one rename, so a
    symbolic link there is refused rather than written through.
    """
    if name != safe_name(name, limit=255):
        raise ValueError(f"{name!r} is not a safe file name")
    figure.tight_layout()
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


def _dtypes(points: list[PointRecord]) -> str:
    return ", ".join(sorted({p.dtype for p in points}))


def _subtitle(points: list[PointRecord]) -> str:
    return (
        f"{literal(_dtypes(points))}; median kernel time, band: quartiles; "
        "dotted: end-to-end with transfers"
    )


def _gflops(point: PointRecord) -> float:
    return math.nan if point.gflops is None else point.gflops


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


def draw(points: list[PointRecord], folder: Path) -> list[Path]:
    """Write every figure for ``points`` into ``folder``; return the files written."""
    return draw_figures(points, folder).written


def draw_figures(points: list[PointRecord], folder: Path, dpi: int = 130) -> Drawn:
    """Write every figure for ``points`` into ``folder``; say what was written."""
    output_folder(folder)
    written: list[Path] = []
    pngs: dict[str, tuple[Path, bytes]] = {}
    for name, figure in figures(points):
        paths, png = save(figure, folder, name, dpi)
        written += paths
        pngs[name] = (paths[0], png)
    return Drawn(list(points), pngs, written)


def figures(points: list[PointRecord]) -> list[tuple[str, Figure]]:
    """Every figure for ``points``, with the file name (without suffix) it is saved as."""
    lines = _lines(points)
    if not lines:
        raise ValueError("no measured points to draw")
    # Colours stand for backends, markers and line styles for variants and tiles.
    by_backend = _styles(lines, colour_of=lambda line: line.key.label, marker_of=_variant_name)
    return [
        ("runtime_by_backend", _by_backend(points, lines)),
        ("runtime_all", _runtime_all(points, lines, by_backend)),
        ("gflops", _throughput(lines, by_backend)),
    ]


def _by_backend(points: list[PointRecord], lines: dict[Line, list[PointRecord]]) -> Figure:
    """One panel per backend (and device): naive against tiled, the assignment's figures.

    Colours stand for variants here, the same in every panel.
    """
    panels: dict[tuple[str, str], dict[Line, list[PointRecord]]] = defaultdict(dict)
    for line, line_points in lines.items():
        panels[(line.key.label, line.key.device)][line] = line_points
    by_variant = _styles(
        lines,
        colour_of=lambda line: f"{line.key.variant} {line.key.op} {line.key.dtype}",
        marker_of=lambda line: str(line.key.tile),
    )
    columns = min(3, len(panels))
    rows = -(-len(panels) // columns)
    figure = Figure(figsize=(5.2 * columns, 4.2 * rows))
    for index, ((label, device), panel_lines) in enumerate(panels.items()):
        axes = figure.add_subplot(rows, columns, index + 1)
        for line, line_points in panel_lines.items():
            name = literal(_variant_name(line))
            _draw_time(axes, line_points, name, by_variant[line], end_to_end=True)
        axes.set_title(literal(f"{label}: {device}"), fontsize=9)
        _finish(axes, "time (s)")
    figure.suptitle(f"Naive against tiled, per backend\n{_subtitle(points)}", fontsize=10)
    return figure


def _runtime_all(
    points: list[PointRecord],
    lines: dict[Line, list[PointRecord]],
    styles: dict[Line, dict[str, Any]],
) -> Figure:
    """Every backend and variant on one figure."""
    figure = Figure(figsize=(8, 6))
    axes = figure.add_subplot(1, 1, 1)
    for line, line_points in lines.items():
        label = literal(f"{line.key.label} {_variant_name(line)}")
        _draw_time(axes, line_points, label, styles[line], end_to_end=False)
    axes.set_title(f"All backends\n{literal(_dtypes(points))}; median kernel time", fontsize=10)
    _finish(axes, "time (s)")
    return figure


def _throughput(lines: dict[Line, list[PointRecord]], styles: dict[Line, dict[str, Any]]) -> Figure:
    figure = Figure(figsize=(8, 6))
    axes = figure.add_subplot(1, 1, 1)
    for line, line_points in lines.items():
        good = [p for p in line_points if p.status == "ok"]
        axes.plot(
            [_outputs(p) for p in good],
            [_gflops(p) for p in good],
            label=literal(f"{line.key.label} {_variant_name(line)}"),
            **styles[line],
        )
        _draw_mismatches(axes, line_points, _gflops)
    axes.set_title("Throughput from the median kernel time (2·M·N·K flops)", fontsize=10)
    _finish(axes, "GFLOP/s")
    return figure
