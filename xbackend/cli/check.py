"""``xbackend check DIR...``: every kernel of the folders, checked at edge shapes and the
assignment's sizes, a verdict per kernel and shape; the times beside the shipped kernels'."""

from __future__ import annotations

import argparse
import csv
import io
import shutil
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import xbackend.cli.arguments as arguments
from xbackend import families
from xbackend.checking import (
    EDGE_SHAPES,
    REFERENCE_VARIANTS,
    SANITIZED_SHAPES,
    Verdict,
    check_bytes,
    check_folders,
    folder_variants,
    host_memory_bytes,
    median_time_s,
    sanitize,
    schedule,
    unrunnable,
)
from xbackend.cli.compare import open_backends
from xbackend.cli.exits import EXIT_USAGE
from xbackend.errors import XBackendError
from xbackend.isolation import Isolation
from xbackend.safeio import UnsafePath, atomic_write, output_folder, refuse_link

EXIT_WRONG = 1  # a kernel wrong, or not run, at some shape
EXIT_NOTHING_CHECKED = EXIT_USAGE  # no kernel of the folders can run here: nothing passed


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "check",
        help="check your own kernels at edge shapes and the assignment's sizes",
        description="Run every kernel of each folder (a family.toml beside .cu/.cl files, "
        "or folders of them: docs/kernels.md) at held-out edge shapes (1×1, primes, "
        "sizes no tile divides, K = 1) and at the assignment's sizes, against the float64 "
        "reference, and print a verdict per kernel and shape; then each kernel's median "
        "time at the largest size beside the shipped naive and tiled kernels. Exit status "
        f"{EXIT_WRONG} if any kernel is wrong or does not run at some shape; "
        f"{EXIT_NOTHING_CHECKED} if nothing could be checked (no backend here runs the "
        "folders' kernels) or the input is bad.",
        epilog="example:\n  xbackend check examples/assignment/student "
        "examples/assignment/edge_bug",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("folders", nargs="+", metavar="DIR", help="folders of kernels")
    parser.add_argument(
        "--variants", type=arguments.names("variant"), default=None, metavar="LIST",
        help="only these variants of the folders, comma-separated (default: every one)",
    )  # fmt: skip
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
    variants = _variants(args)
    shapes = list(args.shapes) if args.shapes else [*EDGE_SHAPES, *schedule(args.steps)]
    _check_shapes(shapes)
    csv_path = _csv_path(args.out)  # a bad --out is said before anything runs
    opened = [
        (label, backend)
        for label, backend in open_backends(args.backends)
        if backend.name in ("cuda", "opencl")
    ]
    if not opened:
        print("xbackend: error: no CUDA or OpenCL backend here to run kernels on", file=sys.stderr)
        return EXIT_NOTHING_CHECKED
    try:
        missing = unrunnable(variants, opened)
        if len(missing) == len(variants):
            shown = "; ".join(f"{variant}: {why}" for variant, why in missing.items())
            print(f"xbackend: error: nothing to check: {shown}", file=sys.stderr)
            return EXIT_NOTHING_CHECKED
        verdicts = _checked(args, opened, [v for v in variants if v not in missing], shapes)
        verdicts += [Verdict("-", variant, None, None, why) for variant, why in missing.items()]
        _summary(verdicts, len(shapes))
    finally:
        for _, backend in opened:
            backend.close()
    wrong = any(v.equal is not True for v in verdicts)
    if csv_path is not None and not _written(csv_path, verdicts):
        return EXIT_WRONG if wrong else EXIT_USAGE  # the verdicts say more than the file
    return EXIT_WRONG if wrong else 0


def _variants(args: argparse.Namespace) -> list[str]:
    """The folders' variants of mm to check: every one, or those ``--variants`` names."""
    variants = folder_variants(args.folders)
    if not variants:
        raise XBackendError(f"{', '.join(args.folders)}: no variants of mm to check")
    if args.variants:
        unknown = [name for name in args.variants if name not in variants]
        if unknown:
            raise XBackendError(
                f"--variants: no variant {', '.join(unknown)} of mm in {', '.join(args.folders)} "
                f"(its variants: {', '.join(variants)})"
            )
        variants = [name for name in variants if name in args.variants]
    return variants


def _check_shapes(shapes: list[Any]) -> None:
    """A shape whose check would not fit this machine's memory is refused by name."""
    limit = host_memory_bytes() // 2
    for shape in shapes:
        if check_bytes(shape) > limit:
            raise XBackendError(
                f"--shapes {shape.M}x{shape.K}x{shape.N}: checking it takes about "
                f"{check_bytes(shape) / 1e9:.3g} GB of host memory, over half of this "
                f"machine's {host_memory_bytes() / 1e9:.3g} GB"
            )


def _csv_path(out: str | None) -> Path | None:
    """Where check.csv goes (``--out``), checked now: a folder that cannot be one, or a
    link at check.csv, is an error before anything runs."""
    if out is None:
        return None
    path = output_folder(Path(out)) / "check.csv"
    refuse_link(path)
    return path


