"""One report from results: a self-contained HTML page and its Markdown twin.

The points of one or more results files are grouped into the experiments they
were measured for (the run's ``plan.preset``, or, for older runs, what the
operation and the sizes say), and each experiment gets the figures and tables
its source document asks for:

* assignment: naive against optimized per backend over the growing non-square sizes;
* lab: naive against tiled over square powers of two, and the speed-up of tiling;
* chapter: the reduced product (rmm), a table of kernel times per size and configuration;
* blog: latency at one size per data type, for mm and bmm, as tables and grouped bars;

then code equality (counts, every wrong result and error in plain sight, the full
log folded away) and the machines every run happened on.

The page is one file (figures embedded as PNG data URIs, inline CSS) so it can be
mailed or archived as it is; the Markdown refers to the figures in ``report_figures/``.
A wrong result never passes for a time: tables flag it, figures draw it as a red cross.

Results files may come from anywhere, so their strings are data, never structure: file
names are made of :func:`~xbackend.safeio.safe_name` parts (kept apart where two values
sanitise alike), every file is written whole and never through a link, the page and the
Markdown escape every string (one line, no markup, a code fence no string can close),
and figures draw a ``$`` as a dollar sign.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import html
import math
import re
import sys
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import NullLocator

from xbackend import plots
from xbackend.plots import literal
from xbackend.results import load
from xbackend.safeio import UnsafePath, atomic_write, output_folder, refuse_link, safe_name
from xbackend.timing import format_seconds

Point = dict[str, Any]
LineKey = tuple[str, str, str, int | None]  # label, device, variant, tile

HTML_NAME = "report.html"
MARKDOWN_NAME = "report.md"
FIGURES_DIR = "report_figures"

# In the order the report shows them; "other" is every point that fits none of the four.
EXPERIMENTS = {
    "assignment": "Assignment: naive against optimized, growing non-square sizes",
    "lab": "Lab: naive against tiled, square powers of two",
    "chapter": "Chapter: reduced matrix multiplication (rmm)",
    "blog": "Blog: latency per data type, mm and bmm",
    "other": "Other measurements",
}
_DTYPE_ORDER = ("int32", "float32", "float64")
_OP_ORDER = ("mm", "bmm", "rmm")
_MEASURED = ("ok", "mismatch")
_FLAG_WORDS = {"wrong": "WRONG", "error": "ERROR"}
_LOG_WORDS = {"": "ok", "wrong": "WRONG", "error": "ERROR", "skipped": "skipped"}


# ---------------------------------------------------------------------------
# The document: a list of blocks, rendered once as HTML and once as Markdown.


@dataclasses.dataclass
class Cell:
    """Text from the results; ``flag`` ("wrong", "error", "skipped") marks it for the eye."""

    text: str
    flag: str = ""


@dataclasses.dataclass
class Heading:
    text: str
    level: int


@dataclasses.dataclass
class Paragraph:
    text: str


@dataclasses.dataclass
class Table:
    header: list[str]
    rows: list[list[Cell]]
    numeric: bool = True  # right-align every column after the first


@dataclasses.dataclass
class Image:
    png: Path  # where the figure was written, for the Markdown
    data: bytes  # what was written there, for the page (never read back)
    caption: str


@dataclasses.dataclass
class Items:
    items: list[Cell]


@dataclasses.dataclass
class Log:
    summary: str
    lines: list[Cell]


Block = Heading | Paragraph | Table | Image | Items | Log


# ---------------------------------------------------------------------------
# Points: defaults for older files, one point per measurement, experiments.


def _normalized(point: Point) -> Point:
    """The point with the fields older files lack: op "mm", batch 1, float32."""
    return {
        **point,
        "op": point.get("op") or "mm",
        "batch": int(point.get("batch") or 1),
        "dtype": point.get("dtype") or "float32",
        "tile": point.get("tile"),
    }


def _point_key(point: Point) -> tuple[Any, ...]:
    return tuple(
        point[name]
        for name in ("label", "device", "op", "variant", "tile", "dtype", "batch", "M", "K", "N")
    )


def _latest(points: Iterable[Point]) -> list[Point]:
    """One point per measurement, the last recorded (a resumed or repeated run wins)."""
    return list({_point_key(point): point for point in points}.values())


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _is_assignment_shape(M: int, K: int, N: int) -> bool:
    """The assignment's growth: A is (16·i)×(14·i), B is (14·i)×(16·i)."""
    return M == N and M % 16 == 0 and 14 * M == 16 * K


