"""``xbackend diff A B``: two runs compared point by point, with a verdict for each point
(FASTER, SLOWER, SAME, UNCERTAIN) from a bootstrap interval of the ratio of medians
(``xbackend.analysis.diff``), and where both read its energy, its joules per product (MORE, LESS,
WITHIN a fixed tolerance: ``xbackend.analysis.joules``); a table on the terminal, ``diff.csv`` and
``diff.png``."""

from __future__ import annotations

import argparse
import csv
import io
import shutil
import sys
from pathlib import Path
from typing import Any

import xbackend.cli.arguments as arguments
from xbackend.analysis import diff, floors, joules
from xbackend.cli.results_commands import add_filters, selected
from xbackend.measuring.timing import format_seconds
from xbackend.results import JSONL_NAME, Loaded, latest, load, warn_on_stderr
from xbackend.results.reading import printable
from xbackend.safeio import atomic_write, output_folder

CSV_NAME = "diff.csv"
FIGURE_NAME = "diff"
# No point measured in both runs: nothing was compared, and a gate must not pass on it.
EXIT_NOTHING_COMPARED = 3
_EXIT_STATUSES = f"""exit status:
  0  points were compared (and none failed --fail-on)
  1  --fail-on: a point is slower, faster or either, as asked
  2  a usage error, or results that cannot be read
  {EXIT_NOTHING_COMPARED}  no point was compared: none measured in both runs (one run empty or
     header only, the two disjoint, every point of one failed or skipped), whatever
     --fail-on says: a CI gate never passes on nothing
"""


# A minimum effect: from 0 up to (not including) 100%.
threshold = arguments.share(0.0, 1.0, low_included=True)


def add_parser(commands: Any) -> None:
    command: argparse.ArgumentParser = commands.add_parser(
        "diff",
        help="compare two runs point by point: faster, slower, the same, or uncertain",
        description="Match the points of two results folders (or results.jsonl files) by "
        "configuration and size, and give each a verdict from a bootstrap 95% interval of "
        "the ratio of median times B/A: SLOWER if it lies above 1+threshold, FASTER below "
        "1-threshold, SAME within both, UNCERTAIN otherwise. A kernel time's threshold is "
        "at least its A/A floor: the largest change runs of the same plan showed for its "
        "clock and the decade of its time (--floors). Writes diff.csv and diff.png "
        "(beyond a thousand points, the share of points at each ratio, per backend). "
        "A point's host is part of it: where a run holds the same points from several "
        "hosts, they are compared host by host. Where both runs read a point's energy "
        "(compare --energy), its joules per product B/A are compared too: MORE or LESS "
        "beyond --energy-tolerance, WITHIN it (one reading a point: no interval, and no "
        "A/A floor; docs/energy.md).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_EXIT_STATUSES,
    )
    command.add_argument("a", type=Path, metavar="A", help="the baseline run's results")
    command.add_argument("b", type=Path, metavar="B", help="the run compared with it")
    command.add_argument(
        "--threshold", type=threshold, default=diff.DEFAULT_THRESHOLD, metavar="SHARE",
        help="the smallest change that counts, e.g. 5%% or 0.05 (default 5%%: two runs of "
        "the same plan differ by up to 10%% for kernels of a few µs; docs/notebook/measurement.md)",
    )  # fmt: skip
    _add_floor_options(command)
    command.add_argument(
        "--fail-on", choices=tuple(diff.FAIL_ON), default=None,
        help="exit with status 1 where a point is slower, faster, or either (changed)",
    )  # fmt: skip
    times = command.add_mutually_exclusive_group()
    times.add_argument(
        "--kernel", dest="time", action="store_const", const="kernel",
        help="compare the kernel times (the default)",
    )  # fmt: skip
    times.add_argument(
        "--end-to-end", dest="time", action="store_const", const="end-to-end",
        help="compare the end-to-end times, transfers included",
    )  # fmt: skip
    command.set_defaults(time="kernel")
    command.add_argument(
        "--any-device", action="store_true",
        help="match points by backend label whatever their device (two machines' runs)",
    )  # fmt: skip
    for side in ("a", "b"):
        command.add_argument(
            f"--{side}-host", metavar="HOST", default=None,
            help=f"compare only the points {side.upper()} holds from HOST (a run holding "
            "the same points from several hosts is otherwise compared host by host)",
        )  # fmt: skip
    command.add_argument(
        "--out", type=Path, default=None,
        help="folder for diff.csv and diff.png (default: results/diff-<date-time>)",
    )  # fmt: skip
    command.add_argument("--no-plots", action="store_true", help="write no figure")
    add_filters(command)
    command.set_defaults(func=run)


