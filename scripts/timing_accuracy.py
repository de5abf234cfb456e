"""xbackend's CUDA timer against Nsight Compute: the same kernels timed by xbackend (CUDA
events behind the hold, its default sampling) and by ncu's ``gpu__time_duration``, side by
side, as a Markdown table.

    python scripts/timing_accuracy.py [--sizes 1024,2048,4096] [--variants tiled,vendor]

Needs a CUDA GPU and Nsight Compute (``ncu`` on PATH, or ``--ncu``). ncu runs with
``--clock-control none`` (its default locks the clocks to base: 23% slower on an H100 at
4096³) and ``--cache-control none`` (its default flushes the caches before every kernel;
xbackend's default cache mode is warm): both settings are printed with the table. Under ncu
every launch runs alone, so the hold kernel gives up waiting (it is left out by name), and
each product runs ``--runs`` times after its first run.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys

import numpy as np

import xbackend
from xbackend.backends.registry import backend_class
from xbackend.measuring.timing import Sampling
from xbackend.profiling.launches import HOLD_KERNEL
from xbackend.profiling.metrics import DURATION
from xbackend.profiling.ncu import Settings, parse_csv

METRIC = DURATION.metric
# The caches kept: xbackend's default cache mode is warm (``xbackend profile`` flushes).
SETTINGS = Settings(clock_control="none", cache_control="none", metrics=(METRIC,))
NCU_SETTINGS = tuple(SETTINGS.options()[2:])  # the clock and cache options, for the table


def operands(size: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(size)
    A = rng.uniform(-1, 1, (size, size)).astype(np.float32)
    B = rng.uniform(-1, 1, (size, size)).astype(np.float32)
    return A, B


def xbackend_median_s(backend: xbackend.Backend, variant: str, size: int) -> tuple[float, int]:
    """xbackend's median kernel time of one product, and its sample count."""
    A, B = operands(size)
    measured = backend.measure(A, B, variant, sampling=Sampling())
    kept = measured.kept[0]
    return statistics.median(kept), len(kept)


def kernel_durations(ncu_csv: str) -> list[float]:
    """Seconds of every kernel ncu profiled, in launch order, the hold kernel left out
    (ncu's CSV read by ``xbackend.profiling.ncu``, any page, any units)."""
    rows = parse_csv(ncu_csv, metrics=[METRIC])
    return [row.metrics[METRIC] for row in rows if row.function != HOLD_KERNEL]


def per_run_s(durations: list[float], runs: int) -> float:
    """The median over runs of each run's kernel time (a product may launch several)."""
    if not durations or len(durations) % runs:
        raise ValueError(f"{len(durations)} kernels do not split into {runs} runs")
    each = len(durations) // runs
    return statistics.median(sum(durations[i : i + each]) for i in range(0, len(durations), each))


def ncu_median_s(ncu: str, variant: str, size: int, runs: int) -> float:
    command = [ncu, *SETTINGS.options(), "--csv", sys.executable, __file__,
               "--child", variant, str(size), str(runs)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True)
    # The first run of the product (compilation, lazy loading) is profiled but not counted.
    durations = kernel_durations(done.stdout)
    each = len(durations) // (runs + 1)
    return per_run_s(durations[each:], runs)


def child(variant: str, size: int, runs: int) -> None:
    """Under ncu: the product's first run and ``runs`` more, one launch a sample."""
    with xbackend.get_backend("cuda") as backend:
        A, B = operands(size)
        sampling = Sampling(warmup=0, min_samples=runs, max_samples=runs, short_kernel_s=0)
        backend.measure(A, B, variant, sampling=sampling)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1024,2048,4096,8192")
    parser.add_argument("--variants", default="tiled,warp_db,vendor")
    parser.add_argument("--runs", type=int, default=5, help="profiled runs per product")
    parser.add_argument("--ncu", default=shutil.which("ncu") or "/usr/local/cuda/bin/ncu")
    parser.add_argument("--child", nargs=3, metavar=("VARIANT", "SIZE", "RUNS"),
                        help=argparse.SUPPRESS)  # fmt: skip
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), int(args.child[2]))
        return 0
    available, reason = backend_class("cuda").available()
    missing = [] if available else [f"CUDA ({reason})"]
    if not shutil.which(args.ncu):
        missing.append(f"Nsight Compute (no {args.ncu}; pass --ncu PATH)")
    if missing:
        print(f"timing_accuracy: needs {' and '.join(missing)}", file=sys.stderr)
        return 2
    print(f"ncu {' '.join(NCU_SETTINGS)}, metric {METRIC}; xbackend: CUDA events behind the hold")
    print("\n| variant | size | xbackend (n) | ncu | xbackend / ncu |")
    print("| --- | ---: | ---: | ---: | ---: |")
    with xbackend.get_backend("cuda") as backend:
        timed = {
            (v, int(s)): xbackend_median_s(backend, v, int(s))
            for v in args.variants.split(",") for s in args.sizes.split(",")
        }  # fmt: skip
    for (variant, size), (mine, n) in timed.items():
        theirs = ncu_median_s(args.ncu, variant, size, args.runs)
        print(f"| {variant} | {size}³ | {mine * 1e6:.1f} µs ({n}) | {theirs * 1e6:.1f} µs "
              f"| {mine / theirs:.4f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
