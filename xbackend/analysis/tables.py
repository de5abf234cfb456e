"""Tables per size, and the selection of records that figures, tables and the report show.

* :func:`size_rows`: one row per size and configuration (median kernel time with its
  quartiles, the end-to-end median, and the speed-up over the naive kernel);
* :func:`size_table`: those rows for the terminal, one block per size;
* :func:`write_size_csv`: the same rows as ``sizes.csv`` in a results folder;
* :func:`select`: the records a ``--backends``/``--variants``/``--tile``/``--op``/
  ``--dtype`` filter keeps, or a one-line error naming the values present.

Each row carries the kernel time's relative noise (standard deviation over mean; absent
in older files), why sampling stopped, and the point's flags (``results.records.FLAGS``):
the terminal table marks a noisy point's noise with ``!``, and a point timed faster than
its device's peak (not ``trusted``) is listed with its flag but gives no speed-up.

The speed-up is the naive kernel's median time over this configuration's, on the same
backend, device, operation, data type, batch and size, from verified ("ok") and trusted
points only:
for ``tiled`` it is the speed-up of tiling; for the ladder and the vendor line, how far
each is from the naive kernel. The naive kernel of the same tile is preferred (the same
work-group shape), else the one that takes no tile, else the only one measured there.

Each row names the clock that timed its kernel (``clock``: the GPU's own clock inside the
kernels, the API's events, or the host's), and the terminal table ends with a line saying
which clock timed each backend's kernels (``clocks.clock_note``).

Each row also has the point's arithmetic intensity, its roof and the share of the roof it
reached (``xbackend.analysis.roofs``), where its run measured its device's ceilings: the terminal
table's ``roof`` column, shown where any row has one, ``↑`` after a share above 100%. The
rows take one set of ceilings per device, and a point faster than its device's measured
compute ceiling is flagged as one above its peak (``roofs.checked``).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from xbackend.analysis.clocks import clock_note
from xbackend.analysis.roofs import Roofs, checked, intensity, roof_of, roof_share
from xbackend.measuring.timing import format_seconds
from xbackend.results import PointRecord, latest
from xbackend.results.records import IMPOSSIBLE
from xbackend.safeio import atomic_write

SIZES_CSV = "sizes.csv"
# The variants that are not the ladder: the assignment's pair and the vendor's reference.
CORE_VARIANTS = ("naive", "tiled", "vendor")
ROW_FIELDS = (
    "M",
    "K",
    "N",
    "op",
    "batch",
    "backend",
    "device",
    "variant",
    "tile",
    "dtype",
    "status",
    "kernel_median_s",
    "kernel_q1_s",
    "kernel_q3_s",
    "end_to_end_median_s",
    "speedup_vs_naive",
    "kernel_noise",
    "stop",
    "flags",
    "reason",
    "intensity",
    "roof_gflops",
    "roof_share",
    "clock",
)

Row = dict[str, object]


def _size_sort(point: PointRecord) -> tuple[int, int, int, int]:
    return (point.M * point.N, point.M, point.K, point.N)


def _config_sort(point: PointRecord) -> tuple[object, ...]:
    variant = point.variant
    core = CORE_VARIANTS.index(variant) if variant in CORE_VARIANTS else len(CORE_VARIANTS)
    return (
        point.op,
        point.batch,
        point.label,
        point.device,
        point.dtype,
        core,
        variant,
        point.tile or 0,
    )


def _naive_partners(
    points: list[PointRecord],
) -> dict[tuple[object, ...], dict[int | None, PointRecord]]:
    partners: dict[tuple[object, ...], dict[int | None, PointRecord]] = {}
    for point in points:
        if _comparable(point) and point.variant == "naive":
            partners.setdefault(_pair_key(point), {})[point.tile] = point
    return partners


def _pair_key(point: PointRecord) -> tuple[object, ...]:
    return (
        point.label,
        point.device,
        point.op,
        point.dtype,
        point.batch,
        point.M,
        point.K,
        point.N,
    )


def _comparable(point: PointRecord) -> bool:
    """Whether a point's time may enter a speed-up: verified, trusted, and not zero."""
    return point.status == "ok" and point.trusted and bool(point.kernel_median_s)


