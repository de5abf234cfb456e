"""The report's sections, one per experiment: the figures and tables its document asks for.

* assignment: naive against optimized per backend over the growing non-square sizes;
* lab: naive against tiled over square powers of two, and the speed-up of tiling;
* chapter: the reduced product (rmm), a table of kernel times per size and configuration;
* blog: latency at one size per data type, for mm and bmm, as tables and grouped bars;
* other: whatever fits none of them, drawn as ``compare`` draws it.

Points timed faster than their device's peak (not ``trusted``) are in the tables, flagged,
but in no figure and no speed-up; a figure names the cache mode where it is not warm.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import Any

from matplotlib.artist import Artist
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from xbackend.figures.plots import literal
from xbackend.figures.style import Palette, outside_legend, with_cache_note
from xbackend.report.document import Block, Cell, Heading, Paragraph, Table
from xbackend.report.figures import (
    WRONG,
    FigureFolder,
    Section,
    cross,
    file_name,
    generic_figures,
    legend,
    save,
    size_axis,
    style,
    unique_names,
)
from xbackend.report.points import (
    ambiguous_labels,
    dtype_sort,
    group,
    line_names,
    median,
    op_sort,
    size_text,
    three_digits,
    time_cell,
)
from xbackend.report.sizes import size_table_blocks
from xbackend.results import LineKey, PointRecord


def _assignment(points: list[PointRecord], folder: FigureFolder) -> Section:
    intro = Paragraph(
        "A is (16·i)×(14·i) and B is (14·i)×(16·i): each backend's naive kernel against its "
        "optimized ones (tiled in shared/local memory; NumPy's BLAS on the CPU), kernel time "
        "against the number of output elements, log-log."
    )
    blocks, written = generic_figures(points, folder)
    table, files = size_table_blocks(points, folder.roofs, folder)
    return [intro, *blocks, *table], [*written, *files]


SpeedUpKey = tuple[str, str, int | None, str]  # label, device, tile of the tiled kernel, dtype


@dataclasses.dataclass(frozen=True)
class SpeedUp:
    """Naive median kernel time over tiled median kernel time, at one size."""

    key: SpeedUpKey
    M: int
    K: int
    N: int
    ratio: float
    wrong: bool  # either time comes from a wrong result


def speedups(points: list[PointRecord]) -> list[SpeedUp]:
    """Tiled against naive on the same backend, device, data type and size, for plain
    products (neither batched nor reduced: mm).

    Each tiled tile size is paired with the naive kernel of the same tile (the
    same work-group shape), else with the naive kernel that takes no tile, else
    with the only naive kernel measured there.
    """
    result = []
    products = [
        p for p in points if p.operation is not None and not (p.batched or p.operation.reduced)
    ]
    same = group(products, lambda p: (p.label, p.device, p.dtype, p.M, p.K, p.N))
    for (label, device, dtype, M, K, N), part in same.items():
        naive = {p.tile: p for p in part if p.variant == "naive" and p.trusted}
        for tiled in part:
            if tiled.variant != "tiled" or not tiled.trusted:
                continue
            partner = naive.get(tiled.tile) or naive.get(None)
            if partner is None and len(naive) == 1:
                partner = next(iter(naive.values()))
            if partner is None or median(tiled) <= 0:
                continue
            wrong = "mismatch" in (partner.status, tiled.status)
            ratio = median(partner) / median(tiled)
            result.append(SpeedUp((label, device, tiled.tile, dtype), M, K, N, ratio, wrong))
    return sorted(result, key=lambda s: (_speedup_sort(s.key), s.N, s.M, s.K))


def _speedup_sort(key: SpeedUpKey) -> tuple[Any, ...]:
    label, device, tile, dtype = key
    return (label, device, tile or 0, dtype_sort(dtype))


def _speedup_names(keys: Iterable[SpeedUpKey]) -> dict[SpeedUpKey, str]:
    keys = sorted(set(keys), key=_speedup_sort)
    ambiguous = ambiguous_labels(keys)
    several_dtypes = len({key[3] for key in keys}) > 1
    names = {}
    for label, device, tile, dtype in keys:
        name = f"{label} ({device})" if label in ambiguous else label
        name += f" T={tile}" if tile else ""
        name += f" {dtype}" if several_dtypes else ""
        names[(label, device, tile, dtype)] = name
    return names


def _speedup_row_name(M: int, K: int, N: int) -> str:
    return str(N) if M == K == N else f"{M}×{K}·{K}×{N}"


def _lab(points: list[PointRecord], folder: FigureFolder) -> Section:
    blocks: list[Block] = [
        Paragraph(
            "Square products N×N·N×N, N a power of two: the naive global-memory kernel "
            "against the tiled shared/local-memory kernel on each backend."
        )
    ]
    figures, written = generic_figures(points, folder)
    blocks += figures
    found = speedups(points)
    if not found:
        blocks.append(Paragraph("No size has both a naive and a tiled time: no speed-up."))
        return blocks, written
    names = _speedup_names(s.key for s in found)
    image, paths = save(
        _speedup_figure(found, names, (p.cache for p in points if p.trusted)),
        folder,
        "speedup",
        "Speed-up of the tiled kernel over the naive one (above 1: tiling wins).",
    )
    written += paths
    blocks.append(image)
    blocks.append(
        Paragraph(
            "Speed-up = naive median kernel time / tiled median kernel time "
            "(same backend, device, data type and size; T is the tiled kernel's tile)."
        )
    )
    blocks.append(_speedup_table(found, names))
    return blocks, written


def _speedup_figure(
    found: list[SpeedUp], names: dict[SpeedUpKey, str], modes: Iterable[str]
) -> Figure:
    figure = Figure(figsize=(8, 5), layout="constrained")
    axes = figure.add_subplot(1, 1, 1)
    palette = Palette((key[0], "tiled", key[2]) for key in names)
    for key, name in names.items():
        line = [s for s in found if s.key == key]
        good = [s for s in line if not s.wrong]
        look = style(palette, key[0], "tiled", key[2])
        axes.plot([s.N for s in good], [s.ratio for s in good], label=literal(name), **look)
        bad = [s for s in line if s.wrong]
        cross(axes, [s.N for s in bad], [s.ratio for s in bad])
    axes.axhline(1.0, color="grey", linewidth=1)
    size_axis(axes, [s.N for s in found])
    axes.set_xlabel("N")
    axes.set_ylabel("speed-up (naive time / tiled time)")
    title = with_cache_note("Speed-up of tiling, from median kernel times", modes)
    axes.set_title(title, fontsize=10)
    axes.grid(True, alpha=0.3)
    legend(figure, axes)
    return figure


def _speedup_table(found: list[SpeedUp], names: dict[SpeedUpKey, str]) -> Table:
    sizes = sorted({(s.M, s.K, s.N) for s in found}, key=lambda size: (size[2], size))
    by_cell = {(s.key, s.M, s.K, s.N): s for s in found}
    rows = []
    for M, K, N in sizes:
        row = [Cell(_speedup_row_name(M, K, N))]
        for key in names:
            speedup = by_cell.get((key, M, K, N))
            if speedup is None:
                row.append(Cell("—"))
            else:
                flag = "wrong" if speedup.wrong else ""
                row.append(Cell(f"{three_digits(speedup.ratio)}×", flag))
        rows.append(row)
    return Table(["N", *names.values()], rows)


def _time_table(
    points: list[PointRecord],
    row_of: Callable[[PointRecord], Hashable],
    row_name: Callable[[Any], str],
    first: str,
    column_of: Callable[[PointRecord], LineKey],
) -> tuple[list[LineKey], Table]:
    """Rows from ``row_of``, one column per line (``column_of``), cells in ms."""
    names = line_names(column_of(p) for p in points)
    cells = {(row_of(p), column_of(p)): p for p in points}
    rows = []
    for row in sorted({row_of(p) for p in points}):  # type: ignore[type-var]
        rows.append([Cell(row_name(row)), *(time_cell(cells.get((row, key))) for key in names)])
    header = [first, *(f"{name} (ms)" for name in names.values())]
    return list(names), Table(header, rows)


def _chapter(points: list[PointRecord], folder: FigureFolder) -> Section:
    blocks: list[Block] = [
        Paragraph(
            "The reduced product: C[i, j] = (A[2i] + A[2i+1]) · (B[:, 2j] + B[:, 2j+1]), "
            "an (N/2)×(N/2) output from N×N inputs. Median kernel time in ms per size and "
            "configuration; a dash where it did not run."
        )
    ]
    written: list[Path] = []
    by_dtype = group(points, lambda p: p.dtype)
    file_names = unique_names({dtype: file_name("rmm_time_{}", dtype) for dtype in by_dtype})
    for dtype in sorted(by_dtype, key=dtype_sort):
        part = by_dtype[dtype]
        if len(by_dtype) > 1:
            blocks.append(Heading(dtype, 3))
        keys, table = _time_table(part, lambda p: p.N, str, "N", lambda p: p.line_key)
        blocks.append(table)
        if not any(p.trusted for p in part):
            continue
        caption = f"rmm: median kernel time against N ({dtype})."
        figure = _chapter_figure(part, keys, dtype)
        image, paths = save(figure, folder, file_names[dtype], caption)
        written += paths
        blocks.append(image)
    return blocks, written


def _chapter_figure(points: list[PointRecord], keys: list[LineKey], dtype: str) -> Figure:
    measured = [p for p in points if p.trusted]
    names = line_names(keys)
    figure = Figure(figsize=(8, 5), layout="constrained")
    axes = figure.add_subplot(1, 1, 1)
    palette = Palette((key.label, key.variant, key.tile) for key in keys)
    for key in keys:
        line = sorted((p for p in measured if p.line_key == key), key=lambda p: p.N)
        good = [p for p in line if p.status == "ok"]
        axes.plot(
            [p.N for p in good],
            [median(p) * 1e3 for p in good],
            label=literal(names[key]),
            **style(palette, key.label, key.variant, key.tile),
        )
        bad = [p for p in line if p.status == "mismatch"]
        cross(axes, [p.N for p in bad], [median(p) * 1e3 for p in bad])
    size_axis(axes, [p.N for p in measured])
    axes.set_yscale("log")
    axes.set_xlabel("N (inputs N×N, output (N/2)×(N/2))")
    axes.set_ylabel("median kernel time (ms)")
    title = literal(f"Reduced matrix multiplication, {dtype}")
    axes.set_title(with_cache_note(title, (p.cache for p in measured)), fontsize=10)
    axes.grid(True, which="major", alpha=0.4)
    axes.grid(True, which="minor", alpha=0.1)
    legend(figure, axes)
    return figure


def _column(point: PointRecord) -> LineKey:
    """The blog's column: the line, whatever its data type (the rows are data types)."""
    return point.line_key._replace(dtype="")


