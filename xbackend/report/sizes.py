"""The report's table per size: every configuration's median kernel time with its
quartiles and relative noise, the end-to-end median, the speed-up over naive and, where
the run measured its device's ceilings, the share of its roof (``xbackend.tables``); a
time above the device's peak is flagged untrusted, a noisy one has a ``~`` after its
noise."""

from __future__ import annotations

from xbackend.clocks import clock_note
from xbackend.report.document import Block, Cell, Paragraph, Table
from xbackend.report.points import three_digits
from xbackend.results import PointRecord
from xbackend.results.records import IMPOSSIBLE
from xbackend.roofs import Roofs
from xbackend.tables import size_rows

_FLAGS = {"mismatch": "wrong", "error": "error", "skipped": "skipped"}


def _ms(value: object) -> str:
    return three_digits(value * 1e3) if isinstance(value, float) else "—"


def _share(value: object) -> str:
    return f"{three_digits(value * 100)}%" if isinstance(value, float) else ""


def _cells(row: dict[str, object], roofed: bool) -> list[Cell]:
    """One row of the table: a size and configuration."""
    size = f"{row['M']}×{row['K']}·{row['K']}×{row['N']}"
    flags = str(row["flags"]).split(",")
    flag = _FLAGS.get(str(row["status"]), "") or (
        "untrusted" if any(f in IMPOSSIBLE for f in flags) else ""
    )
    speedup = row["speedup_vs_naive"]
    noise = row["kernel_noise"]
    return [
        Cell(size),
        Cell(str(row["backend"])),
        Cell(str(row["op"]) + (f" ×{row['batch']}" if row["batch"] != 1 else "")),
        Cell(str(row["variant"])),
        Cell("" if row["tile"] is None else str(row["tile"])),
        Cell(str(row["dtype"])),
        Cell(_ms(row["kernel_median_s"]) if row["status"] != "skipped" else "skipped", flag),
        Cell(f"{_ms(row['kernel_q1_s'])} – {_ms(row['kernel_q3_s'])}"),
        Cell(
            f"{noise * 100:.2g}%" + ("~" if "noisy" in flags else "")
            if isinstance(noise, float)
            else "—"
        ),
        Cell(_ms(row["end_to_end_median_s"])),
        Cell(f"{three_digits(speedup)}×" if isinstance(speedup, float) else ""),
        *([Cell(_share(row["roof_share"]))] if roofed else []),
    ]


def size_table_blocks(points: list[PointRecord], roofs: Roofs | None = None) -> list[Block]:
    """A paragraph and one table, a row per size and configuration (with the share of
    its roof where ``roofs``, the runs' ceilings, has one)."""
    found = size_rows(points, roofs)
    roofed = any(row["roof_share"] is not None for row in found)
    rows = [_cells(row, roofed) for row in found]
    header = ["size", "backend", "op", "variant", "tile", "dtype", "kernel (ms)",
              "q1 – q3 (ms)", "noise", "end-to-end (ms)", "× naive",
              *(["roof"] if roofed else [])]  # fmt: skip
    note = clock_note(points)
    intro = Paragraph(
        (f"{note[0].upper()}{note[1:]}. " if note else "")
        + "Per size and configuration: median kernel time with its quartiles and relative "
        "noise (standard deviation over mean; ~: over the run's --max-noise), the median "
        "end-to-end time (with transfers), and the naive kernel's median time over this "
        "one's (same backend, device, operation, data type and size; verified points only). "
        "A time faster than the device's peak is flagged UNTRUSTED and left out of the "
        "speed-ups and figures."
        + (
            " Roof: the GFLOP/s reached over the roof of its device at its arithmetic "
            "intensity, min(compute ceiling, intensity × bandwidth), as the run measured "
            "them (see the roofline)."
            if roofed
            else ""
        )
    )
    return [intro, Table(header, rows, numeric=False)]
