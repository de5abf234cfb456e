"""How the points of results folders were sampled: why sampling stopped, how many samples,
how noisy, at which clocks; with ``--cache``, the kernel times of runs made in different
cache modes side by side.

    python studies/sampling_report.py RUN...            # stop reasons, samples, noise, clocks
    python studies/sampling_report.py --cache WARM COLD HOT
"""

from __future__ import annotations

import argparse
import collections
import statistics
from pathlib import Path

from xbackend import results
from xbackend.measuring.timing import format_seconds
from xbackend.results import PointRecord


def _measured(folder: Path) -> list[PointRecord]:
    return [p for p in results.latest(results.load([folder]).points) if p.measured]


def sampling_summary(folder: Path) -> list[str]:
    """Lines on one run: per backend, the stop reasons, samples, noise and clocks."""
    lines = [f"{folder}:"]
    by_label: dict[str, list[PointRecord]] = collections.defaultdict(list)
    for point in _measured(folder):
        by_label[point.label].append(point)
    for label, points in by_label.items():
        stops = collections.Counter(p.stop or "?" for p in points)
        counts = [int((p.kernel_s or {}).get("n", 0)) for p in points]
        noise = [(p.kernel_s or {}).get("noise", float("nan")) for p in points]
        left_out = sum(sum(bool(m) for m in p.sample_marks) for p in points)
        batched = sum(p.launches > 1 for p in points)
        flagged = collections.Counter(flag for p in points for flag in p.flags)
        lines.append(
            f"  {label}: {len(points)} points; stopped by "
            + ", ".join(f"{reason} {count}" for reason, count in stops.most_common())
            + f"; samples {min(counts)}-{max(counts)} (median {statistics.median(counts):g});"
            f" noise median {statistics.median(noise):.2%}, max {max(noise):.2%};"
            f" {batched} timed as batches; {left_out} samples left out;"
            f" flags {dict(flagged) or 'none'}"
        )
        lines += _clocks(points)
        few = [p for p in points if (p.kernel_s or {}).get("n", 0) < 10]
        for point in few[:5]:
            lines.append(
                f"    fewer than 10 samples: {point.variant} {point.M}×{point.K}×{point.N}: "
                f"n={int((point.kernel_s or {})['n'])} ({point.stop})"
            )
    return lines


def _clocks(points: list[PointRecord]) -> list[str]:
    states = [p.state for p in points if p.state]
    if not states:
        return []
    clocks = [s["sm_clock_mhz_mean"] for s in states if s.get("sm_clock_mhz_mean")]
    lowest = [s["sm_clock_mhz_min"] for s in states if s.get("sm_clock_mhz_min")]
    reasons = sorted({r for s in states for r in s.get("throttle_reasons") or []})
    hottest = max((s.get("temperature_c_end") or 0 for s in states), default=0)
    powers = [s["power_w"] for s in states if s.get("power_w")]
    return [
        f"    SM clock mean {min(clocks):g}-{max(clocks):g} MHz (lowest {min(lowest):g}),"
        f" throttle reasons seen: {', '.join(reasons) or 'none'}, up to {hottest} °C,"
        f" power up to {max(powers, default=0):.0f} W"
    ]


def cache_table(folders: list[Path]) -> list[str]:
    """Median kernel times per configuration and size, one column per run (cache mode)."""
    runs = [{(p.label, p.variant, p.M): p for p in _measured(f)} for f in folders]
    modes = [next(iter(run.values())).cache or "warm" for run in runs]
    head = f"{'backend':<8}{'variant':<9}{'size':>6}" + "".join(f"{m:>11}" for m in modes)
    ratios = "".join(f"{m + '/' + modes[0]:>12}" for m in modes[1:])
    lines = [head + ratios]
    for key in sorted(runs[0], key=lambda k: (k[0], k[1], k[2])):
        medians = [run[key].kernel_median_s if key in run else None for run in runs]
        cells = "".join(f"{format_seconds(m) if m else '—':>11}" for m in medians)
        base = medians[0]
        shares = "".join(
            f"{(m / base - 1) * 100:>+11.1f}%" if m and base else f"{'—':>12}" for m in medians[1:]
        )
        lines.append(f"{key[0]:<8}{key[1]:<9}{key[2]:>6}{cells}{shares}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="results folders")
    parser.add_argument("--cache", action="store_true", help="compare runs of cache modes")
    args = parser.parse_args()
    lines = cache_table(args.runs) if args.cache else []
    if not args.cache:
        for folder in args.runs:
            lines += sampling_summary(folder)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