def _bars(points: list[PointRecord], keys: list[LineKey], title: str) -> Figure:
    """One group per data type, one bar per line, its time written on it.

    The time axis is logarithmic only where the times span more than 30×, so
    close latencies stay comparable by eye. A wrong result is a hatched bar with
    a red cross; a skipped or failed point says so where its bar would be.
    """
    names = line_names(keys)
    dtypes = sorted({p.dtype for p in points}, key=dtype_sort)
    cells = {(p.dtype, _column(p)): p for p in points}
    times_ms = [median(p) * 1e3 for p in points if p.trusted]
    width = 0.8 / max(1, len(keys))
    figure_width = max(6.0, 1.2 + 0.35 * len(keys) * len(dtypes))
    figure = Figure(figsize=(figure_width + 2.6, 4.8), layout="constrained")
    palette = Palette((key.label, key.variant, key.tile) for key in keys)
    looks = [_bar_look(palette, key) for key in keys]
    axes = figure.add_subplot(1, 1, 1)
    if times_ms and min(times_ms) > 0 and max(times_ms) > 30 * min(times_ms):
        axes.set_yscale("log")
    for index, key in enumerate(keys):
        for place, dtype in enumerate(dtypes):
            point = cells.get((dtype, key))
            if point is not None:
                _bar(axes, point, place - 0.4 + width * (index + 0.5), width, looks[index])
    axes.margins(y=0.15)
    axes.set_xticks(range(len(dtypes)), [literal(dtype) for dtype in dtypes])
    axes.set_ylabel("median kernel time (ms)")
    modes = (p.cache for p in points if p.trusted)
    axes.set_title(with_cache_note(literal(title), modes), fontsize=10)
    axes.grid(True, axis="y", which="major", alpha=0.4)
    # Drawn by hand: a hatched (wrong) bar must not stand for its line in the legend.
    handles: list[Artist] = [
        Patch(**look, label=literal(names[key])) for look, key in zip(looks, keys, strict=True)
    ]
    if any(p.status == "mismatch" for p in points):
        handles.append(Line2D([], [], linestyle="none", label="wrong result", **WRONG))
    outside_legend(figure, handles, 4.8)
    return figure


