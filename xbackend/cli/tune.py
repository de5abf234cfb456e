"""``xbackend tune``: search the tuned variants' parameters on one device; cache the best."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

import xbackend.cli.arguments as arguments
import xbackend.cli.cluster as cluster_options
from xbackend.cli.compare import open_backends
from xbackend.errors import XBackendError
from xbackend.problems import dtype_named, flops
from xbackend.sweep.isolation import DEFAULT_TIMEOUT_S, TIMEOUT_ENV
from xbackend.sweep.sizes import parse_shapes
from xbackend.tuning.objective import ENERGY, OBJECTIVES, RACE_S, WINDOW_S, objective_of
from xbackend.tuning.searching import FINALIST_TIME_S, SEARCHES, tunable, tuned_variants

if TYPE_CHECKING:
    from xbackend.backends.interface import Backend
    from xbackend.tuning import TuneResult

TUNE_SIZES_GPU = "4096x4096x4096,1000x3001x1000"  # a large output and a small one
TUNE_SIZES_CPU = "512x512x512,96x1001x96"


DESCRIPTION = (
    "Search the configurations of the tuned variants (vec4, vec4_db, warp, "
    "warp_db: tile shapes, group tiles, patches per thread, K splits) on one device, for "
    "mm and for the reduced product rmm, and check each result: coarse to fine by "
    "default (one configuration per block tile, then every one of the best two tiles, "
    "each at every K split), or every one (--search exhaustive). The best few and the "
    "variant's default configuration then race: timed again in turns, "
    "round-robin, until the 95% interval of the fastest's median lies below every "
    "other's, or --finalist-time. The winner is cached per device, variant, operation, "
    "dtype and shape class, with its margin over the runner-up; a best that does not "
    "beat the default is a tie, and the default is kept. Those variants then use the "
    "cached choice for every product (an rmm with no choice of its own takes mm's). "
    "Without a tune they take the choice of the tuning database shipped with xbackend "
    "(XBACKEND_TUNING_DB=off hides it), and on a device it does not hold, a default "
    "derived from the device's registers and the product's shape."
    " A fixed-tile variant (a family of --kernels that declares several tiles, or one named "
    "in --variants) is raced over its tiles the same way; a compare without --tile then "
    "runs it at the tile cached. With --objective energy, the joules per product take the "
    "time's place: each candidate's product is launched back to back for a window while "
    "the GPU's energy counter (NVML) steps at both ends, the search ranks the fewest "
    "joules first, the finalists race in windows, and the entry says it was tuned for "
    "energy (docs/energy.md)."
)


def add_parser(commands: Any) -> None:
    tune = commands.add_parser(
        "tune",
        help="search the tuned variants' parameters on one device and cache the best",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=DESCRIPTION,
        epilog="examples:\n"
        "  xbackend tune --backends cuda\n"
        "  xbackend tune --backends opencl:nvidia --variants warp_db --sizes 4096x4096x4096\n"
        "  xbackend tune --backends cuda --objective energy --energy 1\n"
        "  xbackend tune --show                         # print the cache, run nothing\n"
        "\nthe cache: $XDG_CACHE_HOME/xbackend/tuned.json (~/.cache by default), or the file "
        "named by XBACKEND_TUNE_CACHE",
    )
    tune.add_argument(
        "--backends", default=None, metavar="NAME",
        help="the one backend to tune: NAME or NAME:DEVICE, e.g. cuda, opencl:pocl",
    )  # fmt: skip
    # The names of earlier versions, kept working and out of --help.
    hidden = {"help": argparse.SUPPRESS, "default": argparse.SUPPRESS}
    tune.add_argument("--backend", dest="backends", **hidden)
    tune.add_argument("--ops", dest="op", **hidden)
    tune.add_argument(
        "--variants", default=None,
        help="variants to search (default: the tuned ones, and the variants of --kernels "
        "that declare several tiles); a fixed-tile variant named is raced over its tiles",
    )  # fmt: skip
    tune.add_argument(
        "--sizes", type=parse_shapes, default=None,
        help="products to tune on, MxKxN list; each stands for its shape class "
        f"(default on a GPU: {TUNE_SIZES_GPU}; elsewhere: {TUNE_SIZES_CPU})",
    )  # fmt: skip
    tune.add_argument(
        "--op", default="mm,rmm", metavar="LIST",
        help="operations to tune (default mm,rmm; rmm at sizes with even M and N)",
    )  # fmt: skip
    tune.add_argument("--dtype", default="float32", help="element type (default float32)")
    samples = arguments.bounded_int(1, arguments.MAX_SAMPLES)
    tune.add_argument(
        "--samples", type=samples, default=5, help="timed runs per candidate of the search"
    )
    _add_search_options(tune)
    _add_objective_options(tune)
    seed = arguments.bounded_int(0, arguments.MAX_SEED)
    tune.add_argument("--seed", type=seed, default=0, help="seed of the random operands")
    tune.add_argument(
        "--show", action="store_true", help="print the cache and exit (no backend needed)"
    )
    cluster_options.add_options(tune, each_gpu=True)
    tune.set_defaults(func=run)


def _add_search_options(tune: Any) -> None:
    """--search and --finalist-time: how candidates are searched and raced; --kernels:
    the user's families whose tiles are searched."""
    tune.add_argument(
        "--search", choices=SEARCHES, default="coarse",
        help="coarse to fine (default), or every candidate: slower, for checking the coarse "
        "search's choice",
    )  # fmt: skip
    tune.add_argument(
        "--finalist-time", type=arguments.non_negative(float), default=None,
        metavar="SECONDS",
        help="the finalists' race, at most, per variant, operation and size (default "
        f"{FINALIST_TIME_S:g} s, with --objective energy {RACE_S:g} s; 0: no race, the search's "
        "best is cached)",
    )  # fmt: skip
    tune.add_argument(
        "--kernels", action="append", default=None, metavar="DIR",
        help="a folder of your own kernels (docs/kernels.md): its variants that declare "
        "several tiles are tuned over them, each candidate in a process of its own. Repeat "
        "for several folders",
    )  # fmt: skip
    tune.add_argument(
        "--kernel-timeout", type=arguments.positive(float), default=None, metavar="SECONDS",
        help="the longest a step of a candidate of your own kernels (--kernels) may take: "
        "its build with the first runs, then each sample; longer ends its process and is "
        f"that candidate's failure (default: {DEFAULT_TIMEOUT_S:g}, or {TIMEOUT_ENV})",
    )  # fmt: skip