def _add_floor_options(command: argparse.ArgumentParser) -> None:
    """--floors and --write-floors: the A/A floors a verdict must clear (analysis/floors.py); and
    --energy-tolerance, what a change of joules must clear (no floor: analysis/joules.py)."""
    command.add_argument(
        "--floors", default=None, metavar="FILE",
        help="the A/A floors (default: those measured on xbackend's machines, "
        f"{floors.FLOORS_FILE.name}; 'none': the threshold alone)",
    )  # fmt: skip
    command.add_argument(
        "--write-floors", type=Path, default=None, metavar="FILE",
        help="A and B are two runs of the same plan: add the changes they show to the "
        "floors in FILE (made if missing; each kind keeps its largest), for --floors",
    )  # fmt: skip
    command.add_argument(
        "--energy-tolerance", type=threshold, default=joules.TOLERANCE, metavar="SHARE",
        help="how far a point's joules per product may move before it counts, e.g. 10%% "
        "(default 10%%: two identical runs on an H200 read within 4.2%%; a fixed "
        "tolerance, not a floor measured per kind: docs/energy.md)",
    )  # fmt: skip


def _name(given: Path) -> str:
    """How the figure names a run: its folder."""
    path = given.parent if given.name == JSONL_NAME else given
    return path.name or str(given)


def _sides(args: argparse.Namespace) -> tuple[Loaded, Loaded]:
    """A's and B's records, each point as last recorded on its host, after the filters."""
    sides = []
    for given, host in ((args.a, args.a_host), (args.b, args.b_host)):
        loaded = load([given], warn=warn_on_stderr)
        points = latest(loaded.points)
        if host is not None:
            points = [p for p in points if p.host == host]
            if not points:
                found = ", ".join(sorted({printable(p.host or "?") for p in loaded.points}))
                raise ValueError(f"{printable(given)} holds no point of host "
                                 f"{printable(host)} (its hosts: {found or 'none'})")  # fmt: skip
        sides.append(Loaded(loaded.runs, points))
    try:
        kept = {id(point) for point in selected(args, [*sides[0].points, *sides[1].points])}
    except ValueError as error:  # it names the values present: the file's, shown
        raise ValueError(printable(error)) from None
    a, b = (Loaded(side.runs, [p for p in side.points if id(p) in kept]) for side in sides)
    return a, b


def _floors(args: argparse.Namespace) -> floors.Floors:
    """The floors ``--floors`` names: the shipped ones, a file's, or none."""
    if args.floors is None:
        return floors.shipped()
    if args.floors == "none":
        return floors.Floors()
    return floors.load(Path(args.floors))


def _write_floors(comparisons: list[diff.Comparison], args: argparse.Namespace) -> None:
    """Add what this A/A pair shows to the floors file (``--write-floors``)."""
    path: Path = args.write_floors
    found = diff.aa_floors(comparisons, f"{_name(args.a)} / {_name(args.b)}")
    judged = sum(c.judged for c in comparisons)
    before = floors.load(path) if path.exists() else floors.Floors()
    floors.save(before.merged(found), path)
    refused = (
        f"; {found.refused} changes of 2× or more left out: no A/A pair shows those"
        if found.refused else ""
    )  # fmt: skip
    print(f"floors: {len(found.shares)} kinds from {judged} points added to "
          f"{printable(path)} ({before.pairs + 1} pairs){refused}")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    a, b = _sides(args)
    comparisons = diff.compare_points(
        a.points, b.points, threshold=args.threshold, time=args.time,
        any_device=args.any_device, floors=_floors(args), cpu_devices=_cpu_devices(a, b),
        energy_tolerance=args.energy_tolerance,
    )  # fmt: skip
    if args.write_floors is not None:
        _write_floors(comparisons, args)
    for warning in (
        diff.machine_warning(a.runs, a.points, b.runs, b.points),
        diff.cache_warning(a.points, b.points),
        diff.several_hosts(comparisons),
    ):
        if warning:
            warn_on_stderr(warning)
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    print(diff_table(comparisons, width))
    print()
    print(summary_line(comparisons, args.threshold))
    energy = energy_line(comparisons, args.energy_tolerance)
    if energy:
        print(energy)
    out = output_folder(args.out or arguments.default_out("diff"))
    written = [write_csv(comparisons, out, args.time)]
    if not args.no_plots and any(c.interval is not None for c in comparisons):
        written += _figure(comparisons, args, out)
    print(f"diff: {', '.join(printable(path) for path in written)}")
    return _status(comparisons, args.fail_on)