_HATCHES = ("", "//", "..", "\\\\", "oo", "--", "++")


def _bar_look(palette: Palette, key: LineKey) -> dict[str, Any]:
    """A bar's colour (the variant's, shaded per tile) and hatching (per backend)."""
    hatch = _HATCHES[palette.labels.index(key.label) % len(_HATCHES)]
    return {"facecolor": palette.colour(key.variant, key.tile), "hatch": hatch}


def _bar(axes: Any, point: PointRecord, x: float, width: float, look: dict[str, Any]) -> None:
    """One bar of :func:`_bars`, or what stands where it would be (a point timed above
    its device's peak is no time: it says "untrusted")."""
    if not point.trusted:
        axes.text(
            x,
            0.02,
            literal(point.status if not point.measured else "untrusted"),
            rotation=90,
            fontsize=7,
            ha="center",
            va="bottom",
            color="red" if point.status == "error" else "grey",
            transform=axes.get_xaxis_transform(),
        )
        return
    wrong = point.status == "mismatch"
    time_ms = median(point) * 1e3
    bars = axes.bar(
        x,
        time_ms,
        width,
        color=look["facecolor"],
        hatch="xx" if wrong else look["hatch"] or None,
        edgecolor="red" if wrong else "white",
    )
    axes.bar_label(bars, [three_digits(time_ms)], fontsize=7, rotation=90, padding=2)
    if wrong:
        cross(axes, [x], [time_ms])