def _mapping(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one: run headers are checked loosely."""
    return value if isinstance(value, dict) else {}


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _plan_shapes(plan: dict[str, Any]) -> list[tuple[int, int, int]]:
    """The plan's sizes (M, K, N); anything else in the list is not a size and is left out."""
    shapes = plan.get("shapes")
    if not isinstance(shapes, list):
        return []
    return [
        (shape[0], shape[1], shape[2])
        for shape in shapes
        if isinstance(shape, list | tuple) and len(shape) == 3 and all(map(_is_count, shape))
    ]


def _plan_dtypes(plan: dict[str, Any]) -> list[str]:
    dtypes = plan.get("dtypes")
    return [d for d in dtypes if isinstance(d, str)] if isinstance(dtypes, list) else []


def experiment_of(point: Point, runs: dict[str, dict[str, Any]]) -> str:
    """Which experiment a (normalized) point belongs to.

    The run's preset says it where there is one; runs from before presets are
    recognised by the point's operation and the run's sizes (all of them, so one
    run is not split by a size that happens to be a power of two) and data types.
    """
    plan = _mapping(_mapping(runs.get(str(point.get("run_id", "")))).get("plan"))
    preset_words = re.split(r"[^a-z0-9]+", str(plan.get("preset") or "").lower())
    for name in EXPERIMENTS:
        if name != "other" and name in preset_words:  # "lab", "blog-latency", ...
            return name
    if point["op"] == "rmm":
        return "chapter"
    if point["op"] == "bmm":
        return "blog"
    shapes = _plan_shapes(plan) or [(point["M"], point["K"], point["N"])]
    dtypes = set(_plan_dtypes(plan)) | {point["dtype"]}
    square = all(M == K == N for M, K, N in shapes)
    if square and len(set(shapes)) == 1 and dtypes != {"float32"}:
        return "blog"  # one size, several data types
    if square and all(_is_power_of_two(M) for M, _, _ in shapes):
        return "lab"
    if all(_is_assignment_shape(*shape) for shape in shapes):
        return "assignment"
    return "other"


def _group(points: Iterable[Point], key: Callable[[Point], Any]) -> dict[Any, list[Point]]:
    groups: dict[Any, list[Point]] = defaultdict(list)
    for point in points:
        groups[key(point)].append(point)
    return dict(groups)


def _line_key(point: Point) -> LineKey:
    return (point["label"], point["device"], point["variant"], point["tile"])


def _line_sort(key: LineKey) -> tuple[Any, ...]:
    label, device, variant, tile = key
    return (label, device, variant, tile or 0)


def _op_sort(op: str) -> tuple[int, str]:
    return (_OP_ORDER.index(op) if op in _OP_ORDER else len(_OP_ORDER), op)


def _dtype_sort(dtype: str) -> tuple[int, str]:
    return (_DTYPE_ORDER.index(dtype) if dtype in _DTYPE_ORDER else len(_DTYPE_ORDER), dtype)


def _ambiguous_labels(keys: Iterable[tuple[Any, ...]]) -> set[str]:
    """Labels that name more than one device (results of several machines together)."""
    devices: dict[str, set[str]] = defaultdict(set)
    for key in keys:
        devices[key[0]].add(key[1])
    return {label for label, names in devices.items() if len(names) > 1}


def _line_names(keys: Iterable[LineKey]) -> dict[LineKey, str]:
    """How tables and legends name a line: the device only where the label is ambiguous."""
    keys = sorted(set(keys), key=_line_sort)
    ambiguous = _ambiguous_labels(keys)
    names = {}
    for label, device, variant, tile in keys:
        name = f"{label} ({device})" if label in ambiguous else label
        name += f" {variant}" + (f" T={tile}" if tile else "")
        names[(label, device, variant, tile)] = name
    return names


def _is_measured(point: Point) -> bool:
    return point["status"] in _MEASURED and bool(point.get("kernel_s"))


def _median(point: Point) -> float:
    return float(point["kernel_s"]["median"])


# ---------------------------------------------------------------------------
# Numbers and cells.


def _three_digits(value: float) -> str:
    """At least three significant digits, never in exponent notation (12346, 1.23, 0.00123)."""
    if value == 0 or not math.isfinite(value):
        return str(value)
    decimals = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}"


def _size(point: Point) -> str:
    size = f"{point['M']}×{point['K']}·{point['K']}×{point['N']}"
    if point["op"] == "bmm" or point["batch"] != 1:
        size = f"{point['batch']}×{size}"
    return size


def _time_cell(point: Point | None) -> Cell:
    """A point's median kernel time in ms, flagged unless it is a verified time."""
    if point is None:
        return Cell("—")
    status = point["status"]
    if status == "ok":
        return Cell(_three_digits(_median(point) * 1e3) if point.get("kernel_s") else "—")
    if status == "mismatch":
        time = _three_digits(_median(point) * 1e3) if point.get("kernel_s") else ""
        return Cell(time, "wrong")
    if status == "skipped":
        return Cell("skipped", "skipped")
    return Cell("", "error")