def _speedup(point: PointRecord, naive: dict[int | None, PointRecord]) -> float | None:
    median = point.kernel_median_s
    if point.variant == "naive" or not _comparable(point) or not median:
        return None
    partner = naive.get(point.tile) or naive.get(None)
    if partner is None and len(naive) == 1:
        partner = next(iter(naive.values()))
    if partner is None or partner.kernel_median_s is None:
        return None
    return partner.kernel_median_s / median


def size_rows(records: Iterable[PointRecord], roofs: Roofs | None = None) -> list[Row]:
    """One row per size and configuration (line key), sizes from the smallest output.

    A point recorded more than once counts once, as last recorded. Times are in
    seconds, the noise a share (0.01: 1%); a value that does not exist (a skipped
    point's time, a naive row's speed-up, the noise in an older file, the roof of a
    run that measured no ceilings) is None. ``roofs``: the runs' ceilings (:func:`roofs`).
    """
    # One rule for times too fast to be true: the device's measured ceilings too.
    points = checked(latest(records), roofs or {})
    points.sort(key=lambda p: (_size_sort(p), _config_sort(p)))
    partners = _naive_partners(points)
    rows = []
    for point in points:
        row = _row(point, partners.get(_pair_key(point), {}))
        flop_per_byte, roof = intensity(point), roof_of(point, roofs or {})
        attainable = roof.attainable(point.dtype, flop_per_byte) if roof else None
        row["intensity"] = flop_per_byte
        row["roof_gflops"] = None if attainable is None else attainable / 1e9
        row["roof_share"] = roof_share(point, roofs or {})
        rows.append(row)
    return rows


def _row(point: PointRecord, naive: dict[int | None, PointRecord]) -> Row:
    kernel = (point.kernel_s or {}) if point.measured else {}
    end_to_end = (point.end_to_end_s or {}) if point.measured else {}
    noise = kernel.get("noise")
    return {
        "M": point.M,
        "K": point.K,
        "N": point.N,
        "op": point.op,
        "batch": point.batch,
        "backend": point.label,
        "device": point.device,
        "variant": point.variant,
        "tile": point.tile,
        "dtype": point.dtype,
        "status": point.status,
        "kernel_median_s": kernel.get("median"),
        "kernel_q1_s": kernel.get("q1"),
        "kernel_q3_s": kernel.get("q3"),
        "end_to_end_median_s": end_to_end.get("median"),
        "speedup_vs_naive": _speedup(point, naive),
        "kernel_noise": None if noise is None else float(noise),
        "stop": point.stop,
        "flags": ",".join(point.flags),
        "reason": point.reason,
        "clock": point.clock,
    }


# ---------------------------------------------------------------------------
# The terminal table.


def _seconds(value: object) -> str:
    return format_seconds(value) if isinstance(value, float) else "—"


def _quartiles(row: Row) -> str:
    q1, q3 = row["kernel_q1_s"], row["kernel_q3_s"]
    if not (isinstance(q1, float) and isinstance(q3, float)):
        return "—"
    return f"{_seconds(q1)} – {_seconds(q3)}"


def _speedup_text(row: Row) -> str:
    value = row["speedup_vs_naive"]
    return f"{value:.3g}×" if isinstance(value, float) else ""


def _noise_text(row: Row) -> str:
    """The relative noise in per cent, ``!`` after it where the run flagged it noisy."""
    value = row["kernel_noise"]
    if not isinstance(value, float):
        return "—"
    mark = "!" if "noisy" in str(row["flags"]).split(",") else ""
    return f"{value * 100:.2g}%{mark}"


def _roof_text(row: Row) -> str:
    """The share of its roof the point reached, in per cent; ``↑`` after one above 100%
    (its operands in a warm cache beat the DRAM's slope, or within the tolerance)."""
    value = row["roof_share"]
    if not isinstance(value, float):
        return ""
    return f"{value * 100:.2g}%" + ("↑" if value > 1 else "")


