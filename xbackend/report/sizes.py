"""The report's table per size: every configuration's median kernel time with its
quartiles and relative noise, the end-to-end median, the speed-up over naive and, where
the run measured its device's ceilings, the share of its roof (``xbackend.analysis.tables``).

A run of many sizes shows a compact table of its key sizes (the smallest, the middle and
the largest); the whole table is folded away below it and written as ``sizes.csv`` in the
report's figures folder (the columns of a run's own ``sizes.csv``). A time faster than
its device can run is flagged untrusted, a noisy one has a ``~`` after its noise, a
share above 100% an ``↑``.
"""

from __future__ import annotations

import os
from pathlib import Path

from xbackend.analysis.clocks import clock_note
from xbackend.analysis.roofs import Roofs
from xbackend.analysis.tables import Row, size_rows, write_size_csv
from xbackend.report.document import Block, Cell, Fold, Paragraph, Table
from xbackend.report.figures import FigureFolder
from xbackend.report.points import three_digits
from xbackend.results import PointRecord
from xbackend.results.records import IMPOSSIBLE

_FLAGS = {"mismatch": "wrong", "error": "error", "skipped": "skipped"}
KEY_SIZES = 3  # the smallest, the middle and the largest
_HEADER = ["size", "backend", "op", "variant", "tile", "dtype", "kernel (ms)", "q1 – q3 (ms)",
           "noise", "end-to-end (ms)", "× naive"]  # fmt: skip


def _ms(value: object) -> str:
    return three_digits(value * 1e3) if isinstance(value, float) else "—"


def _share(value: object) -> str:
    """A share of the roof in per cent, ``↑`` after one above 100%."""
    if not isinstance(value, float):
        return ""
    return f"{three_digits(value * 100)}%" + ("↑" if value > 1 else "")


def _noise(value: object, flags: list[str]) -> str:
    """The relative noise in per cent, as a number (200%, never 2e+02%); ``~``: noisy."""
    if not isinstance(value, float):
        return "—"
    percent = value * 100
    text = f"{percent:.2g}" if 0.01 <= percent < 100 else f"{percent:.0f}"
    return ("<0.01" if 0 < percent < 0.01 else text) + "%" + ("~" if "noisy" in flags else "")


def _cells(row: Row, roofed: bool) -> list[Cell]:
    """One row of the table: a size and configuration."""
    size = f"{row['M']}×{row['K']}·{row['K']}×{row['N']}"
    flags = str(row["flags"]).split(",")
    flag = _FLAGS.get(str(row["status"]), "") or (
        "untrusted" if any(f in IMPOSSIBLE for f in flags) else ""
    )
    speedup = row["speedup_vs_naive"]
    return [
        Cell(size),
        Cell(str(row["backend"])),
        Cell(str(row["op"]) + (f" ×{row['batch']}" if row["batch"] != 1 else "")),
        Cell(str(row["variant"])),
        Cell("" if row["tile"] is None else str(row["tile"])),
        Cell(str(row["dtype"])),
        Cell(_ms(row["kernel_median_s"]) if row["status"] != "skipped" else "skipped", flag),
        Cell(f"{_ms(row['kernel_q1_s'])} – {_ms(row['kernel_q3_s'])}"),
        Cell(_noise(row["kernel_noise"], flags)),
        Cell(_ms(row["end_to_end_median_s"])),
        Cell(f"{three_digits(speedup)}×" if isinstance(speedup, float) else ""),
        *([Cell(_share(row["roof_share"]))] if roofed else []),
    ]


def _size(row: Row) -> tuple[int, int, int]:
    return (int(str(row["M"])), int(str(row["K"])), int(str(row["N"])))