def _cpu_devices(*sides: Loaded) -> set[str]:
    """The names of the devices the runs' headers call CPUs (OpenCL on a CPU, the CPU)."""
    return {
        str(device.get("name"))
        for side in sides
        for header in side.runs.values()
        for device in header.devices.values()
        if device.get("kind") == "cpu" and device.get("name")
    }


def _status(comparisons: list[diff.Comparison], fail_on: str | None) -> int:
    """The exit status: nothing compared (3), a point --fail-on fails on (1), else 0."""
    if not any(c.judged for c in comparisons):
        print(
            "xbackend: no point was measured in both runs: nothing compared "
            f"(exit status {EXIT_NOTHING_COMPARED})",
            file=sys.stderr,
        )
        return EXIT_NOTHING_COMPARED
    failing = diff.failing(comparisons, fail_on)
    if failing:
        print(f"{len(failing)} points {fail_on} (--fail-on {fail_on})", file=sys.stderr)
        return 1
    return 0


def _figure(comparisons: list[diff.Comparison], args: argparse.Namespace, out: Path) -> list[Path]:
    """diff.png (and .svg): the ratios against size (matplotlib imported only now)."""
    from xbackend.figures.plots import save
    from xbackend.figures.ratios import ratio_figure

    figure = ratio_figure(
        comparisons, args.threshold, time=args.time, names=(_name(args.a), _name(args.b))
    )
    paths, _ = save(figure, out, FIGURE_NAME)
    return [path for path in paths if path.suffix == ".png"]


def summary_line(comparisons: list[diff.Comparison], threshold: float) -> str:
    """The verdicts counted, and what the threshold was."""
    found = diff.counts(comparisons)
    if not found:
        return "no points in either run"
    judged = ", ".join(f"{n} {name}" for name, n in found.items() if name in diff.VERDICTS)
    listed = ", ".join(f"{n} {name}" for name, n in found.items() if name in diff.LISTED)
    floored = [c for c in comparisons if c.judged and c.floor > threshold]
    highest = max(floored, key=lambda c: c.floor, default=None)
    above = (
        f", A/A floors up to {highest.floor * 100:.3g}% ({highest.floor_from})"
        if highest is not None else ""
    )  # fmt: skip
    parts = [f"verdicts (threshold {threshold * 100:.3g}%{above}): {judged or 'none'}"]
    if listed:
        parts.append(f"no verdict: {listed}")
    loaded = sum(c.host_differed for c in comparisons)
    if loaded:
        parts.append(
            f"{loaded} UNCERTAIN on a CPU device because the kernel ran on several threads at "
            "once, or the host's load, speed or contention differed between the runs, or was "
            "past the A/A floors', and the CPU time did not say the same (the note of each "
            "gives the figures)"
        )
    return "; ".join(parts)


def energy_line(comparisons: list[diff.Comparison], tolerance: float) -> str | None:
    """The joules compared counted, and their tolerance; None where none was compared."""
    found = joules.counts(c.energy for c in comparisons)
    if not found:
        return None
    counted = ", ".join(f"{n} {name}" for name, n in found.items())
    return (
        f"energy (joules per product B/A, tolerance ±{tolerance * 100:.3g}%: fixed, no A/A "
        f"floor; one reading a point, no interval): {counted}"
    )


