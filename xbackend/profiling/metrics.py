"""The counters ``xbackend profile`` asks Nsight Compute for: ncu's metric names, what each
counts, its unit, and how the counters of a product's kernels add up.

A record keeps them by ncu's name (``PointRecord.counters``), in base units: seconds,
bytes, counts and percent. Everything that shows them (the console table, the CSV, the
figures, the report) takes this table, so a counter added here is shown everywhere.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from xbackend.results import PointRecord


@dataclasses.dataclass(frozen=True)
class Counter:
    """One metric of Nsight Compute, as xbackend records and shows it."""

    metric: str  # ncu's name
    title: str  # how tables and figures name it
    unit: str  # "s", "B", "" (a count) or "%"
    column: str  # its column in the CSV
    summed: bool = True  # over a product's kernels: summed; else weighted by their time


DURATION = Counter("gpu__time_duration.sum", "kernel time", "s", "kernel_s")
LOAD_REQUESTS = Counter(
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "global load requests", "", "load_requests"
)
LOAD_SECTORS = Counter(
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "global load sectors", "", "load_sectors"
)
L2_SECTORS = Counter("lts__t_sectors_op_read.sum", "L2 sectors read", "", "l2_sectors_read")
DRAM_READ = Counter("dram__bytes_read.sum", "DRAM bytes read", "B", "dram_read_bytes")
DRAM_WRITE = Counter("dram__bytes_write.sum", "DRAM bytes written", "B", "dram_write_bytes")
OCCUPANCY = Counter(
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "achieved occupancy",
    "%",
    "occupancy_pct",
    summed=False,
)
COUNTERS = (DURATION, LOAD_REQUESTS, LOAD_SECTORS, L2_SECTORS, DRAM_READ, DRAM_WRITE, OCCUPANCY)
METRICS = tuple(counter.metric for counter in COUNTERS)


def combined(kernels: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The counters of a product from those of its kernels (one mapping each): each
    summed counter added up; the others (occupancy) weighted by each kernel's time."""
    times = [kernel.get(DURATION.metric, 0.0) for kernel in kernels]
    total = sum(times)
    found: dict[str, float] = {}
    for counter in COUNTERS:
        values = [kernel.get(counter.metric) for kernel in kernels]
        if not values or any(value is None for value in values):
            continue  # a counter some kernel lacks would be a sum of a part
        known = [float(value) for value in values if value is not None]
        if counter.summed:
            found[counter.metric] = math.fsum(known)
        elif total > 0:
            found[counter.metric] = math.fsum(v * t for v, t in zip(known, times, strict=True))
            found[counter.metric] /= total
    return found


def value(point: PointRecord, counter: Counter) -> float | None:
    """The point's count of ``counter``, where it was profiled and ncu gave it."""
    return (point.counters or {}).get(counter.metric)


def naive_partner(point: PointRecord, points: Sequence[PointRecord]) -> PointRecord | None:
    """The naive point ``point`` is compared with: the same backend, operation, element
    type and size, at the same tile where it was profiled there, else at the smallest."""
    same = [
        other
        for other in points
        if other.variant == "naive"
        and other.counters
        and (other.label, other.device, other.op, other.dtype, other.batch, other.M, other.K,
             other.N) == (point.label, point.device, point.op, point.dtype, point.batch,
                          point.M, point.K, point.N)
    ]  # fmt: skip
    if not same or point.variant == "naive":
        return None
    at_tile = [other for other in same if other.tile == point.tile]
    return (at_tile or sorted(same, key=lambda other: other.tile or 0))[0]


def fall(point: PointRecord, points: Sequence[PointRecord], counter: Counter) -> float | None:
    """How many times fewer of ``counter`` ``point`` has than its naive partner."""
    partner = naive_partner(point, points)
    mine = value(point, counter)
    theirs = None if partner is None else value(partner, counter)
    if mine is None or theirs is None or mine <= 0:
        return None
    return theirs / mine


def scaled(number: float, unit: str) -> str:
    """``number`` with an SI prefix: 536.9 M, 33.55 MB, 1.234 ms, 87.5 %."""
    if unit == "%":
        return f"{number:.1f} %"
    if unit == "s":
        for factor, prefix in ((1.0, ""), (1e-3, "m"), (1e-6, "µ")):
            if abs(number) >= factor:
                return f"{number / factor:.4g} {prefix}s"
        return f"{number * 1e9:.4g} ns"
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(number) >= factor:
            return f"{number / factor:.4g} {prefix}{unit}".rstrip()
    return f"{number:.4g} {unit}".rstrip()
