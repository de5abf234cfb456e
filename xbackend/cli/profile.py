"""``xbackend profile``: what the CUDA kernels load and move, counted by Nsight Compute
(``xbackend/profiling/``); recorded as results, printed as a table, written as
``counters.csv`` and drawn (``figures/counters.py``).

Without selection options it profiles the chapter's experiment: naive and tiled at
tiles 8, 16 and 32, mm of 2048×2048 · 2048×2048 in float32, on CUDA. A backend other
than CUDA, a machine without CUDA or without ncu: one line each says what is missing and
what would be needed, and the command exits with 2, having run and written nothing.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

import xbackend.cli.arguments as arguments
import xbackend.cli.selection as selection
from xbackend import results as results_io
from xbackend.errors import XBackendError
from xbackend.measuring.timing import Sampling
from xbackend.operations import DEFAULT, Shape
from xbackend.problems import AUTO, CHECKS
from xbackend.profiling import ncu, needs
from xbackend.profiling.session import Profiled, Profiler, Request, profile
from xbackend.profiling.table import CSV_NAME, csv_text, table
from xbackend.results.plan import Plan
from xbackend.safeio import atomic_write, output_folder

EXIT_MISSING = 2  # a backend that cannot be profiled, no CUDA, no ncu: nothing ran
DEFAULT_SIZE = Shape(2048, 2048, 2048)
DEFAULT_VARIANTS = ["naive", "tiled"]
DEFAULT_TILES = [8, 16, 32]
_EXAMPLES = (
    "examples:\n"
    "  xbackend profile                          # naive and tiled, tiles 8,16,32, 2048³\n"
    "  xbackend profile --variants ladder        # every tuned rung\n"
    "  xbackend profile --sizes 4096x4096 --tile 16,32\n"
    "  xbackend profile --cache-control none     # caches kept between kernels\n"
)


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "profile",
        help="count the CUDA kernels' loads and memory traffic with Nsight Compute",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run each selected product once on CUDA under Nsight Compute (ncu), "
        "checked against the float64 reference, and record what its kernels did: their "
        "time (clocks left alone), global load requests and sectors, L2 sectors read, "
        "DRAM bytes read and written, achieved occupancy. Writes results (JSON lines and "
        "CSV, with ncu's version and settings), counters.csv, ncu's report and figures. "
        f"Defaults here: cuda (--backends auto), {', '.join(DEFAULT_VARIANTS)} at tiles "
        f"{','.join(map(str, DEFAULT_TILES))} (without --variants), {DEFAULT_SIZE}, "
        "float32. OpenCL and CPU kernels cannot be profiled by ncu; without CUDA or ncu "
        f"one line says what is missing, and the exit status is {EXIT_MISSING}.",
        epilog=_EXAMPLES,
    )
    selection.add_options(parser, out="results/profile-<date-time>", sizes=selection.SIZES_HELP)
    parser.add_argument(
        "--clock-control", choices=sorted(ncu.CLOCK_CONTROLS), default="none",
        help="ncu's clocks: " + "; ".join(f"'{k}': {v}" for k, v in ncu.CLOCK_CONTROLS.items()),
    )  # fmt: skip
    parser.add_argument(
        "--cache-control", choices=sorted(ncu.CACHE_CONTROLS), default="all",
        help="ncu's caches: " + "; ".join(f"'{k}': {v}" for k, v in ncu.CACHE_CONTROLS.items()),
    )  # fmt: skip
    parser.add_argument(
        "--ncu", default=None, metavar="PATH",
        help=f"Nsight Compute's command line (default: ncu on PATH, else {ncu.DEFAULT_PATH})",
    )  # fmt: skip
    parser.add_argument(
        "--check", choices=CHECKS, default=AUTO,
        help="how each result is verified (as compare's --check)",
    )  # fmt: skip
    parser.add_argument("--no-plots", action="store_true", help="write no figures")
    parser.set_defaults(func=run)


def missing(args: argparse.Namespace) -> tuple[list[str], str | None]:
    """One line for each thing this profile lacks here, and the ncu found (if any)."""
    lines = needs.backend_problems(needs.targets(args.backends))
    if not lines:  # CUDA is asked about only where it is the backend asked for
        problem = needs.cuda_problem()
        lines += [problem] if problem else []
    found = ncu.find(args.ncu)
    if found is None:
        lines.append(needs.no_ncu(args.ncu or ncu.DEFAULT_PATH))
    return lines, found


def request(args: argparse.Namespace, settings: ncu.Settings) -> Request:
    """The points to profile: the selection, with the chapter's experiment as default."""
    plan = Plan(
        shapes=list(args.sizes or [DEFAULT_SIZE]),
        ops=args.op or [DEFAULT],
        dtypes=args.dtype or ["float32"],
        batch=8,
        variants=None,
        tiles=args.tile or (None if args.variants else list(DEFAULT_TILES)),
        seed=args.seed,
        budget_s=0.0,
        check=args.check,
        sampling=Sampling(
            warmup=0, max_samples=1, min_samples=1, cache=settings.cache_mode, short_kernel_s=0.0
        ),
    )
    targets = [target.label for target in needs.targets(args.backends)]
    return Request(targets, plan, list(args.variants or DEFAULT_VARIANTS))


def run(args: argparse.Namespace) -> int:
    lines, found = missing(args)
    if lines or found is None:
        for line in lines:
            print(f"xbackend profile: {line}", file=sys.stderr)
        return EXIT_MISSING
    settings = ncu.Settings(args.clock_control, args.cache_control)
    profiler = Profiler(found, ncu.version(found), settings)
    wanted = request(args, settings)
    out = output_folder(args.out or arguments.default_out("profile"))
    with results_io.RunLock(out):
        if (out / results_io.JSONL_NAME).exists():
            raise XBackendError(f"{out} already holds results; choose another --out")
        print(
            f"ncu {profiler.version} ({found}): --clock-control {settings.clock_control} "
            f"--cache-control {settings.cache_control}; results into {out}/"
        )
        done = profile(wanted, out, profiler)
    report(done, out, draw=not args.no_plots)
    wrong = [p for p in done.records if p.status in ("mismatch", "error")]
    return 1 if wrong else 0


def report(done: Profiled, out: Path, draw: bool = True) -> None:
    """The table on the console, ``counters.csv``, and the figures unless ``draw`` is off."""
    print()
    print(table(done.records))
    atomic_write(out / CSV_NAME, csv_text(done.records, done.kernels))
    print(f"\nresults: {out / results_io.JSONL_NAME}, {out / CSV_NAME}")
    if not draw:
        return
    from xbackend.figures.counters import figures
    from xbackend.figures.plots import save

    written = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a layout matplotlib could not fit: seen by looking
        for name, figure in figures(done.records):
            written.append(save(figure, out, name)[0][0])
    if written:
        print(f"figures: {', '.join(str(path) for path in written)}")
