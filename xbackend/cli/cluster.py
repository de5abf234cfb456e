"""The cluster options of ``compare`` and ``tune``: ``--gpus``, ``--workers``,
``--scheduler`` (one of them; none: the serial run), and ``--alone``.

Dask is imported only when one of them is given (``xbackend.cluster``); without the
``dask`` extra, that is an error naming it.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import xbackend.cli.arguments as arguments

if TYPE_CHECKING:
    from xbackend.cluster import Cluster, ClusterSpec
    from xbackend.tuning import TuneResult

GROUP_TITLE = "cluster (Dask distributed: pip install 'xbackend[dask]'; docs/cluster.md)"
MAX_WORKERS = 256


def add_options(parser: argparse.ArgumentParser, *, each_gpu: bool = False) -> None:
    """Add the cluster options to ``parser`` (``each_gpu``: and ``--each-gpu``, for a
    command whose GPUs may share the points; ``tune`` always tunes each GPU)."""
    group = parser.add_argument_group(GROUP_TITLE)
    which = group.add_mutually_exclusive_group()
    which.add_argument(
        "--gpus", type=_gpus, default=None, metavar="all|LIST",
        help="a local cluster of one worker per GPU (every GPU, or these ordinals, e.g. "
        "0,1), each holding every GPU backend of --backends on its GPU, plus one worker "
        "per other backend (the CPU)",
    )  # fmt: skip
    which.add_argument(
        "--workers", type=arguments.bounded_int(1, MAX_WORKERS), default=None, metavar="N",
        help="a local cluster of N workers, this host's devices dealt round-robin to them",
    )  # fmt: skip
    which.add_argument(
        "--scheduler", default=None, metavar="ADDRESS",
        help="run on an existing Dask cluster (e.g. tcp://host:8786): each worker holds "
        "every device of --backends it has; lines per device model",
    )  # fmt: skip
    if each_gpu:
        group.add_argument(
            "--each-gpu", action="store_true",
            help="with --gpus: measure every point on every GPU (lines cuda:0, cuda:1, ...), "
            "to compare the GPUs; by default the GPUs share the plan's points (GPUs of one "
            "model: the lines of a serial run, each measured once, on one of them)",
        )  # fmt: skip
    group.add_argument(
        "--alone", choices=("cpu", "all"), default="cpu",
        help="which points run alone on their host: 'cpu' (default) those of processors "
        "(the CPU backend, OpenCL on the CPU), which share the host with everything; "
        "'all' every point, so that no end-to-end time shares the host's memory and bus",
    )  # fmt: skip


def _gpus(text: str) -> tuple[int, ...] | str:
    if text.strip().lower() == "all":
        return "all"
    try:
        ordinals = tuple(int(item) for item in arguments.comma_list(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'all' or GPU ordinals (0,1), not {text!r}") from None
    if not ordinals or min(ordinals) < 0 or len(set(ordinals)) != len(ordinals):
        raise argparse.ArgumentTypeError(f"distinct ordinals from 0, not {text!r}")
    return tuple(sorted(ordinals))


def spec(args: argparse.Namespace) -> ClusterSpec | None:
    """The cluster the options ask for; None: no cluster, the serial run."""
    gpus, workers, scheduler = (
        getattr(args, name, None) for name in ("gpus", "workers", "scheduler")
    )
    if gpus is None and workers is None and scheduler is None:
        return None
    from xbackend.cluster import ClusterSpec

    each_gpu = getattr(args, "each_gpu", True)  # without the option (tune): each GPU
    return ClusterSpec(
        gpus=gpus, workers=workers, scheduler=scheduler, alone=args.alone, each_gpu=each_gpu
    )


@contextlib.contextmanager
def started(
    args: argparse.Namespace, say: Callable[[str], None] = print
) -> Iterator[Cluster | None]:
    """The cluster the options ask for, started (or joined) for the block, then closed;
    None without cluster options."""
    asked = spec(args)
    if asked is None:
        yield None
        return
    from xbackend.cluster import Cluster

    cluster = Cluster.start(asked, args.backends or "auto", say=say)
    try:
        yield cluster
    finally:
        cluster.close()


def tune(
    args: argparse.Namespace,
    ops: list[str],
    show: Callable[[list[TuneResult]], None],
    default_sizes: tuple[str, str],
) -> int:
    """``xbackend tune`` on every device of the cluster's workers; each device's table
    printed by ``show``; ``default_sizes``: the sizes (GPU, CPU) where ``--sizes`` names
    none. 1 where a device failed or chose nothing that ran correctly."""
    from xbackend.cluster import TuneRequest
    from xbackend.sweep import parse_shapes

    request = TuneRequest(
        variants=tuple(arguments.comma_list(args.variants)) if args.variants else (),
        sizes=tuple(args.sizes or ()),
        gpu_sizes=tuple(parse_shapes(default_sizes[0])),
        cpu_sizes=tuple(parse_shapes(default_sizes[1])),
        dtype=args.dtype, ops=tuple(ops), seed=args.seed, samples=args.samples,
        finalist_time_s=args.finalist_time, search=args.search,
    )  # fmt: skip
    failed = False
    with started(args) as cluster:
        assert cluster is not None
        for label, device, results in cluster.tune(request):
            print(f"\n{label} ({device}):")
            if isinstance(results, str):
                print(f"  not tuned: {results}")
                failed = True
                continue
            show(results)
            wrong = sum(t.status == "wrong" for result in results for t in result.trials)
            failed = failed or bool(wrong) or any(result.best is None for result in results)
    return 1 if failed else 0
