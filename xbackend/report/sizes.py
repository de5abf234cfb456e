"""The report's table per size: every configuration's median kernel time with its
quartiles and relative noise, the end-to-end median and the speed-up over naive
(``xbackend.tables``); a time above the device's peak is flagged untrusted, a noisy one
has a ``~`` after its noise."""

from __future__ import annotations

from xbackend.report.document import Block, Cell, Paragraph, Table
from xbackend.report.points import three_digits
from xbackend.results import PointRecord
from xbackend.results.records import IMPOSSIBLE
from xbackend.tables import size_rows

_FLAGS = {"mismatch": "wrong", "error": "error", "skipped": "skipped"}


def _ms(value: object) -> str:
    return three_digits(value * 1e3) if isinstance(value, float) else "—"


def size_table_blocks(points: list[PointRecord]) -> list[Block]:
    """A paragraph and one table, a row per size and configuration."""
    rows = []
    for row in size_rows(points):
        size = f"{row['M']}×{row['K']}·{row['K']}×{row['N']}"
        flags = str(row["flags"]).split(",")
        flag = _FLAGS.get(str(row["status"]), "") or (
            "untrusted" if any(f in IMPOSSIBLE for f in flags) else ""
        )
        speedup = row["speedup_vs_naive"]
        noise = row["kernel_noise"]
        rows.append(
            [
                Cell(size),
                Cell(str(row["backend"])),
                Cell(str(row["op"]) + (f" ×{row['batch']}" if row["batch"] != 1 else "")),
                Cell(str(row["variant"])),
                Cell("" if row["tile"] is None else str(row["tile"])),
                Cell(str(row["dtype"])),
                Cell(
                    _ms(row["kernel_median_s"]) if row["status"] != "skipped" else "skipped", flag
                ),
                Cell(f"{_ms(row['kernel_q1_s'])} – {_ms(row['kernel_q3_s'])}"),
                Cell(
                    f"{noise * 100:.2g}%" + ("~" if "noisy" in flags else "")
                    if isinstance(noise, float)
                    else "—"
                ),
                Cell(_ms(row["end_to_end_median_s"])),
                Cell(f"{three_digits(speedup)}×" if isinstance(speedup, float) else ""),
            ]
        )
    header = ["size", "backend", "op", "variant", "tile", "dtype", "kernel (ms)",
              "q1 – q3 (ms)", "noise", "end-to-end (ms)", "× naive"]  # fmt: skip
    intro = Paragraph(
        "Per size and configuration: median kernel time with its quartiles and relative "
        "noise (standard deviation over mean; ~: over the run's --max-noise), the median "
        "end-to-end time (with transfers), and the naive kernel's median time over this "
        "one's (same backend, device, operation, data type and size; verified points only). "
        "A time faster than the device's peak is flagged UNTRUSTED and left out of the "
        "speed-ups and figures."
    )
    return [intro, Table(header, rows, numeric=False)]
