"""The command line: ``xbackend devices``, ``xbackend compare``, ``xbackend plot``."""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xbackend import results as results_io
from xbackend.backends.base import Backend, backend_names, backends, get_backend
from xbackend.errors import BackendUnavailable, XBackendError
from xbackend.problems import DTYPES, OPS, Reference, Shape, check, dtype_named, make_operands
from xbackend.runner import Plan, Target, equality_line, run
from xbackend.safeio import output_folder
from xbackend.sweep import (
    DEFAULT_BASE,
    DEFAULT_STEPS,
    PRESETS,
    Preset,
    growth,
    parse_shape,
    parse_shapes,
)
from xbackend.timing import format_seconds

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a reader that went away

# Bounds that keep a typo from meaning days of work or all of memory.
MAX_STEPS = 1000
MAX_BATCH = 65535  # the launch's z axis (CUDA's grid limit)
MAX_WARMUP = 1000
MAX_SAMPLES = 100_000
MAX_SEED = 2**63 - 1


def _comma_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _tiles(text: str) -> list[int]:
    try:
        tiles = [int(item) for item in _comma_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"tiles are integers, e.g. 8,16,32: {text!r}") from None
    if not tiles or min(tiles) < 1:
        raise argparse.ArgumentTypeError(f"tiles must be positive integers: {text!r}")
    return tiles


