"""``xbackend check DIR...``: every kernel of the folders, checked at edge shapes and the
assignment's sizes, a verdict per kernel and shape; the times beside the shipped kernels'."""

from __future__ import annotations

import argparse
import csv
import shutil
from collections import defaultdict
from typing import Any

import xbackend.cli.arguments as arguments
from xbackend import families
from xbackend.checking import (
    EDGE_SHAPES,
    REFERENCE_VARIANTS,
    SANITIZED_SHAPES,
    Verdict,
    check_folders,
    folder_variants,
    median_time_s,
    sanitize,
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
    parser.add_argument(
        "--shapes", type=arguments.shapes, default=None, metavar="LIST",
        help="MxKxN sizes to check instead of the edge shapes, comma-separated",
    )  # fmt: skip
    parser.add_argument(
        "--sanitize", choices=("auto", "on", "off"), default="auto",
        help="first run the OpenCL kernels under oclgrind at two small edge shapes (out-of-"
        "bounds accesses, data races, uninitialized reads); a kernel that writes out of "
        "bounds there is not run natively. auto (default): where oclgrind is installed",
    )  # fmt: skip
    parser.add_argument("--no-times", action="store_true", help="leave out the timed runs")
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
    shapes = list(args.shapes) if args.shapes else [*EDGE_SHAPES, *schedule(args.steps)]
    labels = ", ".join(label for label, _ in opened)
    print(f"checking {', '.join(variants)} on {labels}: {len(shapes)} shapes")
    try:
        found = _sanitized(args, opened, variants)
        unsafe = {v.variant for v in found if v.equal is None}
        verdicts = found + check_folders(opened, [v for v in variants if v not in unsafe],
                                         shapes, args.seed, _say)  # fmt: skip
        _summary(verdicts)
        if args.steps and not args.no_times:
            _times(opened, [v for v in variants if v not in unsafe], schedule(args.steps)[-1],
                   args.seed)  # fmt: skip
    finally:
        for _, backend in opened:
            backend.close()
    if args.out:
        _write(output_folder(args.out) / "check.csv", verdicts)
    return EXIT_WRONG if any(v.equal is not True for v in verdicts) else 0


def _sanitized(args: argparse.Namespace, opened: list[Any], variants: list[str]) -> list[Verdict]:
    """oclgrind's verdicts, where it runs (``--sanitize``): a report is a wrong kernel;
    one that writes out of bounds is also not run natively (it could corrupt this
    process's memory), said as a verdict of its own."""
    path = shutil.which("oclgrind")
    wanted = args.sanitize == "on" or (args.sanitize == "auto" and path)
    opencl = next((backend for _, backend in opened if backend.name == "opencl"), None)
    if not wanted or opencl is None:
        return []
    if path is None:
        raise XBackendError("--sanitize on needs oclgrind (apt-get install oclgrind)")
    print(f"oclgrind: the OpenCL kernels at {len(SANITIZED_SHAPES)} small edge shapes first")
    findings, failed = sanitize(args.folders, path, args.seed)
    if failed:
        print(f"  oclgrind could not run them: {failed}")
    verdicts = []
    for variant in variants:
        if variant not in opencl.variants():
            continue
        spec = opencl.variant_spec(variant)
        finding = findings.get(spec.kernel)
        if finding is None:
            continue
        source = families.family(spec.family).sources["opencl"].name
        code = f": {finding.code}" if finding.code else ""
        detail = f"{finding.what}: {source} line {finding.line}{code}"
        print(f"  oclgrind {variant}: WRONG ({detail})")
        verdicts.append(Verdict("oclgrind", variant, None, False, detail))
        if finding.writes_out_of_bounds:
            verdicts.append(Verdict("opencl", variant, None, None, "not run: it writes out of "
                                    "bounds under oclgrind (fix that first)"))  # fmt: skip
    return verdicts


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
        if all(v.shape is None for v in found):  # oclgrind's, or a kernel not run
            print(f"{label} {variant}: {found[0].word} ({found[0].detail})")
            continue
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
