"""How the CPU backend's lines settle under each way of sampling them (issue 37's study).

Runs ``compare --backends cpu`` once per policy, each in a process of its own, over the
same sizes, and prints per variant how many points were flagged noisy, the median
relative noise (standard deviation over mean) and, for NumPy's vendor line, the median
noise from 256² up; with the host's load over the run beside it (host_load.py).

    python studies/cpu_settle.py OUT [--policies as-is,gc,pin,spin,threads] [--steps 38]

Policies (each applied in its own process, on top of xbackend as it is):
  as-is    nothing changed
  gc       Python's garbage collector off while a point is sampled
  pin      the measuring thread kept on one core while naive and tiled (one thread) run
  spin     OPENBLAS_THREAD_TIMEOUT=28: OpenBLAS's threads spin ~0.1 s after each call
  threads  NumPy's BLAS limited to half the cores (threadpoolctl): no sibling threads
  settled  what xbackend does by default now, named for the table
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

POLICIES = ("as-is", "gc", "pin", "spin", "threads", "settled")


def _apply(policy: str) -> None:
    """Patch this process for ``policy`` (before the run starts)."""
    import gc

    from xbackend.backends import cpu
    from xbackend.measuring import sampler

    if policy == "gc":
        sample = sampler.sample

        def without_gc(*args, **kwargs):  # type: ignore[no-untyped-def]
            gc.collect()
            gc.disable()
            try:
                return sample(*args, **kwargs)
            finally:
                gc.enable()

        sampler.sample = without_gc  # type: ignore[assignment]
        sys.modules["xbackend.backends.interface"].sample = without_gc  # type: ignore[attr-defined]
    elif policy == "pin":
        measure = cpu.CpuBackend.measure

        def pinned(self, A, B, variant, *args, **kwargs):  # type: ignore[no-untyped-def]
            if variant not in ("naive", "tiled"):
                return measure(self, A, B, variant, *args, **kwargs)
            cores = os.sched_getaffinity(0)
            os.sched_setaffinity(0, {max(cores)})
            try:
                return measure(self, A, B, variant, *args, **kwargs)
            finally:
                os.sched_setaffinity(0, cores)

        cpu.CpuBackend.measure = pinned  # type: ignore[method-assign,assignment]
    elif policy == "threads":
        from threadpoolctl import threadpool_limits

        threadpool_limits(max(1, (os.cpu_count() or 2) // 2), user_api="blas")


def _one(policy: str, out: Path, steps: int) -> None:
    if policy == "spin":
        os.environ["OPENBLAS_THREAD_TIMEOUT"] = "28"
    from xbackend.cli import main

    _apply(policy)
    code = main(["compare", "--backends", "cpu", "--steps", str(steps), "--out", str(out),
                 "-q", "--no-plots"])  # fmt: skip
    raise SystemExit(code)


def _summary(policy: str, out: Path) -> list[str]:
    points = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    points = [p for p in points if p.get("type") == "point" and p.get("kernel_s")]
    lines = []
    others = [p["host_load"]["others_cores"] for p in points
              if "others_cores" in (p.get("host_load") or {})]  # fmt: skip
    load = f"others' cores median {statistics.median(others):.2f}" if others else "load unknown"
    for variant in ("naive", "tiled", "vendor"):
        part = [p for p in points if p["variant"] == variant]
        if not part:
            continue
        noisy = sum("noisy" in p["flags"] for p in part)
        noise = statistics.median(p["kernel_s"]["noise"] for p in part)
        large = [p["kernel_s"]["noise"] for p in part if p["M"] >= 256]
        tail = f", from 256²: {100 * statistics.median(large):.1f}%" if large else ""
        lines.append(f"  {policy:8} {variant:6}: {noisy:2}/{len(part)} noisy, "
                     f"median noise {100 * noise:.1f}%{tail}")  # fmt: skip
    return [f"{policy} ({load}):", *lines]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--policies", default=",".join(POLICIES[:-1]))
    parser.add_argument("--steps", type=int, default=38)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        _one(args.one, args.out, args.steps)
    for policy in args.policies.split(","):
        if policy not in POLICIES:
            parser.error(f"unknown policy {policy!r}: expected {', '.join(POLICIES)}")
        folder = args.out / policy
        subprocess.run([sys.executable, __file__, str(folder), "--one", policy,
                        "--steps", str(args.steps)], check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        print("\n".join(_summary(policy, folder)), flush=True)


if __name__ == "__main__":
    main()
