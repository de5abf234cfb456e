"""Figures from results: runtime and GFLOP/s against size, per backend and all together.

Each figure is written as PNG and SVG. Only verified points ("ok") draw the
lines; a point whose result was wrong is drawn as a red cross, so a fast but
wrong kernel cannot pass for a fast one.

Results files may come from anywhere: their strings reach a figure only through
:func:`literal` (a ``$`` is a dollar sign, not mathtext), file names are fixed here,
and every file is written whole, never through a link (``safeio.atomic_write``).
"""

from __future__ import annotations

import io
import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from xbackend.safeio import atomic_write, output_folder, safe_name

Point = dict[str, Any]
# label, device, variant, tile, op, dtype, batch
LineKey = tuple[str, str, str, int | None, str, str, int]

FIGURES = ("runtime_by_backend", "runtime_all", "gflops")
_MARKERS = "osD^v<>ph*"


def _line_key(point: Point) -> LineKey:
    return (
        point["label"],
        point["device"],
        point["variant"],
        point.get("tile"),
        point.get("op", "mm"),
        point.get("dtype", "float32"),
        point.get("batch", 1),
    )


def literal(text: object) -> str:
    """``text`` as matplotlib should show it: as written, never as mathtext.

    Matplotlib reads a string with an even number of unescaped ``$`` as mathtext, so a
    label such as ``a$x^{`` next to a device ``b$y`` stops the drawing with a parse
    error. Escaped, every ``$`` is drawn as it is.
    """
    return str(text).replace("$", r"\$")


def _variant_name(key: LineKey) -> str:
    """The variant and tile, and the operation and dtype where they are not mm, float32."""
    _, _, variant, tile, op, dtype, batch = key
    name = f"{variant} T={tile}" if tile else variant
    if op != "mm":
        name = f"{op} {name}" + (f" ×{batch}" if op == "bmm" else "")
    return name if dtype == "float32" else f"{name} {dtype}"


def _lines(points: Iterable[Point]) -> dict[LineKey, list[Point]]:
    lines: dict[LineKey, list[Point]] = defaultdict(list)
    for point in points:
        if point.get("status") in ("ok", "mismatch") and point.get("kernel_s"):
            lines[_line_key(point)].append(point)
    for line in lines.values():
        line.sort(key=lambda p: (p["M"] * p["N"], p["K"]))
    return dict(sorted(lines.items(), key=lambda item: (item[0][0], item[0][2], item[0][3] or 0)))


def _outputs(point: Point) -> int:
    return int(point["M"]) * int(point["N"])


_LINESTYLES = ("-", "--", "-.", (0, (5, 1, 1, 1)))


def _styles(
    lines: dict[LineKey, list[Point]],
    colour_of: Callable[[LineKey], str],
    marker_of: Callable[[LineKey], str],
) -> dict[LineKey, dict[str, Any]]:
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


def _draw_time(
    axes: Axes, line: list[Point], label: str, style: dict[str, Any], end_to_end: bool
) -> None:
    good = [p for p in line if p["status"] == "ok"]
    x = [_outputs(p) for p in good]
    median = [p["kernel_s"]["median"] for p in good]
    (drawn,) = axes.plot(x, median, label=label, **style)
    axes.fill_between(
        x,
        [p["kernel_s"]["q1"] for p in good],
        [p["kernel_s"]["q3"] for p in good],
        color=drawn.get_color(),
        alpha=0.2,
        linewidth=0,
    )
    if end_to_end:
        axes.plot(
            x,
            [p["end_to_end_s"]["median"] for p in good],
            color=drawn.get_color(),
            linestyle=":",
            linewidth=1,
        )
    _draw_mismatches(axes, line, lambda p: p["kernel_s"]["median"])


def _draw_mismatches(axes: Axes, line: list[Point], value: Any) -> None:
    bad = [p for p in line if p["status"] == "mismatch"]
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


def _dtypes(points: list[Point]) -> str:
    return ", ".join(sorted({str(p.get("dtype", "float32")) for p in points}))


def _subtitle(points: list[Point]) -> str:
    return (
        f"{literal(_dtypes(points))}; median kernel time, band: quartiles; "
        "dotted: end-to-end with transfers"
    )


def _gflops(point: Point) -> float:
    """The point's GFLOP/s, from its median kernel time where older files lack it."""
    gflops = point.get("gflops")
    if isinstance(gflops, int | float) and not isinstance(gflops, bool):
        return float(gflops)
    median = float(point["kernel_s"]["median"])
    return float(point["flops"]) / median / 1e9 if median > 0 else math.nan


def draw(points: list[Point], folder: Path) -> list[Path]:
    """Write every figure for ``points`` into ``folder``; return the files written."""
    output_folder(folder)
    written: list[Path] = []
    for name, figure in figures(points):
        written += save(figure, folder, name)[0]
    return written


def figures(points: list[Point]) -> list[tuple[str, Figure]]:
    """Every figure for ``points``, with the file name (without suffix) it is saved as."""
    lines = _lines(points)
    if not lines:
        raise ValueError("no measured points to draw")
    drawn: list[tuple[str, Figure]] = []

    # One panel per backend (and device): naive against tiled, the assignment's figures.
    # Colours stand for variants here, the same in every panel.
    panels: dict[tuple[str, str], dict[LineKey, list[Point]]] = defaultdict(dict)
    for key, line in lines.items():
        panels[(key[0], key[1])][key] = line
    by_variant = _styles(
        lines,
        colour_of=lambda key: f"{key[2]} {key[4]} {key[5]}",
        marker_of=lambda key: str(key[3]),
    )
    columns = min(3, len(panels))
    rows = -(-len(panels) // columns)
    figure = Figure(figsize=(5.2 * columns, 4.2 * rows))
    for index, ((label, device), panel_lines) in enumerate(panels.items()):
        axes = figure.add_subplot(rows, columns, index + 1)
        for key, line in panel_lines.items():
            name = literal(_variant_name(key))
            _draw_time(axes, line, name, by_variant[key], end_to_end=True)
        axes.set_title(literal(f"{label}: {device}"), fontsize=9)
        _finish(axes, "time (s)")
    figure.suptitle(f"Naive against tiled, per backend\n{_subtitle(points)}", fontsize=10)
    drawn.append(("runtime_by_backend", figure))

    # Every backend and variant on one figure: colours stand for backends, markers
    # and line styles for variants and tiles.
    by_backend = _styles(lines, colour_of=lambda key: key[0], marker_of=_variant_name)
    figure = Figure(figsize=(8, 6))
    axes = figure.add_subplot(1, 1, 1)
    for key, line in lines.items():
        label = literal(f"{key[0]} {_variant_name(key)}")
        _draw_time(axes, line, label, by_backend[key], end_to_end=False)
    axes.set_title(f"All backends\n{literal(_dtypes(points))}; median kernel time", fontsize=10)
    _finish(axes, "time (s)")
    drawn.append(("runtime_all", figure))

    # Throughput.
    figure = Figure(figsize=(8, 6))
    axes = figure.add_subplot(1, 1, 1)
    for key, line in lines.items():
        good = [p for p in line if p["status"] == "ok"]
        axes.plot(
            [_outputs(p) for p in good],
            [_gflops(p) for p in good],
            label=literal(f"{key[0]} {_variant_name(key)}"),
            **by_backend[key],
        )
        _draw_mismatches(axes, line, _gflops)
    axes.set_title("Throughput from the median kernel time (2·M·N·K flops)", fontsize=10)
    _finish(axes, "GFLOP/s")
    drawn.append(("gflops", figure))
    return drawn
