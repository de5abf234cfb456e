"""Points for the report: which experiment each belongs to, how lines are named and sorted,
and how a point reads in a table cell."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar

from xbackend.operations import OPS
from xbackend.report.document import Cell
from xbackend.results import LineKey, PointRecord, RunHeader

# In the order the report shows them; "other" is every point that fits none of the four.
EXPERIMENTS = {
    "assignment": "Assignment: naive against optimized, growing non-square sizes",
    "lab": "Lab: naive against tiled, square powers of two",
    "chapter": "Chapter: reduced matrix multiplication (rmm)",
    "blog": "Blog: latency per data type, mm and bmm",
    "other": "Other measurements",
}
_DTYPE_ORDER = ("int32", "float32", "float64")

_Key = TypeVar("_Key", bound=Hashable)


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _is_assignment_shape(M: int, K: int, N: int) -> bool:
    """The assignment's growth: A is (16·i)×(14·i), B is (14·i)×(16·i)."""
    return M == N and M % 16 == 0 and 14 * M == 16 * K


def experiment_of(point: PointRecord, runs: dict[str, RunHeader]) -> str:
    """Which experiment a point belongs to.

    The run's preset says it where there is one; runs from before presets are
    recognised by the point's operation and the run's sizes (all of them, so one
    run is not split by a size that happens to be a power of two) and data types.
    """
    run = runs.get(point.run_id)
    plan = run.plan if run is not None else None
    preset_words = re.split(r"[^a-z0-9]+", str(plan.preset if plan else "").lower())
    for name in EXPERIMENTS:
        if name != "other" and name in preset_words:  # "lab", "blog-latency", ...
            return name
    operation = point.operation
    if operation is not None and operation.reduced:
        return "chapter"
    if operation is not None and operation.batched:
        return "blog"
    shapes = [(s.M, s.K, s.N) for s in plan.shapes] if plan else []
    shapes = shapes or [(point.M, point.K, point.N)]
    dtypes = set(plan.dtypes if plan else []) | {point.dtype}
    square = all(M == K == N for M, K, N in shapes)
    if square and len(set(shapes)) == 1 and dtypes != {"float32"}:
        return "blog"  # one size, several data types
    if square and all(_is_power_of_two(M) for M, _, _ in shapes):
        return "lab"
    if all(_is_assignment_shape(*shape) for shape in shapes):
        return "assignment"
    return "other"


def group(
    points: Iterable[PointRecord], key: Callable[[PointRecord], _Key]
) -> dict[_Key, list[PointRecord]]:
    groups: dict[_Key, list[PointRecord]] = defaultdict(list)
    for point in points:
        groups[key(point)].append(point)
    return dict(groups)


def line_sort(key: LineKey) -> tuple[Any, ...]:
    return (key.label, key.device, key.variant, key.tile or 0, key.op, key.dtype)


def op_sort(op: str) -> tuple[int, str]:
    return (OPS.index(op) if op in OPS else len(OPS), op)


def dtype_sort(dtype: str) -> tuple[int, str]:
    return (_DTYPE_ORDER.index(dtype) if dtype in _DTYPE_ORDER else len(_DTYPE_ORDER), dtype)


def ambiguous_labels(keys: Iterable[tuple[Any, ...]]) -> set[str]:
    """Labels that name more than one device (results of several machines together)."""
    devices: dict[str, set[str]] = defaultdict(set)
    for key in keys:
        devices[key[0]].add(key[1])
    return {label for label, names in devices.items() if len(names) > 1}


def line_names(keys: Iterable[LineKey]) -> dict[LineKey, str]:
    """How tables and legends name a line: the device only where the label is ambiguous.

    The lines of one table or figure share their operation and data type (or the
    table's rows are data types), so the name leaves both out.
    """
    ordered = sorted(set(keys), key=line_sort)
    ambiguous = ambiguous_labels(ordered)
    names = {}
    for key in ordered:
        name = f"{key.label} ({key.device})" if key.label in ambiguous else key.label
        names[key] = name + f" {key.variant}" + (f" T={key.tile}" if key.tile else "")
    return names


def median(point: PointRecord) -> float:
    """The median kernel time of a measured point."""
    return (point.kernel_s or {})["median"]


# ---------------------------------------------------------------------------
# Numbers and cells.


def three_digits(value: float) -> str:
    """At least three significant digits, never in exponent notation (12346, 1.23, 0.00123)."""
    if value == 0 or not math.isfinite(value):
        return str(value)
    decimals = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}"


def size_text(point: PointRecord) -> str:
    size = f"{point.M}×{point.K}·{point.K}×{point.N}"
    if point.batched or point.batch != 1:
        size = f"{point.batch}×{size}"
    return size


def time_cell(point: PointRecord | None) -> Cell:
    """A point's median kernel time in ms, flagged unless it is a verified time (a time
    above the device's peak is flagged untrusted, with a ``~`` where the run found it
    noisy)."""
    if point is None:
        return Cell("—")
    if point.measured and not point.trusted:
        return Cell(three_digits(median(point) * 1e3), "untrusted")
    if point.status == "ok" and "noisy" in point.flags:
        return Cell(f"{three_digits(median(point) * 1e3)}~")
    if point.status == "ok":
        return Cell(three_digits(median(point) * 1e3) if point.measured else "—")
    if point.status == "mismatch":
        return Cell(three_digits(median(point) * 1e3) if point.measured else "", "wrong")
    if point.status == "skipped":
        return Cell("skipped", "skipped")
    return Cell("", "error")


def number(value: Any) -> float | None:
    """``value`` as a float if it is a number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def bytes_text(count: Any) -> str:
    if number(count) is None or count <= 0:
        return "—"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            return f"{three_digits(count / scale)} {unit}"
    return f"{count} B"