def _number(value: Any) -> float | None:
    """``value`` as a float if it is a number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _kernel_median(point: Point) -> float | None:
    """The median kernel time of any point that has one (a skipped point may have a stub)."""
    return _number(_mapping(point.get("kernel_s")).get("median"))


def _bytes(count: Any) -> str:
    if _number(count) is None or count <= 0:
        return "—"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            return f"{_three_digits(count / scale)} {unit}"
    return f"{count} B"


# ---------------------------------------------------------------------------
# Figures.


@dataclasses.dataclass(frozen=True)
class _Folder:
    """A folder for figures below the report's folder, made when a figure is written.

    ``out`` is the user's choice (a link there is theirs to make); every level below
    it is xbackend's, so a link found there is refused, not followed out of the report.
    """

    out: Path
    names: tuple[str, ...] = ()

    def __truediv__(self, name: str) -> _Folder:
        if name != safe_name(name, limit=255):
            raise ValueError(f"{name!r} is not a safe folder name")
        return _Folder(self.out, (*self.names, name))

    def make(self) -> Path:
        path = self.out
        for name in self.names:
            path = path / name
            if path.is_symlink():
                raise UnsafePath(
                    f"{path} is a symbolic link; xbackend does not write through links"
                )
            output_folder(path)
        return path


_Key = TypeVar("_Key", bound=Hashable)


def _name(template: str, *fields: object) -> tuple[str, bool]:
    """``template`` filled with each field as a safe file-name part; and whether every
    field was one already (float32, mm, 64), so that the name is exactly the values."""
    parts = [safe_name(field) for field in fields]
    exact = all(part == str(field) for part, field in zip(parts, fields, strict=True))
    return template.format(*parts), exact


def _unique_names(names: dict[_Key, tuple[str, bool]]) -> dict[_Key, str]:
    """One file name per key (from :func:`_name`), no two alike, not even in case.

    Exact names are given out first and kept as they are, so figures of ordinary values
    keep their names; a name already given gets a short hash of its key, so values that
    sanitise alike (``a/b``, ``a_b``) or differ only in case get files of their own.
    """
    given: dict[_Key, str] = {}
    taken: set[str] = set()
    order = sorted(
        names.items(),
        key=lambda item: (not item[1][1], item[1][0] != item[1][0].lower(), item[1][0]),
    )
    for key, (name, _) in order:
        candidate = name
        if candidate.casefold() in taken:
            candidate = f"{name}-{hashlib.sha256(repr(key).encode()).hexdigest()[:8]}"
        serial = 2
        while candidate.casefold() in taken:
            candidate, serial = f"{name}-{serial}", serial + 1
        taken.add(candidate.casefold())
        given[key] = candidate
    return given


def _save(figure: Figure, folder: _Folder, name: str, caption: str) -> tuple[Image, list[Path]]:
    paths, png = plots.save(figure, folder.make(), name, dpi=110)
    return Image(paths[0], png, caption), paths


def _style(index: int) -> dict[str, Any]:
    markers = "osD^v<>ph*"
    linestyles = ("-", "--", "-.", ":")
    return {
        "color": f"C{index % 10}",
        "marker": markers[index % len(markers)],
        "linestyle": linestyles[(index // 10) % len(linestyles)],
        "markersize": 4,
    }


_WRONG: dict[str, Any] = {"marker": "x", "color": "red", "markersize": 9, "markeredgewidth": 2}


def _cross(axes: Axes, x: list[float], y: list[float]) -> None:
    """Wrong results, as plots.py draws them: a red cross, never a point of a line."""
    if x:
        axes.plot(x, y, linestyle="none", label="wrong result", **_WRONG)


def _size_axis(axes: Axes, sizes: Iterable[int]) -> None:
    """A logarithmic size axis labelled with the sizes themselves (512, not 2⁹)."""
    ticks = sorted({n for n in sizes if n > 0})
    axes.set_xscale("log", base=2)
    axes.set_xticks(ticks, [str(n) for n in ticks])
    axes.xaxis.set_minor_locator(NullLocator())


def _legend(axes: Axes) -> None:
    handles, labels = axes.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    if unique:
        axes.legend(unique.values(), unique.keys(), fontsize=8)


_GENERIC_CAPTIONS = {
    "runtime_by_backend": "Naive against optimized, one panel per backend: median kernel time "
    "against output elements M·N (band: quartiles; dotted: end-to-end with transfers).",
    "runtime_all": "Every backend and variant: median kernel time against output elements M·N.",
    "gflops": "Throughput from the median kernel time (2·M·N·K flops per product).",
}


def _generic_figures(points: list[Point], folder: _Folder) -> tuple[list[Block], list[Path]]:
    """plots.draw's figures, once per operation, data type and batch (draw mixes none)."""
    blocks: list[Block] = []
    written: list[Path] = []
    groups = _group(points, lambda p: (p["op"], p["dtype"], p["batch"]))
    order = sorted(groups, key=lambda key: (_op_sort(key[0]), _dtype_sort(key[1]), key[2]))
    subfolders = _unique_names(
        {
            (op, dtype, batch): _name("{}-{}-b{}", op, dtype, batch)
            if batch != 1
            else _name("{}-{}", op, dtype)
            for op, dtype, batch in groups
        }
    )
    for op, dtype, batch in order:
        group = groups[(op, dtype, batch)]
        if not any(_is_measured(point) for point in group):
            continue
        sub = folder / subfolders[(op, dtype, batch)] if len(groups) > 1 else folder
        target = sub.make()
        what = f"{op}, {dtype}" + (f", batch {batch}" if batch != 1 else "")
        for name, figure in plots.figures(group):
            paths, png = plots.save(figure, target, name)  # as plots.draw writes them
            written += paths
            caption = _GENERIC_CAPTIONS.get(name, name.replace("_", " "))
            blocks.append(Image(paths[0], png, f"{caption.rstrip('.')} ({what})."))
    if not blocks:
        blocks.append(Paragraph("No measured points to draw: every point was skipped or failed."))
    return blocks, written


# ---------------------------------------------------------------------------
# The experiments.


