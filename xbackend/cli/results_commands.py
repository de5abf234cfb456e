"""``xbackend plot`` and ``xbackend report``: figures and the report from results files,
running nothing. Where several runs measured the same points, each run's lines are drawn
and tabled apart, named by their run or host (``results.reading.apart``); where several
machines measured the same configurations, they are also put side by side against a base
machine (``--base-host``; ``xbackend.analysis.side_by_side``): machines.csv and its figures."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from xbackend import results as results_io
from xbackend.analysis.tables import select
from xbackend.cli.summary import summary_table
from xbackend.results import Loaded, PointRecord
from xbackend.results.reading import apart, load_runs
from xbackend.safeio import output_folder, printable, safe_name


def add_parsers(commands: Any) -> None:
    _results_command(
        commands,
        "report",
        help="write one HTML page (and Markdown) with every experiment's figures and tables",
        description="Write report.html (self-contained: figures embedded) and report.md "
        "from one or more results folders or results.jsonl files, running nothing.",
        writes="the report",
    ).set_defaults(func=report)
    _results_command(
        commands,
        "plot",
        help="redraw the figures from results files, running nothing",
        description="Draw the figures from one or more results folders or results.jsonl files.",
        writes="the figures",
    ).set_defaults(func=plot)


def _results_command(
    commands: Any, name: str, *, help: str, description: str, writes: str
) -> argparse.ArgumentParser:
    """A command that reads results files and writes into a folder."""
    command: argparse.ArgumentParser = commands.add_parser(name, help=help, description=description)
    command.add_argument("results", nargs="+", type=Path, metavar="RESULTS")
    command.add_argument(
        "--out", type=Path, default=None,
        help=f"folder for {writes} (default: the first results folder; with filters, a "
        "folder named by them inside it, leaving the run's own files as they are)",
    )  # fmt: skip
    command.add_argument(
        "--base-host", metavar="MACHINE", default=None,
        help="where results come from several machines, the one the others are compared "
        "with: its host, its device's name, or both as 'HOST · DEVICE' (default: the "
        "machine of the first results given)",
    )  # fmt: skip
    add_filters(command)
    return command


def add_filters(command: argparse.ArgumentParser) -> None:
    """The options that choose points: backends, variants, tiles, operations, data types."""
    filters = command.add_argument_group(
        "filters (comma lists; a point is kept if it matches one value of each)"
    )
    filters.add_argument(
        "--backends", metavar="LIST", help="backend names or labels, e.g. opencl or opencl:pocl"
    )
    filters.add_argument(
        "--variants",
        metavar="LIST",
        help="variants, e.g. naive,tiled; ladder: every variant but naive, tiled and vendor; all",
    )
    filters.add_argument(
        "--tile", metavar="LIST", help="tile sizes, e.g. 16,32 (none: the variants without a tile)"
    )
    filters.add_argument("--op", metavar="LIST", help="operations, e.g. mm,rmm")
    filters.add_argument("--dtype", metavar="LIST", help="data types, e.g. float32")


def selected(args: argparse.Namespace, points: list[PointRecord]) -> list[PointRecord]:
    """The points the command's filters keep (a ValueError naming the values present,
    which come from the results file: shown, not obeyed)."""
    try:
        return select(
            points,
            backends=args.backends,
            variants=args.variants,
            tiles=args.tile,
            ops=args.op,
            dtypes=args.dtype,
        )
    except ValueError as error:
        raise ValueError(printable(error)) from None


_FILTERS = ("backends", "variants", "tile", "op", "dtype")


def _filters(args: argparse.Namespace) -> list[str]:
    """The filters given, as "variants-naive,tiled"; none where every point is kept."""
    given = ((name, getattr(args, name, None)) for name in _FILTERS)
    return [f"{name}-{value}" for name, value in given if value]


def _out_folder(args: argparse.Namespace, command: str) -> Path:
    """Where the command writes: ``--out``; else the first results folder, or, where
    filters chose some points, a folder of its own in it named by them (``plot-variants-
    naive_tiled``), so that the run's own figures and report are never silently redrawn
    from fewer points."""
    first: Path = args.results[0]
    folder = first if first.is_dir() else first.parent
    filters = _filters(args)
    if args.out is None and filters:
        folder = folder / safe_name("-".join([command, *filters]), limit=100)
    return output_folder(args.out or folder)


def _say_where(args: argparse.Namespace, out: Path) -> None:
    if args.out is None and _filters(args):
        print(f"filtered: written into {out}; the run's own figures and report are as they were")


def report(args: argparse.Namespace) -> int:
    from xbackend.report.page import write_report_of

    loaded, runs = load_runs(args.results, warn=results_io.warn_on_stderr)
    chosen = selected(args, loaded.points)
    loaded = Loaded(loaded.runs, chosen) if len(chosen) < len(loaded.points) else loaded
    out = _out_folder(args, "report")
    written = write_report_of(
        loaded,
        out,
        sources=list(args.results),
        run_names=runs,
        base_host=args.base_host,
    )
    for path in written:
        if path.suffix in (".html", ".md"):
            print(f"report: {path}")
    _say_where(args, out)
    return 0


def plot(args: argparse.Namespace) -> int:
    from xbackend.analysis.roofs import roofs
    from xbackend.figures.plots import draw

    loaded, runs = load_runs(args.results, warn=results_io.warn_on_stderr)
    chosen = selected(args, loaded.points)
    # Runs that measured the same points are drawn as lines of their own, named by run.
    points = results_io.latest(apart(chosen, runs))
    out = _out_folder(args, "plot")
    figures = draw(points, out, roofs(loaded.runs.values()))
    figures += _side_by_side(results_io.latest(chosen), out, args.base_host)
    print(summary_table(points))
    print(f"\nfigures: {', '.join(str(f) for f in figures)}")
    _say_where(args, out)
    return 0


def _side_by_side(points: list[PointRecord], out: Path, base: str | None) -> list[Path]:
    """Where several machines measured the same configurations: machines.csv and the
    figures of ``figures/machines.py`` in ``out``; else nothing."""
    from xbackend.analysis import side_by_side
    from xbackend.figures.machines import figures
    from xbackend.figures.plots import save

    rows = side_by_side.compare_machines(points, base=base)
    if not rows:
        return []
    written = [side_by_side.write_csv(rows, out)]
    for name, figure in figures(rows):
        written += save(figure, out, name)[0]
    return written
