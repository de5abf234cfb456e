"""Draw the ladder of one size from a saved ladder_benchmark.py output: one panel per backend.

    python scripts/ladder_figure.py docs/results/h100/ladder.txt docs/results/h100/ladder_4096.png

Reads the table printed last (TFLOP/s and "of cuBLAS" per backend), keeps each variant's
best tile at the chosen size, and draws horizontal bars in ladder order, labelled with
TFLOP/s and the share of cuBLAS. Draws nothing it did not read.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def read_table(text: str, op: str = "mm") -> tuple[list[str], list[list[str]]]:
    """The header and rows of the last ``op`` table in a ladder_benchmark.py output
    (mm: shares "of cuBLAS"; rmm: "of sums+cuBLAS")."""
    lines = text.splitlines()
    share = "of sums+cuBLAS" if op == "rmm" else "of cuBLAS "
    start = max(
        i for i, line in enumerate(lines) if line.startswith("size ") and share in line + " "
    )
    header = re.split(r"\s{2,}", lines[start].strip())
    rows = [re.split(r"\s{2,}", line.strip()) for line in lines[start + 2 :] if "·" in line]
    return header, [row for row in rows if len(row) == len(header)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ladder", type=Path, help="a saved ladder_benchmark.py output")
    parser.add_argument("figure", type=Path, help="the PNG to write")
    parser.add_argument("--size", default="4096×4096 · 4096×4096", help="which size to draw")
    parser.add_argument("--op", choices=("mm", "rmm"), default="mm", help="which table to draw")
    args = parser.parse_args()
    header, rows = read_table(args.ladder.read_text(encoding="utf-8"), args.op)
    # Each backend's speed column, and its share of cuBLAS (or of pair sums + cuBLAS)
    # right after it: "89.8% [88.1–91.0]", the share and its 95% interval.
    columns = [i for i, name in enumerate(header) if name.endswith(" TFLOP/s")]
    backends = [header[i].removesuffix(" TFLOP/s") for i in columns]
    figure, axes = plt.subplots(1, len(backends), figsize=(6 * len(backends), 6), squeeze=False)
    for panel, (axis, backend) in enumerate(zip(axes[0], backends, strict=True)):
        best: dict[str, tuple[float, str]] = {}  # variant -> (TFLOP/s, share), in ladder order
        for row in rows:
            speed, share = row[columns[panel]], row[columns[panel] + 1]
            if row[0] != args.size or not re.fullmatch(r"[\d.]+", speed):
                continue
            if row[1] not in best or float(speed) > best[row[1]][0]:
                best[row[1]] = (float(speed), share)
        names = list(best)[::-1]
        axis.barh(names, [best[name][0] for name in names], color="tab:blue")
        for y, name in enumerate(names):
            tflops, share = best[name]
            axis.text(tflops, y, f" {tflops:.1f} ({share})", va="center", fontsize=8)
        reference = "pair sums + cuBLAS" if args.op == "rmm" else "the cuBLAS line"
        axis.set_title(f"{backend} {args.op}: {args.size}")
        axis.set_xlabel(f"TFLOP/s (float32; share of {reference})")
        axis.set_xlim(0, max((v for v, _ in best.values()), default=1) * 1.3)
    figure.tight_layout()
    args.figure.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(args.figure, dpi=110)
    print(f"wrote {args.figure}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