def _assignment(points: list[Point], folder: _Folder) -> tuple[list[Block], list[Path]]:
    intro = Paragraph(
        "A is (16·i)×(14·i) and B is (14·i)×(16·i): each backend's naive kernel against its "
        "optimized ones (tiled in shared/local memory; NumPy's BLAS on the CPU), kernel time "
        "against the number of output elements, log-log."
    )
    blocks, written = _generic_figures(points, folder)
    return [intro, *blocks], written


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


def speedups(points: list[Point]) -> list[SpeedUp]:
    """Tiled against naive on the same backend, device, data type and size, for mm.

    Each tiled tile size is paired with the naive kernel of the same tile (the
    same work-group shape), else with the naive kernel that takes no tile, else
    with the only naive kernel measured there.
    """
    result = []
    products = [p for p in points if p["op"] == "mm"]
    same = _group(products, lambda p: (p["label"], p["device"], p["dtype"], p["M"], p["K"], p["N"]))
    for (label, device, dtype, M, K, N), group in same.items():
        naive = {p["tile"]: p for p in group if p["variant"] == "naive" and _is_measured(p)}
        for tiled in group:
            if tiled["variant"] != "tiled" or not _is_measured(tiled):
                continue
            partner = naive.get(tiled["tile"]) or naive.get(None)
            if partner is None and len(naive) == 1:
                partner = next(iter(naive.values()))
            if partner is None or _median(tiled) <= 0:
                continue
            wrong = "mismatch" in (partner["status"], tiled["status"])
            ratio = _median(partner) / _median(tiled)
            result.append(SpeedUp((label, device, tiled["tile"], dtype), M, K, N, ratio, wrong))
    return sorted(result, key=lambda s: (_speedup_sort(s.key), s.N, s.M, s.K))


def _speedup_sort(key: SpeedUpKey) -> tuple[Any, ...]:
    label, device, tile, dtype = key
    return (label, device, tile or 0, _dtype_sort(dtype))


def _speedup_names(keys: Iterable[SpeedUpKey]) -> dict[SpeedUpKey, str]:
    keys = sorted(set(keys), key=_speedup_sort)
    ambiguous = _ambiguous_labels(keys)
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


def _lab(points: list[Point], folder: _Folder) -> tuple[list[Block], list[Path]]:
    blocks: list[Block] = [
        Paragraph(
            "Square products N×N·N×N, N a power of two: the naive global-memory kernel "
            "against the tiled shared/local-memory kernel on each backend."
        )
    ]
    figures, written = _generic_figures(points, folder)
    blocks += figures
    found = speedups(points)
    if not found:
        blocks.append(Paragraph("No size has both a naive and a tiled time: no speed-up."))
        return blocks, written
    names = _speedup_names(s.key for s in found)

    figure = Figure(figsize=(8, 5))
    axes = figure.add_subplot(1, 1, 1)
    for index, (key, name) in enumerate(names.items()):
        line = [s for s in found if s.key == key]
        good = [s for s in line if not s.wrong]
        axes.plot(
            [s.N for s in good], [s.ratio for s in good], label=literal(name), **_style(index)
        )
        bad = [s for s in line if s.wrong]
        _cross(axes, [s.N for s in bad], [s.ratio for s in bad])
    axes.axhline(1.0, color="grey", linewidth=1)
    _size_axis(axes, [s.N for s in found])
    axes.set_xlabel("N")
    axes.set_ylabel("speed-up (naive time / tiled time)")
    axes.set_title("Speed-up of tiling, from median kernel times", fontsize=10)
    axes.grid(True, alpha=0.3)
    _legend(axes)
    image, paths = _save(
        figure,
        folder,
        "speedup",
        "Speed-up of the tiled kernel over the naive one (above 1: tiling wins).",
    )
    written += paths
    blocks.append(image)

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
                row.append(Cell(f"{_three_digits(speedup.ratio)}×", flag))
        rows.append(row)
    blocks.append(
        Paragraph(
            "Speed-up = naive median kernel time / tiled median kernel time "
            "(same backend, device, data type and size; T is the tiled kernel's tile)."
        )
    )
    blocks.append(Table(["N", *names.values()], rows))
    return blocks, written


def _time_table(
    points: list[Point],
    row_of: Callable[[Point], Any],
    row_name: Callable[[Any], str],
    first: str,
) -> tuple[list[LineKey], Table]:
    """Rows from ``row_of``, one column per line (label, variant, tile), cells in ms."""
    names = _line_names(_line_key(p) for p in points)
    cells = {(row_of(p), _line_key(p)): p for p in points}
    rows = []
    for row in sorted({row_of(p) for p in points}):
        rows.append([Cell(row_name(row)), *(_time_cell(cells.get((row, key))) for key in names)])
    header = [first, *(f"{name} (ms)" for name in names.values())]
    return list(names), Table(header, rows)


