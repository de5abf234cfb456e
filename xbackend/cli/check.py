"""``xbackend check DIR...``: every kernel of the folders, checked at edge shapes and the
assignment's sizes, a verdict per kernel and shape; the times beside the shipped kernels'."""

from __future__ import annotations

import argparse
import csv
from collections import defaultdict
from typing import Any

import xbackend.cli.arguments as arguments
from xbackend import families
from xbackend.checking import (
    EDGE_SHAPES,
    REFERENCE_VARIANTS,
    Verdict,
    check_folders,
    folder_variants,
    median_time_s,
    schedule,
)
from xbackend.cli.compare import open_backends
from xbackend.cli.exits import EXIT_USAGE
from xbackend.errors import XBackendError
from xbackend.safeio import output_folder

EXIT_WRONG = 1  # a kernel wrong, or not run, at some shape


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "check",
        help="check your own kernels at edge shapes and the assignment's sizes",
        description="Run every kernel of each folder (a family.toml beside .cu/.cl files, "
        "or folders of them: docs/kernels.md) at held-out edge shapes (1×1, primes, "
        "sizes no tile divides, K = 1) and at the assignment's sizes, against the float64 "
        "reference, and print a verdict per kernel and shape; then each kernel's median "
        "time at the largest size beside the shipped naive and tiled kernels. Exit status "
        f"{EXIT_WRONG} if any kernel is wrong or does not run at some shape.",
        epilog="example:\n  xbackend check examples/assignment/student "
        "examples/assignment/edge_bug",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("folders", nargs="+", metavar="DIR", help="folders of kernels")
    parser.add_argument(
        "--backends", default="auto", metavar="LIST",
        help="cuda, opencl (or NAME:DEVICE), comma-separated; 'auto' (default): each available",
    )  # fmt: skip
    parser.add_argument(
        "--steps", type=arguments.bounded_int(0, 1000), default=38,
        help="assignment sizes to check, i = 1..STEPS (default 38: up to 608×532)",
    )  # fmt: skip
    parser.add_argument("--seed", type=arguments.bounded_int(0, arguments.MAX_SEED), default=0)
    parser.add_argument("--out", default=None, metavar="DIR", help="also write check.csv here")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    families.add_folders(args.folders)
    variants = folder_variants(args.folders)
    if not variants:
        raise XBackendError(f"{', '.join(args.folders)}: no variants of mm to check")
    opened = [
        (label, backend)
        for label, backend in open_backends(args.backends)
        if backend.name in ("cuda", "opencl")
    ]
    if not opened:
        print("xbackend: error: no CUDA or OpenCL backend here to run kernels on")
        return EXIT_USAGE
    shapes = [*EDGE_SHAPES, *schedule(args.steps)]
    labels = ", ".join(label for label, _ in opened)
    print(
        f"checking {', '.join(variants)} on {labels}: "
        f"{len(EDGE_SHAPES)} edge shapes and {args.steps} assignment sizes"
    )
    try:
        verdicts = check_folders(opened, variants, shapes, args.seed, _say)
        _summary(verdicts)
        if args.steps:
            _times(opened, variants, schedule(args.steps)[-1], args.seed)
    finally:
        for _, backend in opened:
            backend.close()
    if args.out:
        _write(output_folder(args.out) / "check.csv", verdicts)
    return EXIT_WRONG if any(v.equal is not True for v in verdicts) else 0


def _say(verdict: Verdict) -> None:
    if verdict.equal is not True:
        shape = _shape(verdict)
        print(f"  {verdict.label} {verdict.variant} at {shape}: {verdict.word} ({verdict.detail})")


def _shape(verdict: Verdict) -> str:
    s = verdict.shape
    return f"{s.M}×{s.K}·{s.K}×{s.N}" if s is not None else "-"


def _summary(verdicts: list[Verdict]) -> None:
    """One line a kernel: equal everywhere, or the shapes where it is not."""
    by_kernel: dict[tuple[str, str], list[Verdict]] = defaultdict(list)
    for verdict in verdicts:
        by_kernel[verdict.label, verdict.variant].append(verdict)
    print()
    for (label, variant), found in by_kernel.items():
        bad = [v for v in found if v.equal is not True]
        if not bad:
            print(f"{label} {variant}: equal at all {len(found)} shapes")
            continue
        shown = ", ".join(_shape(v) for v in bad[:6]) + (" ..." if len(bad) > 6 else "")
        print(f"{label} {variant}: {bad[0].word} at {len(bad)} of {len(found)} shapes: {shown}")


def _times(opened: list[Any], variants: list[str], shape: Any, seed: int) -> None:
    """Median kernel times at the largest size, the shipped kernels first."""
    print(f"\nmedian kernel time at {shape.M}×{shape.K}·{shape.K}×{shape.N}:")
    for label, backend in opened:
        for variant in (*REFERENCE_VARIANTS, *variants):
            if variant in backend.variants():
                seconds, clock = median_time_s(backend, variant, shape, seed)
                shown = f"{seconds * 1e6:10.1f} µs ({clock})" if seconds else "  not run"
                print(f"  {label:10s} {variant:20s} {shown}")


def _write(path: Any, verdicts: list[Verdict]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(["backend", "variant", "M", "K", "N", "verdict", "detail"])
        for v in verdicts:
            sizes = (v.shape.M, v.shape.K, v.shape.N) if v.shape else ("", "", "")
            writer.writerow([v.label, v.variant, *sizes, v.word, v.detail])
    print(f"\nverdicts: {path}")