def key_sizes(rows: list[Row]) -> list[tuple[int, int, int]]:
    """The smallest, the middle and the largest size of the rows (sorted from the
    smallest output, as ``size_rows`` gives them); every size where there are few."""
    sizes = list(dict.fromkeys(_size(row) for row in rows))
    if len(sizes) <= KEY_SIZES:
        return sizes
    return [sizes[0], sizes[(len(sizes) - 1) // 2], sizes[-1]]


def _intro(points: list[PointRecord], roofed: bool) -> list[Block]:
    """A line that says what the table holds, and every column's meaning folded away."""
    short = Paragraph(
        "Median kernel time per size and configuration, its quartiles and noise (~: noisy), "
        "the end-to-end time, the speed-up over naive"
        + (", the share of its roof (↑: above 100%)" if roofed else "")
        + "; UNTRUSTED: timed faster than its device can run."
    )
    note = clock_note(points)
    return [short, Fold("How to read the table: every column and flag", [_meaning(note, roofed)])]


def _meaning(note: str, roofed: bool) -> Paragraph:
    return Paragraph(
        (f"{note[0].upper()}{note[1:]}. " if note else "")
        + "Per size and configuration: median kernel time with its quartiles and relative "
        "noise (standard deviation over mean; ~: noisy, the 95% interval of the median "
        "wider than the ±2.5% verdicts need), the median end-to-end time (with transfers), "
        "and the naive kernel's median time over this one's (same backend, device, "
        "operation, data type and size; verified points only). UNTRUSTED: timed faster "
        "than its device can run, beyond the theoretical peak the run derived from the "
        "device's clock and units (backends/peaks.py) or, by more than 5%, beyond the "
        "highest compute ceiling measured on the device (the roofline's); left out of "
        "speed-ups, shares and figures."
        + (
            " Roof: the GFLOP/s reached over its device's roof at its arithmetic intensity, "
            "min(compute ceiling, intensity × bandwidth), one set of measured ceilings per "
            "device (see the roofline); ↑: above 100%, where operands in a warm cache beat "
            "the DRAM's slope, or within the 5% tolerance."
            if roofed
            else ""
        )
    )


def size_table_blocks(
    points: list[PointRecord], roofs: Roofs | None = None, folder: FigureFolder | None = None
) -> tuple[list[Block], list[Path]]:
    """A paragraph and the table, a row per size and configuration (with the share of its
    roof where ``roofs``, the runs' ceilings, has one); where the points have more sizes
    than :data:`KEY_SIZES`, a table of the key sizes, and the whole one folded away and
    written as sizes.csv in ``folder`` (None: not written).
    Returns the blocks and the files written."""
    found = size_rows(points, roofs)
    roofed = any(row["roof_share"] is not None for row in found)
    header = [*_HEADER, *(["roof"] if roofed else [])]
    blocks: list[Block] = _intro(points, roofed)
    keys = key_sizes(found)
    whole = Table(header, [_cells(row, roofed) for row in found], numeric=False)
    if len(keys) == len({_size(row) for row in found}):
        return [*blocks, whole], []
    names = [f"{M}×{K}·{K}×{N}" for M, K, N in keys]
    sizes = len({_size(row) for row in found})
    written, where = [], ""
    if folder is not None:
        written = [write_size_csv(points, folder.make(), roofs)]
        where = f" and in {Path(os.path.relpath(written[0], folder.out)).as_posix()}"
    blocks.append(
        Paragraph(
            f"The key sizes of the {sizes} measured: the smallest ({names[0]}), the middle "
            f"({names[1]}) and the largest ({names[2]}). The whole table, {len(found)} rows, "
            f"is folded below{where}."
        )
    )
    chosen = set(keys)
    blocks.append(_compact(header, [_cells(row, roofed) for row in found if _size(row) in chosen]))
    blocks.append(Fold(f"The whole table: {len(found)} rows, every size", [whole]))
    return blocks, written


_SAME = ("op", "tile", "dtype")  # columns left out of the key sizes' table where one value


def _compact(header: list[str], rows: list[list[Cell]]) -> Table:
    """The key sizes' table, without the columns of ``_SAME`` that hold one value in every
    row: the header names it instead ("dtype: float32")."""
    single = {
        place
        for place, name in enumerate(header)
        if name in _SAME and len({row[place].text for row in rows}) == 1
    }
    names = [name if place not in single else "" for place, name in enumerate(header)]
    said = [f"{header[place]}: {rows[0][place].text or '—'}" for place in sorted(single)]
    kept = [place for place in range(len(header)) if place not in single]
    if said:
        names[0] = f"size ({', '.join(said)})"
    return Table([names[place] for place in kept], [[row[p] for p in kept] for row in rows], False)