def _chapter(points: list[Point], folder: _Folder) -> tuple[list[Block], list[Path]]:
    blocks: list[Block] = [
        Paragraph(
            "The reduced product: C[i, j] = (A[2i] + A[2i+1]) · (B[:, 2j] + B[:, 2j+1]), "
            "an (N/2)×(N/2) output from N×N inputs. Median kernel time in ms per size and "
            "configuration; a dash where it did not run."
        )
    ]
    written: list[Path] = []
    by_dtype = _group(points, lambda p: p["dtype"])
    file_names = _unique_names({dtype: _name("rmm_time_{}", dtype) for dtype in by_dtype})
    for dtype in sorted(by_dtype, key=_dtype_sort):
        group = by_dtype[dtype]
        if len(by_dtype) > 1:
            blocks.append(Heading(dtype, 3))
        keys, table = _time_table(group, lambda p: p["N"], str, "N")
        blocks.append(table)
        measured = [p for p in group if _is_measured(p)]
        if not measured:
            continue
        names = _line_names(keys)
        figure = Figure(figsize=(8, 5))
        axes = figure.add_subplot(1, 1, 1)
        for index, key in enumerate(keys):
            line = sorted((p for p in measured if _line_key(p) == key), key=lambda p: p["N"])
            good = [p for p in line if p["status"] == "ok"]
            axes.plot(
                [p["N"] for p in good],
                [_median(p) * 1e3 for p in good],
                label=literal(names[key]),
                **_style(index),
            )
            bad = [p for p in line if p["status"] == "mismatch"]
            _cross(axes, [p["N"] for p in bad], [_median(p) * 1e3 for p in bad])
        _size_axis(axes, [p["N"] for p in measured])
        axes.set_yscale("log")
        axes.set_xlabel("N (inputs N×N, output (N/2)×(N/2))")
        axes.set_ylabel("median kernel time (ms)")
        axes.set_title(literal(f"Reduced matrix multiplication, {dtype}"), fontsize=10)
        axes.grid(True, which="major", alpha=0.4)
        axes.grid(True, which="minor", alpha=0.1)
        _legend(axes)
        caption = f"rmm: median kernel time against N ({dtype})."
        image, paths = _save(figure, folder, file_names[dtype], caption)
        written += paths
        blocks.append(image)
    return blocks, written


def _bars(points: list[Point], keys: list[LineKey], title: str) -> Figure:
    """One group per data type, one bar per line, its time written on it.

    The time axis is logarithmic only where the times span more than 30×, so
    close latencies stay comparable by eye. A wrong result is a hatched bar with
    a red cross; a skipped or failed point says so where its bar would be.
    """
    names = _line_names(keys)
    dtypes = sorted({p["dtype"] for p in points}, key=_dtype_sort)
    cells = {(p["dtype"], _line_key(p)): p for p in points}
    times_ms = [_median(p) * 1e3 for p in points if _is_measured(p)]
    width = 0.8 / max(1, len(keys))
    figure = Figure(figsize=(max(6.0, 1.2 + 0.35 * len(keys) * len(dtypes)), 4.8))
    axes = figure.add_subplot(1, 1, 1)
    if times_ms and min(times_ms) > 0 and max(times_ms) > 30 * min(times_ms):
        axes.set_yscale("log")
    for index, key in enumerate(keys):
        for group, dtype in enumerate(dtypes):
            x = group - 0.4 + width * (index + 0.5)
            point = cells.get((dtype, key))
            if point is None:
                continue
            if not _is_measured(point):
                axes.text(
                    x,
                    0.02,
                    literal(point["status"]),
                    rotation=90,
                    fontsize=7,
                    ha="center",
                    va="bottom",
                    color="red" if point["status"] == "error" else "grey",
                    transform=axes.get_xaxis_transform(),
                )
                continue
            wrong = point["status"] == "mismatch"
            time_ms = _median(point) * 1e3
            bars = axes.bar(
                x,
                time_ms,
                width,
                color=f"C{index % 10}",
                hatch="xx" if wrong else None,
                edgecolor="red" if wrong else None,
            )
            axes.bar_label(bars, [_three_digits(time_ms)], fontsize=7, rotation=90, padding=2)
            if wrong:
                _cross(axes, [x], [time_ms])
    axes.margins(y=0.15)
    axes.set_xticks(range(len(dtypes)), [literal(dtype) for dtype in dtypes])
    axes.set_ylabel("median kernel time (ms)")
    axes.set_title(literal(title), fontsize=10)
    axes.grid(True, axis="y", which="major", alpha=0.4)
    # Drawn by hand: a hatched (wrong) bar must not stand for its line in the legend.
    handles: list[Artist] = [
        Patch(color=f"C{index % 10}", label=literal(names[key])) for index, key in enumerate(keys)
    ]
    if any(p["status"] == "mismatch" for p in points):
        handles.append(Line2D([], [], linestyle="none", label="wrong result", **_WRONG))
    axes.legend(handles=handles, fontsize=8)
    return figure