def _checked(
    args: argparse.Namespace, opened: list[Any], variants: list[str], shapes: list[Any]
) -> list[Verdict]:
    """oclgrind's verdicts, then every variant that is safe to run at every shape, then
    the times (``--no-times``: none)."""
    print(f"checking {', '.join(variants)} on {', '.join(label for label, _ in opened)}: "
          f"{len(shapes)} shapes")  # fmt: skip
    found = _sanitized(args, opened, variants)
    unsafe = {v.variant for v in found if v.equal is None}
    safe = [v for v in variants if v not in unsafe]
    # A user's kernel runs in a process of its own, each step under a deadline
    # (XBACKEND_KERNEL_TIMEOUT): a hang or a crash is its verdict, and the next one runs.
    with Isolation() as isolation:
        verdicts = found + check_folders(opened, safe, shapes, args.seed, _say, isolation)
        if args.steps and not args.no_times:
            failed = {v.variant for v in verdicts if v.equal is None and v.shape is not None}
            timed = [v for v in safe if v not in failed]
            _times(opened, timed, schedule(args.steps)[-1], args.seed, isolation)
    return verdicts


def _sanitized(args: argparse.Namespace, opened: list[Any], variants: list[str]) -> list[Verdict]:
    """oclgrind's verdicts, where it runs (``--sanitize``), one run per variant: a report
    is a wrong kernel; one that writes out of bounds, or that oclgrind did not finish
    checking (its cap on reports, a crash, a timeout), is also not run natively (it could
    corrupt this process's memory), said as a verdict of its own."""
    path = shutil.which("oclgrind")
    wanted = args.sanitize == "on" or (args.sanitize == "auto" and path)
    opencl = next((backend for _, backend in opened if backend.name == "opencl"), None)
    if not wanted or opencl is None:
        return []
    if path is None:
        raise XBackendError("--sanitize on needs oclgrind (apt-get install oclgrind)")
    print(f"oclgrind: the OpenCL kernels at {len(SANITIZED_SHAPES)} small edge shapes first")
    verdicts = []
    for variant in [v for v in variants if v in opencl.variants()]:
        done = sanitize(args.folders, variant, path, args.seed)
        if done.finding is not None:
            source = families.family(opencl.variant_spec(variant).family).sources["opencl"]
            finding = done.finding
            code = f": {finding.code}" if finding.code else ""
            detail = f"{finding.what}: {source.name} line {finding.line}{code}"
            print(f"  oclgrind {variant}: WRONG ({detail})")
            verdicts.append(Verdict("oclgrind", variant, None, False, detail))
        writes = done.finding is not None and done.finding.writes_out_of_bounds
        if done.unfinished and not writes:
            print(f"  oclgrind {variant}: not finished ({done.unfinished})")
        why = "it writes out of bounds under oclgrind (fix that first)" if writes else ""
        if why or done.unfinished:
            verdicts.append(
                Verdict("opencl", variant, None, None, f"not run: {why or done.unfinished}")
            )
    return verdicts


def _say(verdict: Verdict) -> None:
    if verdict.equal is not True:
        shape = _shape(verdict)
        print(f"  {verdict.label} {verdict.variant} at {shape}: {verdict.word} ({verdict.detail})")


def _shape(verdict: Verdict) -> str:
    s = verdict.shape
    return f"{s.M}×{s.K}·{s.K}×{s.N}" if s is not None else "-"


def _summary(verdicts: list[Verdict], shapes: int) -> None:
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
        if found[-1].equal is None and found[-1].shape is not None and len(found) < shapes:
            last = found[-1]  # its process hung or died: the larger shapes were not run
            print(f"{label} {variant}: {last.word} at {_shape(last)} ({last.detail}); "
                  "its larger shapes not run")  # fmt: skip
            continue
        if not bad:
            print(f"{label} {variant}: equal at all {len(found)} shapes")
            continue
        shown = ", ".join(_shape(v) for v in bad[:6]) + (" ..." if len(bad) > 6 else "")
        print(f"{label} {variant}: {bad[0].word} at {len(bad)} of {len(found)} shapes: {shown}")


def _times(
    opened: list[Any], variants: list[str], shape: Any, seed: int, isolation: Isolation
) -> None:
    """Median kernel times at the largest size, the shipped kernels first."""
    print(f"\nmedian kernel time at {shape.M}×{shape.K}·{shape.K}×{shape.N}:")
    for label, backend in opened:
        for variant in (*REFERENCE_VARIANTS, *variants):
            if variant in backend.variants():
                seconds, clock = median_time_s(backend, variant, shape, seed, isolation, label)
                shown = f"{seconds * 1e6:10.1f} µs ({clock})" if seconds else "  not run"
                print(f"  {label:10s} {variant:20s} {shown}")


def _written(path: Path, verdicts: list[Verdict]) -> bool:
    """check.csv written whole (``safeio.atomic_write``: never through a link); False,
    said on stderr, where it could not be."""
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(["backend", "variant", "M", "K", "N", "verdict", "detail"])
    for v in verdicts:
        sizes = (v.shape.M, v.shape.K, v.shape.N) if v.shape else ("", "", "")
        writer.writerow([v.label, v.variant, *sizes, v.word, v.detail])
    try:
        atomic_write(path, text.getvalue())
    except UnsafePath as error:  # a link put there since --out was checked
        print(f"xbackend: error: {error}", file=sys.stderr)
        return False
    except OSError as error:  # a full disk, a file size limit: the error names check.csv
        print(f"xbackend: error: {error.filename}: {error.strerror or error}", file=sys.stderr)
        return False
    print(f"\nverdicts: {path}")
    return True
