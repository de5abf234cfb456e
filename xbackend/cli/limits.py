"""``xbackend limits``: the largest square product each backend runs, for each operation
and dtype, found by doubling then bisection (``xbackend/sweep/limits.py``); recorded as results
and printed as a table."""

from __future__ import annotations

import argparse
import os
from typing import Any

import xbackend.cli.arguments as arguments
import xbackend.cli.selection as selection
from xbackend import results as results_io
from xbackend.cli.compare import open_backends
from xbackend.errors import XBackendError
from xbackend.operations import DEFAULT
from xbackend.safeio import output_folder
from xbackend.sweep.isolation import DEFAULT_TIMEOUT_S, TIMEOUT_ENV, Isolation
from xbackend.sweep.limits import (
    FALLBACK_VARIANT,
    PREFERRED_VARIANT,
    START_GPU,
    START_OTHER,
    limits_table,
)
from xbackend.sweep.limits import limits as find_limits

MAX_START = 2**20


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "limits",
        help="find the largest product each backend runs, within memory and a time budget",
        description="For each backend, operation and dtype, grow the square size N×N · N×N "
        "(doubling, then bisection) until the product no longer fits (device or host "
        "memory, one buffer's limit, CLBlast's 32-bit offsets) or its one run exceeds "
        "--budget; record every size tried and print the largest that ran and the first "
        "that did not, with the memory each needs. Without --variants, each backend "
        f"grows {PREFERRED_VARIANT} where it runs it, else {FALLBACK_VARIANT}; --sizes is "
        "not taken (the sizes are what it finds; --start is the first).",
    )
    selection.add_options(parser, out="results/limits-<date-time>")
    parser.add_argument(
        "--start", type=arguments.bounded_int(2, MAX_START), default=None, metavar="N",
        help=f"the first size (default: {START_GPU} on a GPU, {START_OTHER} elsewhere)",
    )  # fmt: skip
    parser.add_argument(
        "--budget", type=arguments.positive(float), default=20.0, metavar="SECONDS",
        help="the most one run of the product may take, measured or predicted (default: 20)",
    )  # fmt: skip
    parser.add_argument(
        "--kernel-timeout", type=arguments.positive(float), default=None, metavar="SECONDS",
        help="the longest a step of a size of your own kernels (--kernels) may take, each "
        "measured in a process of its own: its build with the first run, then the timed "
        f"run; longer is that size's error (default: {DEFAULT_TIMEOUT_S:g}, or {TIMEOUT_ENV})",
    )  # fmt: skip
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.kernel_timeout is not None:  # read by the kernels' processes' deadline
        os.environ[TIMEOUT_ENV] = repr(args.kernel_timeout)
    isolation = Isolation()  # its deadline (XBACKEND_KERNEL_TIMEOUT) checked before a run
    opened = open_backends(args.backends)
    try:
        out = output_folder(args.out or arguments.default_out("limits"))
        with results_io.RunLock(out):
            if (out / results_io.JSONL_NAME).exists():
                raise XBackendError(f"{out} already holds results; choose another --out")
            for label, backend in opened:
                print(f"{label}: {backend.device.name} ({backend.device.platform})")
            found = find_limits(
                opened, out, ops=args.op or [DEFAULT], dtypes=args.dtype or ["float32"],
                variants=args.variants, tiles=args.tile, start=args.start,
                budget_s=args.budget, seed=args.seed, isolation=isolation,
            )  # fmt: skip
    finally:
        for _, backend in opened:
            backend.close()
    print()
    print(limits_table(found))
    print(f"\nresults: {out / results_io.JSONL_NAME}, {out / results_io.CSV_NAME}")
    broken = [p for limit in found for p in limit.records if p.status in ("mismatch", "error")]
    return 1 if broken else 0