def _blog(points: list[Point], folder: _Folder) -> tuple[list[Block], list[Path]]:
    blocks: list[Block] = [
        Paragraph(
            "Latency of one product (median kernel time, ms) per data type, for the single "
            "product (mm) and the batched one (bmm)."
        )
    ]
    written: list[Path] = []
    shapes = _group(points, lambda p: (p["op"], p["batch"], p["M"], p["K"], p["N"]))
    file_names = _unique_names({shape: _name("latency_{}_{}x{}x{}x{}", *shape) for shape in shapes})
    for op, batch, M, K, N in sorted(shapes, key=lambda shape: (_op_sort(shape[0]), shape)):
        group = shapes[(op, batch, M, K, N)]
        size = _size(group[0])
        blocks.append(Heading(f"{op}, {size}", 3))
        keys, table = _time_table(group, lambda p: _dtype_sort(p["dtype"]), lambda r: r[1], "dtype")
        blocks.append(table)
        if not any(_is_measured(p) for p in group):
            continue
        figure = _bars(group, keys, f"{op} {size}: latency per data type")
        caption = f"{op} at {size}: median kernel time per data type."
        image, paths = _save(figure, folder, file_names[(op, batch, M, K, N)], caption)
        written += paths
        blocks.append(image)
    return blocks, written


def _other(points: list[Point], folder: _Folder) -> tuple[list[Block], list[Path]]:
    intro = Paragraph("Points that fit none of the experiments above, drawn as compare draws them.")
    blocks, written = _generic_figures(points, folder)
    return [intro, *blocks], written


_SECTIONS: dict[str, Callable[[list[Point], _Folder], tuple[list[Block], list[Path]]]] = {
    "assignment": _assignment,
    "lab": _lab,
    "chapter": _chapter,
    "blog": _blog,
    "other": _other,
}


# ---------------------------------------------------------------------------
# Code equality and machines.


_LINE_BREAKS = re.compile(r"[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]+")


def _one_line(text: str) -> str:
    """``text`` with its line breaks as spaces: a string from the results is one line."""
    return _LINE_BREAKS.sub(" ", text)


def _log_line(point: Point) -> Cell:
    tile = f"T={point['tile']}" if point["tile"] else "-"
    parts = [
        str(point["label"]),
        str(point["op"]),
        str(point["variant"]),
        tile,
        str(point["dtype"]),
        _size(point),
    ]
    max_abs_error = _number(point.get("max_abs_error"))
    if max_abs_error is not None:
        parts.append(f"max error {max_abs_error:.3g}")
    bound_ratio = _number(point.get("bound_ratio"))
    if bound_ratio is not None:
        parts.append(f"({bound_ratio:.3g} of the tolerance)")
    median = _kernel_median(point)
    if median is not None:
        parts.append(f"kernel {format_seconds(median)}")
    if point["status"] not in _MEASURED and point.get("reason"):
        first, *_ = str(point["reason"]).strip().splitlines() or [""]
        parts.append(f"— {first}")
    flag = {"mismatch": "wrong", "error": "error", "skipped": "skipped"}.get(point["status"], "")
    # One line, so that no string can forge a line of the log ("ok ..." under a wrong result).
    return Cell(_one_line(" ".join(parts)), flag)


def _equality(experiments: dict[str, list[Point]]) -> list[Block]:
    blocks: list[Block] = [
        Heading("Code equality", 2),
        Paragraph(
            "Every measured result is compared with a float64 reference, element by "
            "element, within a tolerance of f(K)·eps·(|A|·|B|) (f(K) = K up to 16, 4·√K "
            "beyond; integers exactly); bound ratio is the largest error as a fraction of it."
        ),
    ]
    rows = []
    problems = []
    for name, points in experiments.items():
        ok = sum(p["status"] == "ok" for p in points)
        wrong = sum(p["status"] == "mismatch" for p in points)
        errors = sum(p["status"] == "error" for p in points)
        skipped = sum(p["status"] == "skipped" for p in points)
        ratios = [p["bound_ratio"] for p in points if p["status"] == "ok" and p.get("bound_ratio")]
        rows.append(
            [
                Cell(name),
                Cell(f"{ok}/{ok + wrong + errors}", "wrong" if wrong or errors else ""),
                Cell(str(wrong), "wrong" if wrong else ""),
                Cell(str(errors), "error" if errors else ""),
                Cell(str(skipped)),
                Cell(_three_digits(max(ratios)) if ratios else "—"),
            ]
        )
        problems += [_log_line(p) for p in points if p["status"] in ("mismatch", "error")]
    blocks.append(
        Table(
            ["experiment", "equal/checked", "wrong", "errors", "skipped", "largest bound ratio"],
            rows,
        )
    )
    if problems:
        blocks.append(Paragraph("Wrong results and errors:"))
        blocks.append(Items(problems))
    else:
        blocks.append(Paragraph("No wrong result and no error."))
    for name, points in experiments.items():
        ordered = sorted(points, key=lambda p: (_line_sort(_line_key(p)), p["op"], p["dtype"]))
        ordered.sort(key=lambda p: p["M"] * p["N"] * p["K"] * p["batch"])
        blocks.append(Log(f"{name}: every point ({len(points)})", [_log_line(p) for p in ordered]))
    return blocks


