"""The counters of profiled points as a table: on the console, and as ``counters.csv``.

One row per point, in the order it ran: its configuration, whether its result was right,
then each counter of ``metrics.COUNTERS`` and how many times fewer global load requests
it made than the naive kernel of the same size.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from xbackend.profiling.metrics import COUNTERS, LOAD_REQUESTS, fall, scaled, value
from xbackend.results import PointRecord

CSV_NAME = "counters.csv"
_KEYS = ("run_id", "label", "device", "op", "variant", "tile", "dtype", "batch", "M", "K", "N",
         "status")  # fmt: skip
FALL_COLUMN = "load_requests_fall_vs_naive"


def _size(point: PointRecord) -> str:
    batch = f"{point.batch}×" if point.batched else ""
    return f"{batch}{point.M}×{point.K}·{point.K}×{point.N}"


def rows(points: Sequence[PointRecord]) -> list[list[str]]:
    """The console table's rows, its header first."""
    header = ["backend", "size", "variant", "tile", "dtype", "status"]
    header += [counter.title for counter in COUNTERS]
    header.append("requests ÷ naive")
    found = [header]
    for point in points:
        row = [point.label, _size(point), point.variant, str(point.tile or "—"), point.dtype,
               point.status]  # fmt: skip
        for counter in COUNTERS:
            number = value(point, counter)
            row.append("—" if number is None else scaled(number, counter.unit))
        ratio = fall(point, points, LOAD_REQUESTS)
        row.append("—" if ratio is None else f"{ratio:.3g}×")
        found.append(row)
    return found


def table(points: Sequence[PointRecord]) -> str:
    """The counters of every point, aligned for a terminal; then why points did not run."""
    found = rows(points)
    widths = [max(len(row[i]) for row in found) for i in range(len(found[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
             for row in found]  # fmt: skip
    lines.insert(1, "  ".join("-" * width for width in widths))
    for point in points:
        if point.status != "ok" and point.reason:
            tile = f" T={point.tile}" if point.tile else ""
            first = point.reason.splitlines()[0][:100]
            lines.append(f"  {point.variant}{tile} {_size(point)}: {point.status}: {first}")
    return "\n".join(lines)


def csv_text(points: Sequence[PointRecord], kernels: Sequence[Sequence[str]]) -> str:
    """``counters.csv``: one row per point, the counters in base units (seconds, bytes,
    counts, percent), and the functions of the kernels that were counted."""
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow([*_KEYS, "kernels", *(c.column for c in COUNTERS), FALL_COLUMN])
    for point, names in zip(points, kernels, strict=True):
        fields = point.to_dict()
        row: list[object] = ["" if fields.get(key) is None else fields[key] for key in _KEYS]
        row.append(" ".join(names))
        for counter in COUNTERS:
            number = value(point, counter)
            row.append("" if number is None else repr(number))
        ratio = fall(point, points, LOAD_REQUESTS)
        row.append("" if ratio is None else repr(ratio))
        writer.writerow(row)
    return text.getvalue()