def _blog(points: list[PointRecord], folder: FigureFolder) -> Section:
    blocks: list[Block] = [
        Paragraph(
            "Latency of one product (median kernel time, ms) per data type, for the single "
            "product (mm) and the batched one (bmm)."
        )
    ]
    written: list[Path] = []
    shapes = group(points, lambda p: (p.op, p.batch, p.M, p.K, p.N))
    file_names = unique_names(
        {shape: file_name("latency_{}_{}x{}x{}x{}", *shape) for shape in shapes}
    )
    for shape in sorted(shapes, key=lambda shape: (op_sort(shape[0]), shape)):
        part = shapes[shape]
        op, size = shape[0], size_text(part[0])
        blocks.append(Heading(f"{op}, {size}", 3))
        keys, table = _time_table(
            part, lambda p: dtype_sort(p.dtype), lambda r: str(r[1]), "dtype", _column
        )
        blocks.append(table)
        if not any(p.trusted for p in part):
            continue
        figure = _bars(part, keys, f"{op} {size}: latency per data type")
        caption = f"{op} at {size}: median kernel time per data type."
        image, paths = save(figure, folder, file_names[shape], caption)
        written += paths
        blocks.append(image)
    return blocks, written


def _other(points: list[PointRecord], folder: FigureFolder) -> Section:
    intro = Paragraph("Points that fit none of the experiments above, drawn as compare draws them.")
    blocks, written = generic_figures(points, folder)
    return [intro, *blocks], written


SECTIONS: dict[str, Callable[[list[PointRecord], FigureFolder], Section]] = {
    "assignment": _assignment,
    "lab": _lab,
    "chapter": _chapter,
    "blog": _blog,
    "other": _other,
}