def _machines(runs: dict[str, dict[str, Any]], points: list[Point]) -> list[Block]:
    blocks: list[Block] = [Heading("Machines", 2)]
    for run_id, run in sorted(runs.items(), key=lambda item: str(item[1].get("timestamp"))):
        env = _mapping(run.get("environment"))
        plan = _mapping(run.get("plan"))
        blocks.append(Heading(f"Run {run_id}, {run.get('timestamp', '')}", 3))
        packages = _mapping(env.get("packages"))
        facts = [
            ("command", env.get("command")),
            ("host", env.get("host")),
            ("os", env.get("os")),
            ("cpu", f"{env.get('cpu', '—')} ({env.get('cpu_count', '?')} cores)"),
            ("python", env.get("python")),
            ("xbackend", env.get("xbackend")),
            ("packages", ", ".join(f"{name} {version}" for name, version in packages.items())),
            ("preset", plan.get("preset")),
            ("op", plan.get("op") or "mm"),
            ("dtypes", ", ".join(_plan_dtypes(plan)) or "float32"),
            ("points", str(sum(p.get("run_id") == run_id for p in points))),
        ]
        if env.get("git_commit"):
            dirty = " (with uncommitted changes)" if env.get("git_dirty") else ""
            facts.append(("git commit", f"{env['git_commit']}{dirty}"))
        rows = [[Cell(name), Cell(str(value))] for name, value in facts if value not in (None, "")]
        blocks.append(Table(["setting", "value"], rows, numeric=False))
        devices = _mapping(run.get("devices"))
        if devices:
            device_rows = []
            for label, found in devices.items():
                # A device recorded as a bare string is taken for its name.
                device = found if isinstance(found, dict) else {"name": found}
                driver = str(device.get("driver_version") or "—")
                if device.get("runtime_version"):
                    driver += f" / {device['runtime_version']}"
                device_rows.append(
                    [
                        Cell(str(label)),
                        Cell(str(device.get("name") or "—")),
                        Cell(str(device.get("platform") or "—")),
                        Cell(driver),
                        Cell(_bytes(device.get("global_mem_bytes"))),
                        Cell(str(device.get("compute_units") or "—")),
                        Cell(_bytes(device.get("local_mem_bytes"))),
                    ]
                )
            header = ["device", "name", "platform", "driver / runtime", "memory", "compute units"]
            blocks.append(Table([*header, "local memory"], device_rows, numeric=False))
    orphans = sum(p.get("run_id") not in runs for p in points)
    if orphans:
        blocks.append(Paragraph(f"{orphans} points come from runs without a run header."))
    return blocks


# ---------------------------------------------------------------------------
# Rendering.

_CSS = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto;
       padding: 0 1em; line-height: 1.45; color: #222; }
