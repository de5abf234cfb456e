"""The cluster options of ``compare`` and ``tune``: ``--gpus``, ``--workers``,
``--scheduler`` (one of them; none: the serial run), ``--alone`` and
``--connect-timeout``.

Dask is imported only when one of them is given (``xbackend.cluster``); without the
``dask`` extra, that is an error naming it. A scheduler's address is checked before
anything is tried (``scheduler_address``), and reached within ``--connect-timeout``
(``cluster/connection.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import xbackend.cli.arguments as arguments
from xbackend.errors import XBackendError

if TYPE_CHECKING:
    from xbackend.cluster import Cluster, ClusterSpec
    from xbackend.tuning import TuneResult

GROUP_TITLE = "cluster (Dask distributed: pip install 'xbackend[dask]'; docs/cluster.md)"
MAX_WORKERS = 256
# The default of --connect-timeout, as cluster/connection.py has it (imported with Dask).
CONNECT_TIMEOUT_S = 5.0
MAX_CONNECT_TIMEOUT_S = 3600.0
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*\Z")
_HOST = re.compile(r"[A-Za-z0-9._-]+\Z")  # a host name or an IPv4 address
_IPV6 = re.compile(r"\[[0-9A-Fa-f:.]+(%[A-Za-z0-9._-]+)?\]\Z")


def add_options(parser: argparse.ArgumentParser, *, each_gpu: bool = False) -> None:
    """Add the cluster options to ``parser`` (``each_gpu``: and ``--each-gpu``, for a
    command whose GPUs of one model share the work by default: compare, tune)."""
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
            help="with --gpus: every GPU does all the work (compare: every point, lines "
            "cuda:0, cuda:1, ...; tune: every search), to compare the GPUs; by default the "
            "GPUs of one model share it (compare: the serial run's lines, each measured "
            "once, on one of them; tune: the searches, each made once, on one of them)",
        )  # fmt: skip
    group.add_argument(
        "--connect-timeout", type=_timeout, default=CONNECT_TIMEOUT_S, metavar="SECONDS",
        help="with --scheduler: how long to wait for the connection and the scheduler's "
        f"first answer (default: {CONNECT_TIMEOUT_S:g})",
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


def _timeout(text: str) -> float:
    value = arguments.positive(float)(text)
    if value > MAX_CONNECT_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_CONNECT_TIMEOUT_S:g}: {value}")
    return value


def scheduler_address(text: str) -> str:
    """``--scheduler``'s address as Dask reads it (``[SCHEME://]HOST:PORT``, tcp by
    default), checked before anything is tried; else one line naming the option and the
    address, its control characters escaped (``repr``), never printed raw."""

    def refused(why: str) -> XBackendError:
        example = "an address is tcp://HOST:PORT, e.g. tcp://login1:8786"
        return XBackendError(f"--scheduler {text!r}: {why}; {example}")

    if not text.strip():
        raise refused("empty")
    if any(not char.isprintable() or char.isspace() for char in text):
        raise refused("a control character or a space in the address")
    scheme, sep, rest = text.partition("://")
    scheme, rest = (scheme.lower(), rest) if sep else ("tcp", text)
    if not _SCHEME.match(scheme):
        raise refused(f"{scheme!r} is not an address scheme")
    if scheme == "inproc":
        raise refused("inproc:// reaches only a scheduler inside this process")
    host, colon, port = rest.rpartition(":")
    if not colon or not port:
        raise refused("no port")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise refused(f"the port is a number from 1 to 65535, not {port!r}")
    if not host:
        raise refused("no host")
    if not (_HOST.match(host) or _IPV6.match(host)):
        raise refused(f"{host!r} is not a host name or address")
    return f"{scheme}://{host}:{int(port)}"


def spec(args: argparse.Namespace) -> ClusterSpec | None:
    """The cluster the options ask for; None: no cluster, the serial run. Options that
    cannot mean what they say are an ``XBackendError`` naming them, before anything runs."""
    gpus, workers, scheduler = (
        getattr(args, name, None) for name in ("gpus", "workers", "scheduler")
    )
    if getattr(args, "each_gpu", False) and gpus is None:
        raise XBackendError(
            "--each-gpu needs --gpus: it measures every point on each GPU of --gpus "
            "(add --gpus all, or leave --each-gpu out)"
        )
    if gpus is None and workers is None and scheduler is None:
        return None
    if scheduler is not None:
        scheduler = scheduler_address(scheduler)
    from xbackend.cluster import ClusterSpec

    each_gpu = getattr(args, "each_gpu", False)
    return ClusterSpec(
        gpus=gpus, workers=workers, scheduler=scheduler, alone=args.alone, each_gpu=each_gpu,
        connect_s=getattr(args, "connect_timeout", CONNECT_TIMEOUT_S),
    )  # fmt: skip


def check_resume(args: argparse.Namespace, labels: Sequence[str]) -> None:
    """Refuse a ``--resume`` that would measure every recorded point again under other
    names: a ``--scheduler`` run names its lines by device model (``cpu:MODEL``), a run
    here or on a local cluster by backend (``cpu``). ``labels``: this run's lines."""
    if not getattr(args, "resume", False) or args.out is None:
        return
    from xbackend import results as results_io

    if not (Path(args.out) / results_io.JSONL_NAME).is_file():
        return
    try:
        loaded = results_io.load([args.out])
    except (XBackendError, ValueError):  # a damaged file: the resume itself says so
        return
    recorded = sorted({point.label for point in loaded.points})
    if not recorded or set(recorded) & set(labels):
        return
    headers = loaded.runs.values()
    schedulers = sorted({str(h.cluster.get("scheduler")) for h in headers if h.cluster})
    schedulers = [name for name in schedulers if name != "local"]
    here, shown, ours = args.scheduler, ", ".join(recorded), ", ".join(labels)
    if schedulers and not here:
        raise XBackendError(
            f"--resume: the points in {args.out} were measured on the Dask cluster at "
            f"{schedulers[0]}, whose lines --scheduler names by device model ({shown}); "
            f"this run's lines ({ours}) would measure every one of them again: continue "
            f"with --scheduler {schedulers[0]}, or choose another --out"
        )
    if here and not schedulers:
        raise XBackendError(
            f"--resume: the points in {args.out} were measured without --scheduler (lines "
            f"{shown}); --scheduler names its lines by device model ({ours}), so every one "
            "would be measured again: continue without --scheduler, or choose another --out"
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
    from xbackend.sweep.isolation import kernel_timeout_s
    from xbackend.sweep.sizes import parse_shapes

    request = TuneRequest(
        variants=tuple(arguments.comma_list(args.variants)) if args.variants else (),
        sizes=tuple(args.sizes or ()),
        gpu_sizes=tuple(parse_shapes(default_sizes[0])),
        cpu_sizes=tuple(parse_shapes(default_sizes[1])),
        dtype=args.dtype, ops=tuple(ops), seed=args.seed, samples=args.samples,
        finalist_time_s=args.finalist_time, search=args.search,
        kernel_timeout_s=kernel_timeout_s(),  # --kernel-timeout, set by now: the workers' too
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
