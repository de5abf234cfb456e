"""``xbackend compare``: run the comparison, then print the summary and draw the figures
and the report, each once, from the results read once."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

import xbackend.cli.arguments as arguments
import xbackend.cli.cluster as cluster_options
import xbackend.cli.sampling as sampling
import xbackend.cli.selection as selection
from xbackend import Backend, backend_names, get_backend
from xbackend import results as results_io
from xbackend.cli.exits import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    interrupted_before_recording,
    silence_stdout,
)
from xbackend.cli.summary import summary_table
from xbackend.errors import BackendUnavailable, XBackendError
from xbackend.operations import DEFAULT, operation
from xbackend.problems import AUTO, CHECKS, FREIVALDS_ABOVE_FLOPS, Shape
from xbackend.results.plan import Plan, Target
from xbackend.safeio import output_folder
from xbackend.sweep import earlier, fairness
from xbackend.sweep.configs import VARIANT_SETS, resolve_variants
from xbackend.sweep.isolation import DEFAULT_TIMEOUT_S, TIMEOUT_ENV
from xbackend.sweep.progress import Mode, SweepDisplay, choose_mode
from xbackend.sweep.runner import holds_points, plan_lines
from xbackend.sweep.runner import run as run_plan
from xbackend.sweep.sizes import DEFAULT_BASE, DEFAULT_STEPS, PRESETS, Preset, growth

if TYPE_CHECKING:
    from xbackend.analysis.roofs import Roofs
    from xbackend.cluster import Cluster
    from xbackend.figures.plots import Drawn

_EXAMPLES = (
    "examples:\n"
    "  xbackend compare                                 # assignment schedule, all backends\n"
    "  xbackend compare --variants ladder               # every tuned rung instead\n"
    "  xbackend compare --dry-run                       # the plan, run nothing\n"
    "  xbackend compare --backends cuda,opencl,cpu\n"
    "  xbackend compare --backends opencl:nvidia,opencl:pocl --variants tiled --tile 8,16,32\n"
    "  xbackend compare --base 256x256 --steps 16       # squares up to 4096×4096\n"
    "  xbackend compare --sizes 1000x3001x1000,4096x4096\n"
    "  xbackend compare --op rmm --sizes 512x512,2048x2048 --tile 8,16,32\n"
    "  xbackend compare --op mm,bmm --batch 8 --dtype int32,float32,float64 --sizes 1024x1024\n"
)


def add_parser(commands: Any) -> None:
    compare = commands.add_parser(
        "compare",
        help="run the growing-size comparison and write results and figures",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run naive and tiled matrix products on every requested backend over "
        "growing sizes; check each result; time each kernel; write results "
        "(JSON lines and CSV), figures, an HTML report and a summary table.",
        epilog=_EXAMPLES
        + "\npresets (--preset NAME), one per experiment of the source documents; sized for a\n"
        "GPU when a GPU backend runs, smaller otherwise; other options override them:\n"
        + "".join(f"  {p.name:<11} {p.description}\n" for p in PRESETS.values()),
    )
    _what(compare)
    _thoroughness(compare)
    sampling.add_options(compare)
    cluster_options.add_options(compare, each_gpu=True)
    compare.set_defaults(func=run)


def _what(compare: argparse.ArgumentParser) -> None:
    """Options that say what to run and at which sizes: the shared selection, then the
    preset, the batch and the growing schedule."""
    sizes = selection.add_options(
        compare, out="results/run-<date-time>", sizes=selection.SIZES_HELP
    )
    assert sizes is not None
    sizes.add_argument(
        "--base", type=arguments.shape, default=None, metavar="MxK",
        help="first size of the growing schedule; step i multiplies it by i (default: 16x14)",
    )  # fmt: skip
    compare.add_argument(
        "--steps", type=arguments.bounded_int(1, arguments.MAX_STEPS), default=None,
        help=f"number of growth steps (default: {DEFAULT_STEPS}: up to 608×532 · 532×608)",
    )  # fmt: skip
    compare.add_argument(
        "--preset", choices=sorted(PRESETS), default=None,
        help="run one of the documents' experiments (listed below)",
    )  # fmt: skip
    compare.add_argument(
        "--batch", type=arguments.bounded_int(1, arguments.MAX_BATCH), default=None,
        help="products per bmm (default: 8)",
    )  # fmt: skip


def _thoroughness(compare: argparse.ArgumentParser) -> None:
    """Options that say where to write, how thoroughly to measure, and what to keep."""
    compare.add_argument(
        "--check", choices=CHECKS, default=AUTO,
        help="how each result is verified: 'full' against a float64 reference, element by "
        "element; 'freivalds' with random vectors (C·x against A·(B·x): no float64 copies, "
        "coarser); 'auto' (default): full up to "
        f"{FREIVALDS_ABOVE_FLOPS:.2g} flops (8192³) where the host holds its reference",
    )  # fmt: skip
    compare.add_argument(
        "--budget", type=arguments.non_negative(float), default=20.0, metavar="SECONDS",
        help="skip a point whose estimated time exceeds this (default: 20; 0: never skip)",
    )  # fmt: skip
    compare.add_argument(
        "--kernel-timeout", type=arguments.positive(float), default=None, metavar="SECONDS",
        help="the longest a step of a point of your own kernels (--kernels) may take: the "
        "build with the first runs, then each sample; longer is that point's error "
        f"(default: {DEFAULT_TIMEOUT_S:g}, or {TIMEOUT_ENV})",
    )  # fmt: skip
    compare.add_argument(
        "--resume", action="store_true",
        help="continue the results in --out: measure only the points not there yet",
    )  # fmt: skip
    compare.add_argument("--no-plots", action="store_true", help="write no figures")
    compare.add_argument(
        "--dry-run", action="store_true",
        help="print the plan (configurations × sizes, known skips, predicted time); "
        "run nothing, write nothing",
    )  # fmt: skip
    compare.add_argument(
        "--table", action="store_true", help="print a table per size after the summary"
    )
    compare.add_argument(
        "-q", "--quiet", action="store_true", help="print only the summary and errors"
    )


def _open_auto(say: Callable[[str], None]) -> list[tuple[str, Backend]]:
    opened = []
    for name in backend_names():
        try:
            opened.append((name, get_backend(name)))
        except XBackendError as error:  # unavailable, or its device would not open
            say(f"auto: skipping {name}: {getattr(error, 'reason', error)}")
    if not opened:
        raise XBackendError("no backend is available here (see: xbackend devices)")
    return opened


def open_backends(
    text: str, *, say: Callable[[str], None] = print, instead: str = ""
) -> list[tuple[str, Backend]]:
    """Open the backends named on the command line; explicit but unavailable is an error
    (``instead``: what to do then, by default leave it out of ``--backends``)."""
    if text.strip().lower() == "auto":
        return _open_auto(say)
    targets = [Target.parse(item) for item in arguments.comma_list(text)]
    if not targets:
        raise XBackendError("--backends is empty")
    twice = sorted({t.label for t in targets if targets.count(t) > 1})
    if twice:
        raise XBackendError(f"--backends names {', '.join(twice)} twice")
    opened: list[tuple[str, Backend]] = []
    with contextlib.ExitStack() as stack:  # those opened are closed if a later one fails
        for target in targets:
            try:
                opened.append((target.label, get_backend(target.name, target.device)))
            except BackendUnavailable as error:
                instead = instead or f"leave {target.name} out of --backends"
                raise XBackendError(
                    f"{error}\n(run 'xbackend devices' for every backend's status, or {instead})"
                ) from None
            stack.callback(opened[-1][1].close)
        stack.pop_all()
    return opened


class Local:
    """The serial run on this machine's backends: what ``compare`` asks of a cluster
    (``cluster/session.Cluster``), done here."""

    def __init__(self, backends: str, say: Callable[[str], None]):
        self.backends, self.say = backends, say

    def offered(self) -> list[tuple[str, Backend]]:
        return open_backends(self.backends, say=self.say)

    plan_lines = staticmethod(plan_lines)
    run = staticmethod(run_plan)


def _closing(opened: list[tuple[str, Backend]]) -> contextlib.ExitStack:
    """A stack that closes each opened backend once, last opened first: on leaving the
    run, or earlier where ``close()`` is called (after the sweep, before the report)."""
    stack = contextlib.ExitStack()
    for _, backend in opened:
        stack.callback(backend.close)
    return stack


def _plan_shapes(args: argparse.Namespace, preset: Preset | None, gpu: bool) -> list[Shape]:
    if args.sizes is not None:
        return list(args.sizes)
    if preset is not None and args.base is None and args.steps is None:
        return preset.shapes(gpu)
    return growth(args.base or DEFAULT_BASE, args.steps or DEFAULT_STEPS)


def _plan(
    args: argparse.Namespace, preset: Preset | None, opened: list[tuple[str, Backend]]
) -> Plan:
    gpu = any(backend.device.kind == "gpu" for _, backend in opened)
    ops = args.op or list(preset.ops if preset else [DEFAULT])
    words = args.variants or (
        ["assignment"] if preset is None else list(preset.variants or ["all"])
    )
    return Plan(
        shapes=_plan_shapes(args, preset, gpu),
        ops=ops,
        dtypes=args.dtype or list(preset.dtypes if preset else ["float32"]),
        batch=args.batch or (preset.batch if preset else 8),
        variants=resolve_variants(words, opened, ops),
        tiles=args.tile or (list(preset.tiles) if preset and preset.tiles else None),
        preset=preset.name if preset else None,
        seed=args.seed,
        budget_s=args.budget,
        check=args.check,
        sampling=sampling.sampling_of(args),
    )


def _check_plan(plan: Plan, opened: list[tuple[str, Backend]], asked: list[str]) -> None:
    """Refuse, before running anything, a plan that cannot mean what it says (``asked``:
    the variants named on the command line)."""
    for op in plan.ops:
        problems = [(s, operation(op).shape_problem(s.M, s.N)) for s in plan.shapes]
        refused = [(shape, problem) for shape, problem in problems if problem]
        if refused:
            sizes = ", ".join(str(shape) for shape, _ in refused)
            raise XBackendError(f"{refused[0][1]}; these sizes are not: {sizes}")
    if plan.variants is not None and not plan.variants:
        raise XBackendError(f"these backends have no variants of {', '.join(asked)} to run")
    known = {v for _, backend in opened for op in plan.ops for v in backend.variants(op)}
    unknown = [v for v in asked if v not in known and v not in VARIANT_SETS]
    if unknown:
        raise XBackendError(
            f"unknown variant(s) {', '.join(unknown)}; for {', '.join(plan.ops)} these "
            f"backends have: {', '.join(sorted(known))}"
        )


def run(args: argparse.Namespace) -> int:
    """The comparison, here or on the cluster the options ask for (``cli/cluster.py``)."""
    with cluster_options.started(args, say=_quiet_print if args.quiet else print) as cluster:
        return _run(args, cluster)


def _run(args: argparse.Namespace, cluster: Cluster | None) -> int:
    if args.resume and args.out is None:
        raise XBackendError("--resume needs --out: the folder of the run to continue")
    if args.kernel_timeout is not None:  # the run header's settings keep it
        os.environ[TIMEOUT_ENV] = repr(args.kernel_timeout)
    preset = PRESETS[args.preset] if args.preset else None
    console = Console()
    mode = choose_mode(console, args.quiet)
    runner: Cluster | Local = cluster or Local(
        args.backends, _quiet_print if mode == "quiet" else print
    )
    try:
        opened = runner.offered()
    except KeyboardInterrupt:
        return interrupted_before_recording()
    with _closing(opened) as backends:
        try:  # everything checked before the folder is made: a refused run leaves nothing
            plan = _plan(args, preset, opened)
            _check_plan(plan, opened, args.variants or [])
            cluster_options.check_resume(args, [label for label, _ in opened])
            if args.dry_run:
                return _dry_run(args, plan, opened, runner)
            out = output_folder(args.out or arguments.default_out("run"))
            lock = results_io.RunLock(out)  # one run per folder; held from here on
        except KeyboardInterrupt:
            return interrupted_before_recording()
        with lock:
            jsonl = out / results_io.JSONL_NAME
            if (jsonl.exists() or jsonl.is_symlink()) and not args.resume:
                raise XBackendError(
                    f"{out} already holds results; add --resume to continue them, "
                    "or choose another --out"
                )
            display = SweepDisplay(mode, console=console)
            return _run_and_report(args, plan, opened, out, display, runner, backends)


def _quiet_print(text: str) -> None:
    """What --quiet leaves out."""


def _dry_run(
    args: argparse.Namespace, plan: Plan, opened: list[tuple[str, Backend]], runner: Cluster | Local
) -> int:
    """Print what the plan would run, and how long it may take; run and write nothing."""
    out = args.out or Path("results/run-<date-time>")
    _announce(plan, opened, out)
    _audit(plan, opened, say=print)
    recorded: list[results_io.PointRecord] = []
    holds = (out / results_io.JSONL_NAME).is_file()
    if holds:  # read, never written: what a resume would keep
        recorded = results_io.load([out]).points
    lines = runner.plan_lines(plan, opened, recorded)
    # What the runs already beside --out took, where the plan's own say nothing (issue 53).
    for line in earlier.amended(lines, plan, opened, recorded, earlier.read(out.parent, out)):
        print(line)
    if holds and not args.resume:
        print(f"{out} already holds results: the run needs --resume to continue them "
              "(or another --out)")  # fmt: skip
    print("dry run: nothing was measured or written")
    return 0


def _audit(
    plan: Plan, opened: list[tuple[str, Backend]], say: Callable[[str], None]
) -> list[fairness.Audit]:
    """The audit of the first two compiled backends (``fairness.audits``), said as it
    starts (it builds each kernel and reads its machine code: 25 s for every variant on
    an H200, the first time) and as it ends."""
    if fairness.audited_pair(opened):
        say("auditing what each pair of APIs would run (docs/fairness.md) ...")
    audited = fairness.audits(plan, opened)
    for line in fairness.summary(audited):
        say(line)
    return audited


def _announce(plan: Plan, opened: list[tuple[str, Backend]], out: Path) -> None:
    for label, backend in opened:
        print(f"{label}: {backend.device.name} ({backend.device.platform})")
    what = f"{', '.join(plan.ops)} in {', '.join(plan.dtypes)}"
    if plan.preset:
        what = f"preset {plan.preset}: {what}"
    variants = ", ".join(plan.variants) if plan.variants is not None else "every variant"
    shapes = plan.shapes
    print(
        f"{what}; variants {variants}; {len(shapes)} sizes from {shapes[0]} to {shapes[-1]}; "
        f"results into {out}/"
    )


def _run_and_report(
    args: argparse.Namespace,
    plan: Plan,
    opened: list[tuple[str, Backend]],
    out: Path,
    display: SweepDisplay,
    runner: Cluster | Local,
    backends: contextlib.ExitStack,
) -> int:
    """Run the plan, then print the summary and write the figures and the report (the
    backends closed first: ``backends``)."""
    records: list[results_io.PointRecord] = []
    interrupted = False
    try:
        try:
            if display.mode != "quiet":
                _announce(plan, opened, out)
            audited = _audit(plan, opened, _quiet_print if display.mode == "quiet" else print)
            if audited:
                fairness.write_csv(audited, out / fairness.CSV_NAME)
            records = runner.run(plan, opened, out, resume=args.resume, display=display)
        except KeyboardInterrupt:
            if not holds_points(out):  # stopped before its first point: nothing to resume
                return interrupted_before_recording()
            interrupted = True
            print(
                f"\ninterrupted: every finished point is kept in {out}; "
                f"continue with: xbackend compare ... --out {out} --resume",
                file=sys.stderr,
            )
        except BrokenPipeError:  # e.g. | head: stop as a Unix tool does, keeping every point
            silence_stdout()
            return EXIT_BROKEN_PIPE
    finally:
        backends.close()
    interrupted = _summarize(args, out, display.console, display.mode) or interrupted
    print(f"results: {out / results_io.JSONL_NAME}, {out / results_io.CSV_NAME}")
    if interrupted:
        return EXIT_INTERRUPTED
    wrong = [r for r in records if r.status in ("mismatch", "error")]
    return 1 if wrong else 0


def _summarize(args: argparse.Namespace, out: Path, console: Console, mode: Mode) -> bool:
    """Print the summary (and the table per size); draw the figures and the report (each
    figure once). Whether the drawing was interrupted."""
    from xbackend.analysis.roofs import roofs
    from xbackend.analysis.tables import size_table, write_size_csv

    loaded = results_io.load([out])
    points = results_io.latest(loaded.points)
    measured = roofs(loaded.runs.values())  # the devices' ceilings, from the run headers
    print()
    print(summary_table(points))
    write_size_csv(points, out, measured)
    if args.table:
        print()
        width = console.width if mode == "live" else None
        print(size_table(points, width=width, roofs=measured))
    if args.no_plots or not any(p.status == "ok" and p.trusted for p in points):
        return False  # nothing to draw: every point failed, or beat the device's peak
    try:
        with _drawing(console, mode), warnings.catch_warnings():
            # The figures' own warnings (a layout matplotlib could not fit) are not the
            # user's business here; the figures are checked by looking at them.
            warnings.simplefilter("ignore")
            drawn = draw(points, out, measured)
            from xbackend.report.page import write_report_of

            report = write_report_of(loaded, out, sources=[out], drawn=drawn)[0]
        print(f"\nfigures: {', '.join(str(f) for f in drawn.written if f.suffix == '.png')}")
        print(f"report: {report}")
    except KeyboardInterrupt:
        print(
            f"\ninterrupted while drawing: every point is kept in {out}; "
            f"draw again with: xbackend report {out}",
            file=sys.stderr,
        )
        return True
    return False


@contextlib.contextmanager
def _drawing(console: Console, mode: Mode) -> Iterator[None]:
    """A spinner on a terminal while the figures and the report are drawn."""
    if mode == "live":
        with console.status("drawing the figures and the report…"):
            yield
        return
    yield


def draw(points: list[results_io.PointRecord], folder: Path, roofs: Roofs | None = None) -> Drawn:
    """The generic figures, and the roofline where ``roofs`` has the points' ceilings,
    written into ``folder`` (matplotlib imported only now)."""
    from xbackend.figures.plots import draw_figures

    return draw_figures(points, folder, roofs=roofs)