h1, h2 { border-bottom: 1px solid #ddd; padding-bottom: .2em; }
table { border-collapse: collapse; margin: .5em 0 1.5em; font-size: .9em; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: left; }
table.numeric td:not(:first-child), table.numeric th:not(:first-child) { text-align: right; }
th { background: #f3f3f3; }
figure { margin: 1em 0 2em; }
figure img { max-width: 100%; }
figcaption { font-size: .85em; color: #555; }
pre { font-size: .8em; background: #f8f8f8; padding: .6em; overflow-x: auto; }
.wrong, .error { color: #b00; font-weight: bold; }
.skipped { color: #888; }
"""


def _anchor(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")


def _cell_text(cell: Cell) -> str:
    word = _FLAG_WORDS.get(cell.flag)
    return f"{word} {cell.text}".strip() if word else cell.text


def _log_text(cell: Cell) -> str:
    """A line of the log: every line starts with its verdict, in one column."""
    return f"{_LOG_WORDS.get(cell.flag, cell.flag):<8} {cell.text}"


def _html_cell(cell: Cell, tag: str = "td", text: Callable[[Cell], str] = _cell_text) -> str:
    css = f' class="{cell.flag}"' if cell.flag else ""
    return f"<{tag}{css}>{html.escape(text(cell))}</{tag}>"


def _html_block(block: Block) -> str:
    if isinstance(block, Heading):
        level = block.level
        anchor = _anchor(block.text)
        return f'<h{level} id="{anchor}">{html.escape(block.text)}</h{level}>'
    if isinstance(block, Paragraph):
        return f"<p>{html.escape(block.text)}</p>"
    if isinstance(block, Table):
        css = ' class="numeric"' if block.numeric else ""
        header = "".join(f"<th>{html.escape(name)}</th>" for name in block.header)
        rows = "\n".join(
            "<tr>" + "".join(_html_cell(cell) for cell in row) + "</tr>" for row in block.rows
        )
        return f"<table{css}>\n<tr>{header}</tr>\n{rows}\n</table>"
    if isinstance(block, Image):
        data = base64.b64encode(block.data).decode("ascii")
        caption = html.escape(block.caption)
        return (
            f'<figure><img src="data:image/png;base64,{data}" alt="{caption}">'
            f"<figcaption>{caption}</figcaption></figure>"
        )
    if isinstance(block, Items):
        items = "\n".join(_html_cell(cell, "li") for cell in block.items)
        return f"<ul>\n{items}\n</ul>"
    lines = "\n".join(_html_cell(cell, "span", _log_text) for cell in block.lines)
    return f"<details><summary>{html.escape(block.summary)}</summary>\n<pre>{lines}</pre></details>"


def _html(title: str, blocks: list[Block]) -> str:
    body = "\n".join(_html_block(block) for block in blocks)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n"
        f"<body>\n{body}\n</body>\n</html>\n"
    )


# Escaped wherever they stand: each can open inline markup (emphasis, code, a link or an
# image, strikethrough, GitHub's math), end a table cell, close a heading, or escape the
# next character. Markdown reads a backslash before any ASCII punctuation as "this, as is".
_MD_PUNCTUATION = re.compile(r"([\\`*_\[\]!#|~$])")


def _md_text(text: str) -> str:
    """Text from the results, shown as written: one line, no HTML, no markup, no cell break.

    ``<``, ``>`` and ``&`` become entities (no HTML, no autolink, no entity from the data);
    the rest of what can start markup is backslash-escaped; line breaks become spaces, so
    nothing from the data starts a line (a heading, a list, a quote, a fence).
    """
    escaped = html.escape(_one_line(text), quote=False)
    return _MD_PUNCTUATION.sub(r"\\\1", escaped)


def _md_line(text: str) -> str:
    """Escaped text that starts a line: it cannot start a list, a break or a code block."""
    text = text.lstrip()
    if text[:1] in ("-", "+", "="):
        return f"\\{text}"
    return re.sub(r"^(\d+)([.)])", r"\1\\\2", text)


def _md_cell(cell: Cell) -> str:
    word = _FLAG_WORDS.get(cell.flag)
    text = _md_text(cell.text)
    return f"**{word}** {text}".strip() if word else text


def _md_fence(lines: list[str]) -> str:
    """A code fence longer than any run of backticks in ``lines``: none of them can close it."""
    longest = max((len(run) for line in lines for run in re.findall("`+", line)), default=0)
    return "`" * max(3, longest + 1)


def _md_block(block: Block, out: Path) -> str:
    if isinstance(block, Heading):
        return f"{'#' * block.level} {_md_text(block.text)}"
    if isinstance(block, Paragraph):
        return _md_line(_md_text(block.text))
    if isinstance(block, Table):
        align = " --- |" + (" ---: |" if block.numeric else " --- |") * (len(block.header) - 1)
        lines = ["| " + " | ".join(_md_text(name) for name in block.header) + " |", "|" + align]
        lines += ["| " + " | ".join(_md_cell(cell) for cell in row) + " |" for row in block.rows]
        return "\n".join(lines)
    if isinstance(block, Image):
        return f"![{_md_text(block.caption)}]({block.png.relative_to(out).as_posix()})"
    if isinstance(block, Items):
        return "\n".join(f"- {_md_line(_md_cell(cell))}" for cell in block.items)
    lines = [_one_line(_log_text(cell)) for cell in block.lines]
    fence = _md_fence(lines)
    return f"{_md_line(_md_text(block.summary))}:\n\n{fence}\n" + "\n".join(lines) + f"\n{fence}"


def _markdown(blocks: list[Block], out: Path) -> str:
    return "\n\n".join(_md_block(block, out) for block in blocks) + "\n"


# ---------------------------------------------------------------------------


def _warn(message: str) -> None:
    """A line of the results the loader skipped; control characters shown, not obeyed."""
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
    print(f"xbackend: warning: {shown}", file=sys.stderr)


def write_report(paths: list[Path], out: Path) -> list[Path]:
    """Write ``report.html``, ``report.md`` and ``report_figures/`` into ``out``.

    ``paths`` are results folders or ``results.jsonl`` files; a line that cannot be
    read is skipped with a warning on stderr. A point measured more than once in one
    experiment counts once, as last recorded. Returns the files written.

    Raises :class:`~xbackend.safeio.UnsafePath` (a ValueError) where ``out`` cannot be
    a folder, or a symbolic link stands where a file or folder of the report goes.
    """
    runs, raw = load(paths, warn=_warn)
    # De-duplicate within each experiment only: the lab and the blog may both have
    # measured 1024³, and neither may take the other's point.
    by_experiment = _group([_normalized(point) for point in raw], lambda p: experiment_of(p, runs))
    points = [point for group in by_experiment.values() for point in _latest(group)]
    output_folder(out)
    html_path = out / HTML_NAME
    markdown_path = out / MARKDOWN_NAME
    for path in (html_path, markdown_path):
        refuse_link(path)  # before drawing anything: atomic_write would refuse it at the end
    figures = _Folder(out, (FIGURES_DIR,))

    experiments = _group(points, lambda p: experiment_of(p, runs))
    experiments = {name: experiments[name] for name in EXPERIMENTS if name in experiments}
    checked = [p for p in points if p["status"] in ("ok", "mismatch", "error")]
    ok = sum(p["status"] == "ok" for p in checked)
    title = "xbackend report"
    blocks: list[Block] = [
        Heading(title, 1),
        Paragraph(
            f"{len(points)} points from {len(runs)} runs ({', '.join(str(p) for p in paths)}): "
            f"{ok} of {len(checked)} checked results equal to the reference, "
            f"{sum(p['status'] == 'skipped' for p in points)} skipped. "
            "Times are medians of the timed samples."
        ),
    ]
    written: list[Path] = []
    for name, points_of in experiments.items():
        blocks.append(Heading(EXPERIMENTS[name], 2))
        section, files = _SECTIONS[name](points_of, figures / name)
        blocks += section
        written += files
    blocks += _equality(experiments)
    blocks += _machines(runs, points)

    atomic_write(html_path, _html(title, blocks))
    atomic_write(markdown_path, _markdown(blocks, out))
    return [html_path, markdown_path, *written]