def _shape(text: str) -> Shape:
    try:
        return parse_shape(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _shapes(text: str) -> list[Shape]:
    try:
        return parse_shapes(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _choices(kind: str, known: Sequence[str]) -> Any:
    def parse(text: str) -> list[str]:
        items = _comma_list(text)
        unknown = [item for item in items if item not in known]
        if not items or unknown:
            raise argparse.ArgumentTypeError(
                f"unknown {kind} {', '.join(unknown) or repr(text)}; known: {', '.join(known)}"
            )
        return items

    return parse


_ops = _choices("operation", OPS)
_dtypes = _choices("dtype", list(DTYPES))


def _names(kind: str) -> Any:
    """A comma-separated list of names, none empty and none twice."""

    def parse(text: str) -> list[str]:
        items = _comma_list(text)
        if not items:
            raise argparse.ArgumentTypeError(f"no {kind} given: {text!r}")
        twice = sorted({item for item in items if items.count(item) > 1})
        if twice:
            raise argparse.ArgumentTypeError(f"{kind} named twice: {', '.join(twice)}")
        return items

    return parse


def _bounded_int(low: int, high: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}: {value}")
        if value > high:
            raise argparse.ArgumentTypeError(f"must be at most {high}: {value}")
        return value

    return parse


_positive_int = _bounded_int(1, 2**31 - 1)


def _non_negative(kind: type) -> Any:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not 0 <= value < float("inf"):
            raise argparse.ArgumentTypeError(f"must be a finite number, not negative: {value}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="xbackend",
        description="The same matrix products on CUDA, OpenCL and the CPU: naive and tiled "
        "kernels, checked against a float64 reference, timed and drawn side by side.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    devices = commands.add_parser(
        "devices",
        help="list every backend and device, and run a tiny product on each",
        description="List every backend: available or why not, its devices, and PASS/FAIL "
        "of a tiny matrix product for every variant on every device.",
    )
    devices.add_argument("--no-run", action="store_true", help="list only, run nothing")

    compare = commands.add_parser(
        "compare",
        help="run the growing-size comparison and write results and figures",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run naive and tiled matrix products on every requested backend over "
        "growing sizes; check each result; time each kernel; write results "
        "(JSON lines and CSV), figures, an HTML report and a summary table.",
        epilog="examples:\n"
        "  xbackend compare                                 # assignment schedule, all backends\n"
        "  xbackend compare --backends cuda,opencl,cpu\n"
        "  xbackend compare --backends opencl:nvidia,opencl:pocl --variants tiled --tile 8,16,32\n"
        "  xbackend compare --base 256x256 --steps 16       # squares up to 4096×4096\n"
        "  xbackend compare --sizes 1000x3001x1000,4096x4096\n"
        "  xbackend compare --op rmm --sizes 512x512,2048x2048 --tile 8,16,32\n"
        "  xbackend compare --op mm,bmm --batch 8 --dtype int32,float32,float64 --sizes 1024x1024\n"
        "\npresets (--preset NAME), one per experiment of the source documents; sized for a\n"
        "GPU when a GPU backend runs, smaller otherwise; other options override them:\n"
        + "".join(f"  {p.name:<11} {p.description}\n" for p in PRESETS.values()),
    )
    compare.add_argument(
        "--backends",
        default="auto",
        metavar="LIST",
        help="comma-separated NAME or NAME:DEVICE (device index or a piece of its name), "
        f"from: {', '.join(backend_names())}; 'auto' (default) is every available backend",
    )
    compare.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default=None,
        help="run one of the documents' experiments (listed below)",
    )
    compare.add_argument(
        "--op",
        type=_ops,
        default=None,
        metavar="LIST",
        help="operations: mm (default), bmm (batched), rmm (reduced), comma-separated",
    )
    compare.add_argument(
        "--dtype",
        type=_dtypes,
        default=None,
        metavar="LIST",
        help="element types: float32 (default), int32, float64, comma-separated",
    )
    compare.add_argument(
        "--batch",
        type=_bounded_int(1, MAX_BATCH),
        default=None,
        help="products per bmm (default: 8)",
    )
    compare.add_argument(
        "--variants",
        type=_names("variants"),
        default=None,
        metavar="LIST",
        help="variants to run, e.g. naive,tiled (default: every variant of each backend)",
    )
    compare.add_argument(
        "--tile",
        type=_tiles,
        default=None,
        metavar="LIST",
        help="tile sizes for the variants that take one, e.g. 16 or 8,16,32 "
        "(default: each variant's default, 16 on GPUs)",
    )
    schedule = compare.add_mutually_exclusive_group()
    schedule.add_argument(
        "--sizes",
        type=_shapes,
        default=None,
        metavar="LIST",
        help="explicit sizes: MxK (A is M×K, B is K×M) or MxKxN, comma-separated",
    )
    schedule.add_argument(
        "--base",
        type=_shape,
        default=None,
        metavar="MxK",
        help="first size of the growing schedule; step i multiplies it by i (default: 16x14)",
    )
    compare.add_argument(
        "--steps",
        type=_bounded_int(1, MAX_STEPS),
        default=None,
        help=f"number of growth steps (default: {DEFAULT_STEPS}: up to 608×532 · 532×608)",
    )
    compare.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default: results/run-<date-time>)",
    )
    compare.add_argument(
        "--seed", type=_bounded_int(0, MAX_SEED), default=0, help="seed of the random inputs"
    )
    compare.add_argument(
        "--warmup",
        type=_bounded_int(0, MAX_WARMUP),
        default=1,
        help="untimed runs after the first, checked run (default: 1)",
    )
    compare.add_argument(
        "--samples",
        type=_bounded_int(1, MAX_SAMPLES),
        default=10,
        help="timed samples per point at most (default: 10)",
    )
    compare.add_argument(
        "--sample-time",
        type=_non_negative(float),
        default=1.0,
        metavar="SECONDS",
        help="stop sampling a point after 3 samples once they took this long (default: 1)",
    )
    compare.add_argument(
        "--budget",
        type=_non_negative(float),
        default=20.0,
        metavar="SECONDS",
        help="skip a point whose estimated time exceeds this (default: 20; 0: never skip)",
    )
    compare.add_argument(
        "--resume",
        action="store_true",
        help="continue the results in --out: measure only the points not there yet",
    )
    compare.add_argument("--no-plots", action="store_true", help="write no figures")

    _results_command(
        commands,
        "report",
        help="write one HTML page (and Markdown) with every experiment's figures and tables",
        description="Write report.html (self-contained: figures embedded) and report.md "
        "from one or more results folders or results.jsonl files, running nothing.",
        writes="the report",
    )
    tune = commands.add_parser(
        "tune",
        help="search the tuned variants' parameters on one device and cache the best",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Time every candidate configuration of the tuned variants (vec4, vec4_db, "
        "warp, warp_db: tile shapes, group tiles, patches per thread, K splits) on one "
        "device, for mm and for the reduced product rmm, check each result, and cache the "
        "fastest per device, variant, operation, dtype and shape class. Those variants then "
        "use the cached choice for every product (an rmm with no choice of its own takes "
        "mm's).",
        epilog="examples:\n"
        "  xbackend tune --backend cuda\n"
        "  xbackend tune --backend opencl:nvidia --variants warp_db --sizes 4096x4096x4096\n"
        "  xbackend tune --backend opencl --show        # print the cache, run nothing\n"
        "\nthe cache: $XDG_CACHE_HOME/xbackend/tuned.json (~/.cache by default), or the file "
        "named by XBACKEND_TUNE_CACHE",
    )
    tune.add_argument(
        "--backend", required=True, help="NAME or NAME:DEVICE, e.g. cuda, opencl:pocl"
    )
    tune.add_argument(
        "--variants", default=None, help="tuned variants to search (default: all of them)"
    )
    tune.add_argument(
        "--sizes",
        type=parse_shapes,
        default=None,
        help="products to tune on, MxKxN list; each stands for its shape class "
        f"(default on a GPU: {TUNE_SIZES_GPU}; elsewhere: {TUNE_SIZES_CPU})",
    )
    tune.add_argument(
        "--ops",
        default="mm,rmm",
        help="operations to tune (default mm,rmm; rmm at sizes with even M and N)",
    )
    tune.add_argument("--dtype", default="float32", help="element type (default float32)")
    tune.add_argument(
        "--samples", type=_bounded_int(1, MAX_SAMPLES), default=5, help="timed runs per candidate"
    )
    tune.add_argument(
        "--seed", type=_bounded_int(0, MAX_SEED), default=0, help="seed of the random operands"
    )
    tune.add_argument("--show", action="store_true", help="print the cache and exit")
    _results_command(
        commands,
        "plot",
        help="redraw the figures from results files, running nothing",
        description="Draw the figures from one or more results folders or results.jsonl files.",
        writes="the figures",
    )
    return parser


def _results_command(commands: Any, name: str, *, help: str, description: str, writes: str) -> None:
    """A command that reads results files and writes into a folder."""
    command = commands.add_parser(name, help=help, description=description)
    command.add_argument("results", nargs="+", type=Path, metavar="RESULTS")
    command.add_argument(
        "--out", type=Path, default=None,
        help=f"folder for {writes} (default: the first results folder)",
    )  # fmt: skip


def _out_folder(args: argparse.Namespace) -> Path:
    first: Path = args.results[0]
    return output_folder(args.out or (first if first.is_dir() else first.parent))


def _warn(message: str) -> None:
    print(f"xbackend: warning: {message}", file=sys.stderr)


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that nothing more fails on a reader that went away."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    commands = {
        "devices": cmd_devices,
        "compare": cmd_compare,
        "report": cmd_report,
        "tune": cmd_tune,
        "plot": cmd_plot,
    }
    try:
        return commands[args.command](args)
    except (XBackendError, ValueError) as error:
        print(f"xbackend: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as error:  # a full disk, a file size limit, a path that cannot be
        if isinstance(error, BrokenPipeError):
            _silence_stdout()
            return EXIT_BROKEN_PIPE
        where = f"{error.filename}: " if error.filename else ""
        print(f"xbackend: error: {where}{error.strerror or error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("\nxbackend: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


# -- devices -------------------------------------------------------------------------------


def _smoke_test(backend: Backend) -> list[tuple[str, bool, str]]:
    """A tiny, awkwardly shaped product on every variant: (variant, passed, detail)."""
    shape = Shape(7, 5, 3)
    A, B = make_operands(shape, seed=1)
    reference = Reference.of(A, B)
    outcomes = []
    for variant in backend.runnable_variants():
        try:
            verdict = check(backend.matmul(A, B, variant=variant), reference)
        except Exception as error:
            outcomes.append((variant, False, f"{type(error).__name__}: {error}".splitlines()[0]))
        else:
            detail = f"max|err| {verdict.max_abs_error:.2g}" if verdict.equal else "wrong result"
            outcomes.append((variant, verdict.equal, detail))
    return outcomes


def _size(nbytes: int | None) -> str:
    if not nbytes:
        return "?"
    for unit in ("GiB", "MiB", "KiB"):
        scale = {"GiB": 2**30, "MiB": 2**20, "KiB": 2**10}[unit]
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes} B"


def cmd_devices(args: argparse.Namespace) -> int:
    failures = 0
    for info in backends():
        if not info.available:
            print(f"{info.name}: unavailable: {info.reason}")
            continue
        print(f"{info.name}: available, {len(info.devices)} device(s)")
        for index, device in enumerate(info.devices):
            print(
                f"  [{index}] {device.name} ({device.platform}; {device.kind}; "
                f"driver {device.driver_version or '?'}; memory {_size(device.global_mem_bytes)}; "
                f"{device.compute_units or '?'} compute units; "
                f"local/shared {_size(device.local_mem_bytes)}; cache {_size(device.cache_bytes)})"
            )
            if args.no_run:
                continue
            try:
                backend = get_backend(info.name, index)
            except Exception as error:
                failures += 1
                print(f"      FAIL  could not open: {type(error).__name__}: {error}")
                continue
            with backend:
                for variant, passed, detail in _smoke_test(backend):
                    failures += not passed
                    print(f"      {'PASS' if passed else 'FAIL'}  {variant:<6} 7×5 · 5×3  {detail}")
    return 1 if failures else 0


# -- compare -------------------------------------------------------------------------------


def _open_backends(text: str) -> list[tuple[str, Backend]]:
    """Open the backends named on the command line; explicit but unavailable is an error."""
    if text.strip().lower() == "auto":
        opened = []
        for name in backend_names():
            try:
                opened.append((name, get_backend(name)))
            except XBackendError as error:  # unavailable, or its device would not open
                print(f"auto: skipping {name}: {getattr(error, 'reason', error)}")
        if not opened:
            raise XBackendError("no backend is available here (see: xbackend devices)")
        return opened
    targets = [Target.parse(item) for item in _comma_list(text)]
    if not targets:
        raise XBackendError("--backends is empty")
    twice = sorted({t.label for t in targets if targets.count(t) > 1})
    if twice:
        raise XBackendError(f"--backends names {', '.join(twice)} twice")
    opened = []
    try:
        for target in targets:
            try:
                opened.append((target.label, get_backend(target.name, target.device)))
            except BackendUnavailable as error:
                raise XBackendError(
                    f"{error}\n(run 'xbackend devices' for every backend's status, or "
                    f"leave {target.name} out of --backends)"
                ) from None
    except BaseException:
        for _, backend in opened:
            backend.close()
        raise
    return opened


def _default_out() -> Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("results") / f"run-{stamp}"


def _plan_shapes(args: argparse.Namespace, preset: Preset | None, gpu: bool) -> list[Shape]:
    if args.sizes is not None:
        return list(args.sizes)
    if preset is not None and args.base is None and args.steps is None:
        return preset.shapes(gpu)
    return growth(args.base or DEFAULT_BASE, args.steps or DEFAULT_STEPS)


def cmd_compare(args: argparse.Namespace) -> int:
    if args.resume and args.out is None:
        raise XBackendError("--resume needs --out: the folder of the run to continue")
    out = output_folder(args.out or _default_out())
    with results_io.RunLock(out):  # one run per folder; checked and held from here on
        jsonl = out / results_io.JSONL_NAME
        if (jsonl.exists() or jsonl.is_symlink()) and not args.resume:
            raise XBackendError(
                f"{out} already holds results; add --resume to continue them, "
                "or choose another --out"
            )
        preset = PRESETS[args.preset] if args.preset else None
        opened = _open_backends(args.backends)
        try:
            gpu = any(backend.device.kind == "gpu" for _, backend in opened)
            plan = _plan(args, preset, gpu)
            _check_plan(plan, opened)
        except BaseException:
            for _, backend in opened:
                backend.close()
            raise
        return _run_and_report(args, plan, opened, out)


def _plan(args: argparse.Namespace, preset: Preset | None, gpu: bool) -> Plan:
    return Plan(
        shapes=_plan_shapes(args, preset, gpu),
        ops=args.op or list(preset.ops if preset else ["mm"]),
        dtypes=args.dtype or list(preset.dtypes if preset else ["float32"]),
        batch=args.batch or (preset.batch if preset else 8),
        variants=args.variants or (list(preset.variants) if preset and preset.variants else None),
        tiles=args.tile or (list(preset.tiles) if preset and preset.tiles else None),
        preset=preset.name if preset else None,
        seed=args.seed,
        warmup=args.warmup,
        samples=args.samples,
        max_sample_time_s=args.sample_time,
        budget_s=args.budget,
    )


def _run_and_report(
    args: argparse.Namespace, plan: Plan, opened: list[tuple[str, Backend]], out: Path
) -> int:
    """Run the plan, then print the summary and write the figures and the report."""
    records: list[results_io.PointRecord] = []
    interrupted = False
    try:
        for label, backend in opened:
            print(f"{label}: {backend.device.name} ({backend.device.platform})")
        what = f"{', '.join(plan.ops)} in {', '.join(plan.dtypes)}"
        if plan.preset:
            what = f"preset {plan.preset}: {what}"
        shapes = plan.shapes
        print(f"{what}; {len(shapes)} sizes from {shapes[0]} to {shapes[-1]}; results into {out}/")
        try:
            records = run(plan, opened, out, resume=args.resume)
        except KeyboardInterrupt:
            interrupted = True
            print(
                f"\ninterrupted: every finished point is kept in {out}; "
                f"continue with: xbackend compare ... --out {out} --resume",
                file=sys.stderr,
            )
        except BrokenPipeError:  # e.g. | head: stop as a Unix tool does, keeping every point
            _silence_stdout()
            return EXIT_BROKEN_PIPE
    finally:
        for _, backend in opened:
            backend.close()

    points = results_io.latest(results_io.load([out])[1])
    print()
    print(summary_table(points))
    if not args.no_plots and any(p["status"] == "ok" for p in points):
        try:
            figures = _draw(points, out)
            print(f"\nfigures: {', '.join(str(f) for f in figures if f.suffix == '.png')}")
            from xbackend.report import write_report

            print(f"report: {write_report([out], out)[0]}")
        except KeyboardInterrupt:
            interrupted = True
            print(
                f"\ninterrupted while drawing: every point is kept in {out}; "
                f"draw again with: xbackend report {out}",
                file=sys.stderr,
            )
    print(f"results: {out / results_io.JSONL_NAME}, {out / results_io.CSV_NAME}")
    if interrupted:
        return EXIT_INTERRUPTED
    wrong = [r for r in records if r.status in ("mismatch", "error")]
    return 1 if wrong else 0


def _check_plan(plan: Plan, opened: list[tuple[str, Backend]]) -> None:
    """Refuse, before running anything, a plan that cannot mean what it says."""
    if "rmm" in plan.ops:
        odd = [str(shape) for shape in plan.shapes if shape.M % 2 or shape.N % 2]
        if odd:
            raise XBackendError(f"rmm needs even M and N; these sizes are not: {', '.join(odd)}")
    if plan.variants is None:
        return
    known = {v for _, backend in opened for op in plan.ops for v in backend.variants(op)}
    unknown = [variant for variant in plan.variants if variant not in known]
    if unknown:
        raise XBackendError(
            f"unknown variant(s) {', '.join(unknown)}; for {', '.join(plan.ops)} these "
            f"backends have: {', '.join(sorted(known))}"
        )


def _draw(points: list[dict[str, Any]], folder: Path) -> list[Path]:
    from xbackend.plots import draw

    return draw(points, folder)


def summary_table(points: list[dict[str, Any]]) -> str:
    """One row per line of the comparison: verified points, largest size, speed."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for point in points:
        # label, device, op, variant, tile, dtype: the point's key without batch and size
        groups[results_io.point_key(point)[:6]].append(point)
    header = ("backend", "device", "op", "variant", "tile", "dtype", "equal", "skipped",
              "largest verified", "kernel", "end-to-end", "GFLOP/s")  # fmt: skip
    rows = [header]
    for (label, device, op, variant, tile, dtype), group in groups.items():
        measured = [p for p in group if p["status"] in ("ok", "mismatch")]
        good = [p for p in group if p["status"] == "ok"]
        failed = [p for p in group if p["status"] == "error"]
        skipped = len(group) - len(measured) - len(failed)
        equal = f"{len(good)}/{len(measured) + len(failed)}"
        size = kernel = end_to_end = gflops = "—"
        if good:
            top = max(good, key=lambda p: (p["flops"], p["M"]))
            batch = f"{top.get('batch', 1)}×" if op == "bmm" else ""
            size = f"{batch}{top['M']}×{top['K']}·{top['K']}×{top['N']}"
            kernel = format_seconds(top["kernel_s"]["median"])
            end_to_end = format_seconds(top["end_to_end_s"]["median"])
            gflops = f"{top['gflops']:.4g}"
        rows.append((label, device[:28], op, variant, str(tile or "—"), dtype, equal,
                     str(skipped), size, kernel, end_to_end, gflops))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    all_measured = [p for p in points if p["status"] in ("ok", "mismatch", "error")]
    verdict = sum(p["status"] == "ok" for p in all_measured)
    lines.append(
        f"\ncode equality: {verdict}/{len(all_measured)} measured points equal "
        "to the float64 reference within the tolerance"
    )
    return "\n".join(lines)


# -- plot --------------------------------------------------------------------------------------


def cmd_report(args: argparse.Namespace) -> int:
    from xbackend.report import write_report

    written = write_report(list(args.results), _out_folder(args))
    for path in written:
        if path.suffix in (".html", ".md"):
            print(f"report: {path}")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    points = results_io.latest(results_io.load(args.results, warn=_warn)[1])
    figures = _draw(points, _out_folder(args))
    print(summary_table(points))
    print(f"\nfigures: {', '.join(str(f) for f in figures)}")
    return 0


__all__ = ["build_parser", "equality_line", "main", "summary_table"]


# -- tune ----------------------------------------------------------------------------------

TUNE_SIZES_GPU = "4096x4096x4096,2048x2048x2048,1000x3001x1000"
TUNE_SIZES_CPU = "512x512x512,96x1001x96"


def cmd_tune(args: argparse.Namespace) -> int:
    from xbackend import tuning

    if args.show:
        entries = tuning.load_entries()
        print(f"{tuning.cache_path()}: {len(entries)} entries")
        for key, entry in sorted(entries.items()):
            print(
                f"  {key}: {entry['params']} {entry.get('tflops')} TFLOP/s at {entry.get('shape')}"
            )
        return 0
    dtype = dtype_named(args.dtype)
    ops = _comma_list(args.ops)
    for op in ops:
        if op not in tuning.OPS:
            raise XBackendError(f"cannot tune {op!r}; tuned operations: {', '.join(tuning.OPS)}")
    if args.backend.strip().lower() == "auto" or len(_comma_list(args.backend)) != 1:
        raise XBackendError(f"tune runs on one backend, e.g. cuda or opencl:0: {args.backend!r}")
    ((label, backend),) = _open_backends(args.backend)
    with backend:
        tuned = [v for v in backend.variants() if backend.variant_spec(v).tuned]
        if not tuned:
            raise XBackendError(f"{label} has no tuned variants (they are: vec4, warp, ...)")
        variants = _comma_list(args.variants) if args.variants else tuned
        for variant in variants:
            if variant not in tuned:
                raise XBackendError(f"{label} {variant} is not tuned; tuned: {', '.join(tuned)}")
        gpu = backend.device.kind == "gpu"
        sizes = args.sizes or parse_shapes(TUNE_SIZES_GPU if gpu else TUNE_SIZES_CPU)
        print(f"tuning {label} on {backend.device.name}; cache {tuning.cache_path()}")
        results = tuning.tune(
            backend, variants, sizes, dtype, ops=ops, seed=args.seed, samples=args.samples
        )
    print()
    print(f"{'size':<21} {'op':<4} {'class':<7} {'variant':<8} {'untuned':>8} {'tuned':>8}  best")
    for result in results:
        best = result.best
        before = f"{result.untuned_tflops:.2f}" if result.untuned_tflops else "—"
        after = f"{best.tflops:.2f}" if best and best.tflops else "—"
        choice = best.config.label if best else "nothing ran correctly"
        print(
            f"{result.shape!s:<21} {result.op:<4} {result.shape_class:<7} {result.variant:<8} "
            f"{before:>8} {after:>8}  {choice}"
        )
    wrong = sum(trial.status == "wrong" for result in results for trial in result.trials)
    if wrong:
        print(f"{wrong} candidates computed wrong results and were not chosen")
    return 1 if wrong or any(result.best is None for result in results) else 0
