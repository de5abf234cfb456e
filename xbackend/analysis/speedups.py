"""Speed-ups against size: the assignment's question (how much faster is tiled than naive?)
answered per backend at every size, with an interval, for the report's findings and the
``speedup`` figure.

A pair is a variant and its baseline on one backend, device, operation and data type:
xbackend's ``tiled`` against its ``naive``, and each of a user family's variants against
that family's own naive kernel (``student_tiled`` against ``student_naive``: the variants
the shipped families do not name, whose name shares the family's prefix and says
``naive``), never a user's kernel against xbackend's naive.

At each size both measured, the ratio of the medians (baseline over variant: above 1, the
variant is faster) has an interval made of the two medians' 95% intervals (the lowest
ratio they allow to the highest); its verdict is ``faster`` or ``slower`` where the
interval leaves out 1, ``unclear`` where it does not. Noisy and throttled points count,
and say so: a finding that dropped them would fall back to a size small enough to be quiet,
which answers another question.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence

from xbackend.families import shipped_variants
from xbackend.measuring.timing import median_interval
from xbackend.results import PointRecord
from xbackend.results.records import PROFILER_CLOCK

BASELINE = "naive"
SHIPPED_PAIRS = {"tiled": "naive"}  # xbackend's own: the assignment's question
DOUBTFUL = ("noisy", "throttled")
Size = tuple[int, int, int, int]  # flops, then M, N, K: how large a product is


def usable(point: PointRecord) -> bool:
    """Verified, trusted and timed (not a profiled point); noisy or throttled allowed."""
    return point.status == "ok" and point.trusted and point.clock != PROFILER_CLOCK


def work(point: PointRecord) -> Size:
    """How large a product is, to find the largest: its flops, then its dimensions."""
    return (point.batch * point.M * point.K * point.N, point.M, point.N, point.K)


def median_bounds(point: PointRecord) -> tuple[float, float, float]:
    """(median, low, high) of the kernel time: the record's 95% interval of the median, or
    the one its kept samples give (files from before the interval was recorded)."""
    stats = point.kernel_s or {}
    median = float(stats["median"])
    low, high = stats.get("ci_low", math.nan), stats.get("ci_high", math.nan)
    if not (math.isfinite(low) and math.isfinite(high)):
        kept = point.kept_kernel_samples_s
        low, high = median_interval(kept) if kept else (median, median)
    return median, float(low), float(high)


@dataclasses.dataclass(frozen=True)
class Ratio:
    """The baseline's median over the variant's at one size, with its interval."""

    baseline: PointRecord
    variant: PointRecord
    value: float
    low: float
    high: float

    @classmethod
    def of(cls, baseline: PointRecord, variant: PointRecord) -> Ratio:
        slow, slow_low, slow_high = median_bounds(baseline)
        fast, fast_low, fast_high = median_bounds(variant)
        tiny = 1e-30  # a zero bound (a clock's tick) must not divide
        return cls(
            baseline, variant, slow / max(fast, tiny),
            slow_low / max(fast_high, tiny), slow_high / max(fast_low, tiny),
        )  # fmt: skip

    @property
    def verdict(self) -> str:
        if self.low > 1:
            return "faster"
        if self.high < 1:
            return "slower"
        return "unclear"

    @property
    def doubtful(self) -> list[str]:
        """The flags (noisy, throttled) either side carries."""
        flags = {*self.baseline.flags, *self.variant.flags}
        return [flag for flag in DOUBTFUL if flag in flags]

    @property
    def size(self) -> Size:
        return work(self.variant)


@dataclasses.dataclass(frozen=True)
class Speedup:
    """One variant against its baseline on one backend and group, size by size."""

    label: str
    device: str
    op: str
    dtype: str
    baseline: str
    variant: str
    ratios: tuple[Ratio, ...]  # smallest size first

    @property
    def largest(self) -> Ratio:
        return self.ratios[-1]

    def holds_from(self) -> Ratio | None:
        """The smallest size from which every larger size has the largest's verdict (None
        where that verdict is ``unclear``)."""
        verdict = self.largest.verdict
        if verdict == "unclear":
            return None
        first = self.largest
        for ratio in reversed(self.ratios):
            if ratio.verdict != verdict:
                break
            first = ratio
        return first

    def largest_clear(self) -> Ratio | None:
        """The largest size whose verdict is not ``unclear``."""
        return next((r for r in reversed(self.ratios) if r.verdict != "unclear"), None)


def _family_baseline(variant: str, user: Sequence[str]) -> str | None:
    """A user variant's family naive kernel: a user variant that says ``naive`` and shares
    the longest prefix of whole ``_``-words with it (``ann_tiled_x2``: ``ann_naive``)."""
    if BASELINE in variant:
        return None
    words = variant.split("_")
    for count in range(len(words) - 1, 0, -1):
        prefix = "_".join(words[:count]) + "_"
        found = [n for n in user if BASELINE in n and n != variant and n.startswith(prefix)]
        if found:
            return min(found, key=len)
    return None


def baselines(variants: Iterable[str]) -> dict[str, str]:
    """Each variant with a baseline among ``variants``: the variant, then its baseline."""
    names = list(dict.fromkeys(variants))
    shipped = shipped_variants()
    user = [name for name in names if name not in shipped]
    found = {v: b for v, b in SHIPPED_PAIRS.items() if v in names and b in names}
    for name in user:
        baseline = _family_baseline(name, user)
        if baseline is not None:
            found[name] = baseline
    return found


def _fastest_by_size(points: Iterable[PointRecord]) -> dict[Size, PointRecord]:
    """At each size, the point with the shortest median kernel time (the fastest tile)."""
    found: dict[Size, PointRecord] = {}
    for point in points:
        size = work(point)
        if size not in found or median_bounds(point)[0] < median_bounds(found[size])[0]:
            found[size] = point
    return found


def speedups(points: Sequence[PointRecord]) -> list[Speedup]:
    """Every pair's speed-up at every size both sides measured, in the points' order."""
    groups: dict[tuple[str, str, str, int, str], list[PointRecord]] = {}
    for point in points:
        if usable(point):
            key = (point.label, point.device, point.op, point.batch, point.dtype)
            groups.setdefault(key, []).append(point)
    found = []
    for (label, device, op, _, dtype), part in groups.items():
        for variant, baseline in baselines(p.variant for p in part).items():
            slow = _fastest_by_size(p for p in part if p.variant == baseline)
            fast = _fastest_by_size(p for p in part if p.variant == variant)
            ratios = tuple(Ratio.of(slow[s], fast[s]) for s in sorted(set(slow) & set(fast)))
            if ratios:
                found.append(Speedup(label, device, op, dtype, baseline, variant, ratios))
    return found
