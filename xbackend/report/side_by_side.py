"""The report's machines side by side: where results of several machines (a host and its
device) measured the same configuration, each machine's times and its ratio to the base
machine's, with the 95% bootstrap interval of ``xbackend diff``
(``xbackend.analysis.side_by_side``); the figures of ``figures/machines.py``; and
``machines.csv`` next to the report."""

from __future__ import annotations

from collections.abc import Sequence

from xbackend.analysis.diff import DEFAULT_THRESHOLD, UNTRUSTED, VERDICTS, Comparison
from xbackend.analysis.side_by_side import (
    CSV_NAME,
    Machine,
    Row,
    base_machine,
    compare_machines,
    line_name,
    machines,
    size_name,
    write_csv,
)
from xbackend.figures.machines import figures as machine_figures
from xbackend.report.document import Block, Cell, Heading, Items, Paragraph, Table
from xbackend.report.figures import FigureFolder, Section, save
from xbackend.report.points import three_digits, time_cell
from xbackend.results import PointRecord

HEADING = "The machines side by side"
_CAPTIONS = {
    "machines": "Each machine's median time over the base machine's, per configuration at "
    "the largest size both timed (dot: kernel, square: end-to-end; bar: 95% interval).",
    "machines_by_size": "Each machine's median time over the base machine's against size, "
    "per configuration (solid: kernel, with its 95% interval; dotted: end-to-end).",
}


def _ratio_cell(comparison: Comparison | None) -> Cell:
    """A ratio machine/base with its interval and verdict; why there is none; or a dash."""
    if comparison is None:
        return Cell("—")
    flag = "wrong" if "wrong result" in comparison.note else ""
    interval = comparison.interval
    if interval is None or comparison.verdict not in VERDICTS:
        return Cell(comparison.verdict, "untrusted" if comparison.verdict == UNTRUSTED else flag)
    ratio, low, high = (three_digits(value) for value in interval)
    return Cell(f"{ratio} ({low}–{high}) {comparison.verdict.lower()}", flag)


def _end_to_end_cell(point: PointRecord | None) -> Cell:
    if point is None or not point.measured:
        return Cell("—")
    median = (point.end_to_end_s or {}).get("median")
    return Cell("—" if median is None else three_digits(median * 1e3))


def _table(rows: Sequence[Row], order: Sequence[Machine]) -> Table:
    """One row per configuration and size: each machine's kernel median, each other
    machine's kernel ratio, then the same for the end-to-end time."""
    present = {side.machine for row in rows for side in row.sides}
    shown = [machine for machine in order if machine in present]
    based = [m for m in shown if any(r.base is not None and r.base != m for r in rows)]
    header = ["configuration", "size"]
    header += [f"{m.name}: kernel (ms)" for m in shown]
    header += [f"{m.name} / base: kernel" for m in based]
    header += [f"{m.name}: end-to-end (ms)" for m in shown]
    header += [f"{m.name} / base: end-to-end" for m in based]
    cells = []
    for row in rows:
        sides = [row.side(machine) for machine in shown]
        others = [row.side(machine) for machine in based]
        cells.append(
            [
                Cell(line_name(row.configuration, label=False)),
                Cell(size_name(row.configuration)),
                *(time_cell(None if side is None else side.point) for side in sides),
                *(_ratio_cell(None if side is None else side.kernel) for side in others),
                *(_end_to_end_cell(None if side is None else side.point) for side in sides),
                *(_ratio_cell(None if side is None else side.end_to_end) for side in others),
            ]
        )
    return Table(header, cells)


def _intro(base: str, threshold: float) -> Paragraph:
    return Paragraph(
        "The configurations (backend, operation, variant, tile, data type and size) that "
        "more than one machine measured, a machine being a host and its device. Times are "
        f"median times in ms; a ratio is the machine's median over the base machine's "
        f"({base}; below 1: faster than the base), with its 95% bootstrap "
        "interval, as xbackend diff gives it, and a verdict: faster or slower where the "
        f"whole interval lies beyond ±{threshold * 100:.3g}%, the same within it, uncertain "
        "across a bound."
    )


def machines_section(
    points: Sequence[PointRecord],
    folder: FigureFolder,
    *,
    base: str | None = None,
    threshold: float = DEFAULT_THRESHOLD,
) -> Section:
    """The section, where more than one machine measured a configuration of ``points``
    (else nothing); ``machines.csv`` is written into the report's folder. ``base``: the
    base machine by host, device or name (default: the first met); a ValueError where
    no machine is that."""
    chosen = base_machine(points, base)  # a machine asked for must be there
    rows = compare_machines(points, base=base, threshold=threshold)
    if not rows or chosen is None:
        return [], []
    measured = [side.point for row in rows for side in row.sides]
    order = machines(measured, chosen)
    blocks: list[Block] = [Heading(HEADING, 2), _intro(chosen.name, threshold)]
    labels = [Cell(m.name + (" (base)" if m == chosen else "")) for m in order]
    blocks += [Paragraph("The machines:"), Items(labels)]
    written = [write_csv(rows, folder.out)]
    for name, figure in machine_figures(rows, threshold):
        image, paths = save(figure, folder, name, _CAPTIONS[name])
        blocks.append(image)
        written += paths
    by_label: dict[str, list[Row]] = {}
    for row in rows:
        by_label.setdefault(row.configuration.label, []).append(row)
    for label, part in by_label.items():
        blocks.append(Heading(label, 3))
        blocks.append(_table(part, order))
    blocks.append(Paragraph(f"Every row, one line per machine: {CSV_NAME}, next to this report."))
    return blocks, written
