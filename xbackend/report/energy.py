"""The report's energy per product: where ``--energy`` read the device's energy counter,
GFLOP per joule against size (``figures/energy.py``) and a table of each line's largest
verified point with its joules, watts and window (docs/energy.md). Runs without a reading
have no section."""

from __future__ import annotations

from xbackend.analysis.joules import gflops_per_joule, has_energy, joules
from xbackend.figures.energy import NAME, energy_figure, unread
from xbackend.figures.style import throttled
from xbackend.report.document import Block, Cell, Fold, Heading, Paragraph, Table
from xbackend.report.figures import FigureFolder, Section, side_figure
from xbackend.report.points import group, line_names, line_sort, size_text, three_digits
from xbackend.results import PointRecord

_CAPTION = (
    "GFLOP per joule against the output's elements, one line per backend and variant "
    "(hollow: noisy; a red cross: a wrong result)."
)
_HOW = (
    "After each point's timed samples, its product was launched back to back for the "
    "window --energy set, between two steps of the device's energy counter (NVML): joules "
    "per product are the difference over the products launched, GFLOP per joule the "
    "product's flops over them. The reading is the whole device's, its memory and idle "
    "parts included, and the host's time between batches, in which the GPU idles; "
    "not the uploads and downloads. One reading a point: no interval."
)


def _number(value: object) -> str:
    """A positive number of the record, or a dash (a results file is read, not trusted)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        return "—"
    return three_digits(float(value))


def energy_table(points: list[PointRecord]) -> Table | None:
    """One row per line: its largest verified, trusted point with a reading; None where
    no line has one."""
    read = [
        p for p in points
        if p.status == "ok" and p.trusted and not throttled(p) and joules(p) is not None
    ]  # fmt: skip
    lines = group(read, lambda p: (p.line_key, p.batch))
    if not lines:
        return None
    names = line_names(key for key, _ in lines)
    rows = []
    for key, batch in sorted(lines, key=lambda line: (line_sort(line[0]), line[1])):
        found = lines[(key, batch)]
        top = max(found, key=lambda p: (p.flops, p.M))
        energy = (top.state or {}).get("energy") or {}
        rows.append([
            Cell(names[key]), Cell(key.op + (f" ×{batch}" if batch != 1 else "")),
            Cell(key.dtype), Cell(size_text(top)), Cell(_number(joules(top))),
            Cell(_number(gflops_per_joule(top))), Cell(_number(energy.get("watts"))),
            Cell(_number(energy.get("window_s"))), Cell(str(len(found))),
        ])  # fmt: skip
    header = ["line", "op", "dtype", "largest size", "J per product", "GFLOP/J", "W",
              "window (s)", "sizes read"]  # fmt: skip
    return Table(header, rows, numeric=False)


def energy_section(points: list[PointRecord], folder: FigureFolder) -> Section:
    """The section, or nothing where no point holds a reading of its energy."""
    if not has_energy(points):
        return [], []
    blocks: list[Block] = [Heading("Energy per product", 2)]
    images, written = side_figure(points, folder, NAME, _CAPTION, lambda: energy_figure(points))
    blocks += images
    missing = unread(points)
    without = f" {missing} measured points have no reading and are left out." if missing else ""
    blocks.append(Paragraph(_HOW + without))
    table = energy_table(points)
    if table is not None:
        blocks.append(Fold(f"Each line's largest verified point ({len(table.rows)} rows)", [table]))
    return blocks, written