def _status_text(row: Row) -> str:
    """The status, with the flags that make a time untrusted (above the device's peak)."""
    flags = [flag for flag in str(row["flags"]).split(",") if flag in IMPOSSIBLE]
    return str(row["status"]) + (f" ({', '.join(flags)})" if flags else "")


# Columns: header, cell, and the order in which they go where the width is short
# (the highest number first; 0: never dropped). The first _LEFT are left-aligned.
_COLUMNS: tuple[tuple[str, Callable[[Row], str], int], ...] = (
    ("backend", lambda row: str(row["backend"]), 0),
    ("device", lambda row: str(row["device"]), 6),
    ("op", lambda row: str(row["op"]) + (f" ×{row['batch']}" if row["batch"] != 1 else ""), 2),
    ("variant", lambda row: str(row["variant"]), 0),
    ("tile", lambda row: "" if row["tile"] is None else str(row["tile"]), 1),
    ("dtype", lambda row: str(row["dtype"]), 2),
    ("status", _status_text, 1),
    ("kernel", lambda row: _seconds(row["kernel_median_s"]), 0),
    ("noise", _noise_text, 3),
    ("kernel q1 – q3", _quartiles, 5),
    ("end-to-end", lambda row: _seconds(row["end_to_end_median_s"]), 4),
    ("× naive", _speedup_text, 0),
    ("roof", _roof_text, 3),  # only where a row has one (the run measured its ceilings)
)
_LEFT = 7


def _fit(cells: list[list[str]], width: int | None, columns: int) -> list[int]:
    """The columns shown: all where they fit in ``width``, else the most important."""
    shown = list(range(columns))
    widths = [max(len(row[i]) for row in cells) for i in shown]
    while width is not None and sum(widths[i] + 2 for i in shown) - 2 > width:
        droppable = [i for i in shown if _COLUMNS[i][2] > 0]
        if not droppable:
            break
        shown.remove(max(droppable, key=lambda i: _COLUMNS[i][2]))
    return shown


def size_table(
    records: Iterable[PointRecord], width: int | None = None, roofs: Roofs | None = None
) -> str:
    """A terminal table: one block per size, one row per configuration.

    ``width``: the terminal's columns; the least needed columns are left out
    until the table fits, and a line still longer is cut. None: no limit.
    ``roofs``: the runs' ceilings (``roofs.roofs``), for the ``roof`` column.
    """
    records = list(records)
    rows = size_rows(records, roofs)
    if not rows:
        return "no points"
    columns = len(_COLUMNS) - (not any(row["roof_share"] is not None for row in rows))
    header = [name for name, _, _ in _COLUMNS[:columns]]
    cells = [header, *([cell(row) for _, cell, _ in _COLUMNS[:columns]] for row in rows)]
    shown = _fit(cells, width, columns)
    widths = {i: max(len(row[i]) for row in cells) for i in shown}

    def line(row: list[str]) -> str:
        text = "  ".join(
            row[i].ljust(widths[i]) if i < _LEFT else row[i].rjust(widths[i]) for i in shown
        )
        text = text.rstrip()
        return text if width is None or len(text) <= width else text[: max(1, width - 1)] + "…"

    lines: list[str] = []
    size = None
    for row, row_cells in zip(rows, cells[1:], strict=True):
        if (row["M"], row["K"], row["N"]) != size:
            size = (row["M"], row["K"], row["N"])
            M, K, N = size
            if lines:
                lines.append("")
            lines.append(line([f"size {M}×{K} · {K}×{N}", *[""] * (len(header) - 1)]).strip())
            lines.append(line(header))
            lines.append(line(["-" * widths.get(i, 0) for i in range(len(header))]))
        lines.append(line(row_cells))
    note = clock_note(records)  # which clock timed the kernels, by backend
    if note and width is not None and len(note) > width:
        note = note[: max(1, width - 1)] + "…"
    return "\n".join([*lines, "", note] if note else lines)