def _add_objective_options(tune: Any) -> None:
    """--objective and --energy: what the choice minimises, and the energy window."""
    tune.add_argument(
        "--objective", choices=OBJECTIVES, default="time",
        help="what the choice minimises: the median kernel time (default), or the joules "
        "per product read from the GPU's energy counter (needs an NVIDIA GPU and NVML: "
        "pip install 'xbackend[nvml]'; refused before tuning where there is none). The "
        "cache entry records it",
    )  # fmt: skip
    tune.add_argument(
        "--energy", type=arguments.positive(float), default=None, metavar="SECONDS",
        help="with --objective energy: each measurement's window of the product launched "
        f"back to back (default {WINDOW_S:g} s; two identical one-second runs read within "
        "4.2%% of each other on an H200; each candidate costs its window)",
    )  # fmt: skip


def _objective(args: argparse.Namespace) -> Any:
    """The ``tuning.Objective`` the options ask for; the race's default cap set by it.
    --energy without --objective energy, or an energy tune on a cluster, is refused."""
    from xbackend.tuning import Objective

    energy = args.objective == ENERGY
    if args.energy is not None and not energy:
        raise XBackendError("--energy SECONDS is the window of --objective energy; add it")
    cluster = (getattr(args, name, None) for name in ("gpus", "workers", "scheduler"))
    if energy and any(option is not None for option in cluster):  # before Dask is needed
        raise XBackendError("tune --objective energy runs here, on one device, not on a cluster")
    if args.finalist_time is None:
        args.finalist_time = RACE_S if energy else FINALIST_TIME_S
    return Objective(args.objective, args.energy or WINDOW_S)