# -- the table ---------------------------------------------------------------------------------


def _ratio(value: object) -> str:
    return f"{value:.3f}" if isinstance(value, float) else "—"


def _floor(value: object) -> str:
    """A point's A/A floor, ±share: the least change its verdict could claim."""
    return f"±{value * 100:.2g}%" if isinstance(value, float) else ""


def _interval(row: dict[str, object]) -> str:
    low, high = row["ratio_low"], row["ratio_high"]
    if not (isinstance(low, float) and isinstance(high, float)):
        return "—"
    return f"{low:.3f} – {high:.3f}"


def _time(value: object) -> str:
    return format_seconds(value) if isinstance(value, float) else "—"


def _size(row: dict[str, object]) -> str:
    batch = f"{row['batch']}×" if row["batch"] != 1 else ""
    return f"{batch}{row['M']}×{row['K']}·{row['K']}×{row['N']}"


# Header, cell, right-aligned, and the order in which columns go where the terminal is
# narrow (the highest number first; 0: never).
_COLUMNS = (
    ("backend", lambda r: printable(r["label"]), False, 0),
    ("device", lambda r: printable(r["device"]), False, 4),
    ("hosts", lambda r: printable(r["hosts"]), False, 0),
    ("op", lambda r: printable(r["op"]), False, 2),
    ("variant", lambda r: printable(r["variant"]), False, 0),
    ("tile", lambda r: "" if r["tile"] is None else str(r["tile"]), False, 1),
    ("dtype", lambda r: printable(r["dtype"]), False, 3),
    ("size", _size, True, 0),
    ("A", lambda r: _time(r["a_median_s"]), True, 0),
    ("B", lambda r: _time(r["b_median_s"]), True, 0),
    ("B/A", lambda r: _ratio(r["ratio"]), True, 0),
    ("95% interval", _interval, True, 0),
    ("A/A floor", lambda r: _floor(r["floor"]), True, 6),
    ("verdict", lambda r: str(r["verdict"]), False, 0),
    ("J B/A", lambda r: "" if r["joules_ratio"] is None else _ratio(r["joules_ratio"]), True, 7),
    ("energy", lambda r: str(r["energy"] or ""), False, 7),
    ("note", lambda r: printable(r["note"]), False, 5),
)


def diff_table(comparisons: list[diff.Comparison], width: int | None = None) -> str:
    """One row per point: both medians, their ratio with its interval, and the verdict.

    ``width``: the terminal's columns; the columns that may go are left out until the
    table fits, and a line still longer is cut. None: no limit.
    """
    if not comparisons:
        return "no points"
    rows = [diff.row(c) for c in comparisons]
    cells = [
        [name for name, *_ in _COLUMNS],
        *([cell(r) for _, cell, *_ in _COLUMNS] for r in rows),
    ]
    shown = [i for i in range(len(_COLUMNS)) if any(row[i] for row in cells[1:])]
    widths = {i: max(len(row[i]) for row in cells) for i in shown}
    droppable = sorted((i for i in shown if _COLUMNS[i][3]), key=lambda i: _COLUMNS[i][3])
    while width is not None and sum(widths[i] + 2 for i in shown) - 2 > width and droppable:
        shown.remove(droppable.pop())

    def line(row: list[str]) -> str:
        text = "  ".join(
            row[i].rjust(widths[i]) if _COLUMNS[i][2] else row[i].ljust(widths[i]) for i in shown
        ).rstrip()
        return text if width is None or len(text) <= width else text[: max(1, width - 1)] + "…"

    lines = [line(cells[0]), line(["-" * widths.get(i, 0) for i in range(len(_COLUMNS))])]
    return "\n".join(lines + [line(row) for row in cells[1:]])


def write_csv(comparisons: list[diff.Comparison], folder: Path, time: str = "kernel") -> Path:
    """Every comparison as a row of ``diff.csv`` in ``folder``, written whole."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(diff.ROW_FIELDS)
    for comparison in comparisons:
        values = diff.row(comparison, time)
        writer.writerow(["" if values[f] is None else values[f] for f in diff.ROW_FIELDS])
    path = folder / CSV_NAME
    atomic_write(path, buffer.getvalue())
    return path