# ---------------------------------------------------------------------------
# The CSV.


def _csv_value(value: object) -> object:
    return "" if value is None else value


def write_size_csv(
    records: Iterable[PointRecord], folder: Path, roofs: Roofs | None = None
) -> Path:
    """Write :func:`size_rows` as ``sizes.csv`` into ``folder``, whole; return its path
    (``roofs``: the runs' ceilings, for the columns ``intensity`` in FLOP/byte,
    ``roof_gflops`` and ``roof_share``, empty without them)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(ROW_FIELDS)
    for row in size_rows(records, roofs):
        writer.writerow([_csv_value(row[field]) for field in ROW_FIELDS])
    path = Path(folder) / SIZES_CSV
    atomic_write(path, buffer.getvalue())
    return path


# ---------------------------------------------------------------------------
# Selecting records.


def _words(values: str | Sequence[str] | None) -> list[str] | None:
    """A filter's values, from a comma list or a sequence; None or empty: no filter."""
    if values is None:
        return None
    items = values.split(",") if isinstance(values, str) else list(values)
    words = [str(item).strip() for item in items if str(item).strip()]
    return words or None


def _variant_matches(words: list[str]) -> Callable[[PointRecord], bool]:
    if "all" in words:
        return lambda point: True
    ladder = "ladder" in words
    return lambda point: point.variant in words or (ladder and point.variant not in CORE_VARIANTS)


def _tile_matches(words: list[str]) -> Callable[[PointRecord], bool]:
    tiles: set[int | None] = set()
    for word in words:
        if word.lower() in ("none", "-"):
            tiles.add(None)
        elif word.isdigit():
            tiles.add(int(word))
        else:
            raise ValueError(f"--tile: {word!r} is not a tile size (a number, or none)")
    return lambda point: point.tile in tiles


def _present(points: list[PointRecord], value: Callable[[PointRecord], object]) -> str:
    found = sorted({str(value(point)) for point in points})
    return ", ".join(found) or "none"


def select(
    records: Iterable[PointRecord],
    *,
    backends: str | Sequence[str] | None = None,
    variants: str | Sequence[str] | None = None,
    tiles: str | Sequence[str] | None = None,
    ops: str | Sequence[str] | None = None,
    dtypes: str | Sequence[str] | None = None,
) -> list[PointRecord]:
    """The records every given filter keeps; a filter of None keeps everything.

    Each filter is a comma list (or a sequence) of values, any of which may match:
    ``backends`` the record's label (``opencl:pocl``) or backend name (``opencl``);
    ``variants`` a variant, ``ladder`` (every variant but naive, tiled and vendor) or
    ``all``; ``tiles`` a tile size or ``none``; ``ops`` and ``dtypes`` their names.
    A filter that leaves nothing raises a ValueError naming the values present.
    """
    points = list(records)
    filters: list[
        tuple[
            str,
            list[str] | None,
            Callable[[list[str]], Callable[[PointRecord], bool]],
            Callable[[PointRecord], object],
        ]
    ] = [
        (
            "--backends",
            _words(backends),
            lambda w: lambda p: p.label in w or p.backend in w,
            lambda p: p.label,
        ),
        ("--variants", _words(variants), _variant_matches, lambda p: p.variant),
        ("--tile", _words(tiles), _tile_matches, lambda p: "none" if p.tile is None else p.tile),
        ("--op", _words(ops), lambda w: lambda p: p.op in w, lambda p: p.op),
        ("--dtype", _words(dtypes), lambda w: lambda p: p.dtype in w, lambda p: p.dtype),
    ]
    for option, words, matches, shown in filters:
        if words is None:
            continue
        keep = matches(words)
        kept = [point for point in points if keep(point)]
        if not kept:
            raise ValueError(
                f"{option} {','.join(words)} matches no point; present: {_present(points, shown)}"
            )
        points = kept
    return points