def _show() -> int:
    """Print the cache's entries and what the database holds. Both are read as a backend
    reads them (``tune_cache.load_entries``): a malformed entry (a key without its
    fields, a number no float holds) is left out with a warning naming the file and key."""
    import xbackend.tuning.cache as tune_cache
    import xbackend.tuning.database as tuning_db
    from xbackend import tuning

    entries = tuning.load_entries()
    print(f"{tuning.cache_path()}: {len(entries)} entries")
    database = tuning.cached_choices().database()
    if database is None:
        print(f"the tuning database: hidden ({tuning_db.DB_ENV}={tuning_db.HIDDEN})")
    else:
        keys = filter(None, map(tune_cache.key_fields, database[1]))
        devices = sorted({fields[1] for fields in keys})
        print(f"the tuning database {database[0]}: {len(database[1])} entries, for "
              f"{', '.join(devices) or 'no device'}; your entries come first")  # fmt: skip
    for key, entry in sorted(entries.items()):
        rate = _gflops(entry.get("tflops"))
        margin = entry.get("margin")
        sure = f" margin {margin:+.1%}" if isinstance(margin, float | int) else ""
        sure += " (a tie: the default kept)" if entry.get("tie") is True else ""
        if objective_of(entry) == ENERGY:
            sure += f" [tuned for energy: {entry.get('joules_per_product', 0):.4g} J a product]"
        print(f"  {key}: {entry['params']} {rate} GFLOP/s at {entry.get('shape')}{sure}")
    return 0


def _print(results: list[TuneResult]) -> None:
    print()
    print(f"{'':<42} {'GFLOP/s':^17}")
    print(
        f"{'size':<21} {'op':<4} {'class':<7} {'variant':<8} {'untuned':>8} {'tuned':>8} "
        f"{'margin':>7} {'tuned 95%':>15}  choice"
    )
    for result in results:
        chosen = result.chosen
        before = _gflops(result.untuned_tflops)
        after = _gflops(chosen.tflops if chosen else None)
        choice = chosen.config.label if chosen else "nothing ran correctly"
        margin, interval = "—", "—"
        outcome = result.race
        if outcome is not None:
            if outcome.margin is not None:
                margin = f"{outcome.margin:+.1%}"
            work = flops(result.op, result.shape)
            low, high = (_gflops(work / s / 1e12) for s in reversed(outcome.winner.interval_s))
            interval = f"{low}–{high}"
            if outcome.tie:
                choice += " (a tie: the default kept)"
            elif not outcome.separated:
                choice += f" (not told apart in {outcome.seconds:g} s)"
        print(
            f"{result.shape!s:<21} {result.op:<4} {result.shape_class:<7} {result.variant:<8} "
            f"{before:>8} {after:>8} {margin:>7} {interval:>15}  {choice}"
        )
    print(
        "margin: the runner-up's median kernel time over the choice's, minus 1; tuned 95%: "
        "a bootstrap interval of the choice's median, from the finalists' race"
    )


def _print_energy(results: list[TuneResult]) -> None:
    """The table of an energy tune: joules per product before and after, the race's
    margin and interval of the choice's joules."""
    print()
    print(f"{'size':<21} {'op':<4} {'class':<7} {'variant':<8} {'untuned J':>10} "
          f"{'tuned J':>10} {'margin':>7} {'tuned 95% (J)':>21}  choice")  # fmt: skip
    for result in results:
        chosen = result.chosen
        before, after = (_joules(t.joules if t else None) for t in (result.untuned, chosen))
        choice = chosen.config.label if chosen else "nothing ran correctly"
        margin, interval, outcome = "—", "—", result.race
        if outcome is not None:
            if outcome.margin is not None:
                margin = f"{outcome.margin:+.1%}"
            interval = "–".join(_joules(value) for value in outcome.winner.interval_s)
            choice += " (a tie: the default kept)" if outcome.tie else ""
        print(f"{result.shape!s:<21} {result.op:<4} {result.shape_class:<7} {result.variant:<8} "
              f"{before:>10} {after:>10} {margin:>7} {interval:>21}  {choice}")  # fmt: skip
    print(
        "margin: the runner-up's median joules per product over the choice's, minus 1; tuned "
        "95%: a bootstrap interval of the choice's median, from the finalists' race of windows"
    )


