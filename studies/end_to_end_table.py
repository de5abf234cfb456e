"""Kernel and end-to-end medians per line and size, from results folders side by side:
the table of docs/notebook/measurement.md's "End-to-end time, one product" (issue 37).

    python studies/end_to_end_table.py NAME=RUN [NAME=RUN ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

from xbackend import results
from xbackend.measuring.timing import format_seconds


def main() -> None:
    runs = [arg.split("=", 1) for arg in sys.argv[1:]]
    rows: dict[tuple[str, str, str], dict[str, str]] = {}
    for name, folder in runs:
        for point in results.latest(results.load([Path(folder)]).points):
            if not point.measured:
                continue
            key = (point.label, point.variant, f"{point.M}×{point.K}·{point.K}×{point.N}")
            kernel = format_seconds((point.kernel_s or {})["median"])
            ends = format_seconds((point.end_to_end_s or {})["median"])
            rows.setdefault(key, {})[name] = f"{ends} (kernel {kernel}, {point.launches} launches)"
    names = [name for name, _ in runs]
    print("| line | size | " + " | ".join(f"end-to-end, {n}" for n in names) + " |")
    print("|---|---|" + "---|" * len(names))
    for (label, variant, size), found in rows.items():
        cells = " | ".join(found.get(n, "—") for n in names)
        print(f"| {label} {variant} | {size} | {cells} |")


if __name__ == "__main__":
    main()