def _joules(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def _gflops(tflops: object) -> str:
    """A rate in GFLOP/s (tuning.gflops_text), or a dash where there is none."""
    from xbackend.tuning import gflops_text

    if not isinstance(tflops, int | float) or isinstance(tflops, bool) or not tflops:
        return "—"
    return gflops_text(tflops)


def _variants(
    backend: Backend, label: str, named: str | None, ops: list[str], dtype: Any
) -> list[str] | None:
    """The variants ``--variants`` names (None: every tuned one), each tuned for some
    operation; exit 2 (XBackendError) where none of them has anything to tune for any of
    ``ops`` (``tune_search.tunable`` says why; ``tuning.tune`` says it of each operation
    that some of them lack)."""
    from xbackend.tuning import OPS

    tuned = list(dict.fromkeys(v for op in OPS for v in tuned_variants(backend, op)))
    if not tuned:
        raise XBackendError(f"{label} has no tuned variants (they are: vec4, warp, ...)")
    variants = arguments.comma_list(named) if named else None
    for variant in variants or ():
        if variant not in tuned:
            raise XBackendError(f"{label} {variant} is not tuned; tuned: {', '.join(tuned)}")
    plan, notes = tunable(backend, variants, ops, dtype)
    if not any(plan.values()):
        raise XBackendError(f"{label}: nothing to tune: {'; '.join(notes)}")
    return variants


def run(args: argparse.Namespace) -> int:
    from xbackend import tuning
    from xbackend.sweep.isolation import Isolation
    from xbackend.sweep.tune_isolation import Isolated

    if args.show:
        return _show()
    if not args.backends:
        raise XBackendError("tune needs --backends NAME: the one backend to tune, e.g. cuda")
    objective = _objective(args)
    if args.kernel_timeout is not None:  # read by the candidates' processes' deadline
        os.environ[TIMEOUT_ENV] = repr(args.kernel_timeout)
    if cluster_options.spec(args) is None:  # the workers write the caches of their hosts
        tuning.check_writable()
    dtype = dtype_named(args.dtype)
    ops = arguments.comma_list(args.op)
    for op in ops:
        if op not in tuning.OPS:
            raise XBackendError(f"cannot tune {op!r}; tuned operations: {', '.join(tuning.OPS)}")
    name = args.backends
    if name.strip().lower() == "auto" or len(arguments.comma_list(name)) != 1:
        raise XBackendError(f"tune runs on one backend, e.g. cuda or opencl:0: {name!r}")
    if cluster_options.spec(args) is not None:  # every device of it, on the cluster's workers
        return cluster_options.tune(args, ops, _print, (TUNE_SIZES_GPU, TUNE_SIZES_CPU))
    isolation = Isolation()  # its deadline (XBACKEND_KERNEL_TIMEOUT) checked before a search
    ((label, backend),) = open_backends(name, instead="name another with tune --backends")
    with isolation, backend:
        problem = tuning.counter_problem(backend) if objective.energy else None
        if problem:  # before anything is tuned: never a silent fall back to time
            raise XBackendError(problem)
        variants = _variants(backend, label, args.variants, ops, dtype)
        gpu = backend.device.kind == "gpu"
        sizes = args.sizes or parse_shapes(TUNE_SIZES_GPU if gpu else TUNE_SIZES_CPU)
        goal = f" for energy ({objective.window_s:g} s windows)" if objective.energy else ""
        print(f"tuning {label} on {backend.device.name}{goal}; cache {tuning.cache_path()}")
        results = tuning.tune(
            backend, variants, sizes, dtype, ops=ops, seed=args.seed, samples=args.samples,
            finalist_time_s=args.finalist_time, how=args.search, objective=objective,
            measure=Isolated(isolation),
        )  # fmt: skip
    (_print_energy if objective.energy else _print)(results)
    wrong = sum(trial.status == "wrong" for result in results for trial in result.trials)
    if wrong:
        print(f"{wrong} candidates computed wrong results and were not chosen")
    return 1 if wrong or any(result.best is None for result in results) else 0
