"""Which clock timed the kernels, and what a launch costs beyond them.

A point's ``clock`` says what timed its kernel time: the GPU's own clock read inside
the kernels (``globaltimer``: the span from the first group's entry to the last
group's exit), the API's events (CUDA events, OpenCL profiling events), Nsight
Compute, or the host's clock. :func:`clock_note` says it in one short line for the
figures and tables, by backend label. Where the kernels timed themselves, the API's
clock timed the same launches too (``api_samples_s``); the difference of the medians
is the launch overhead (``PointRecord.overhead_s``), which :func:`overheads`
summarises per backend and variant for the report's table.
"""

from __future__ import annotations

import dataclasses
import statistics
import textwrap
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xbackend.results import PointRecord

# Readable names, in the order a note lists them: the device's own clocks first.
CLOCK_NAMES = {
    "globaltimer": "GPU clock inside the kernels (globaltimer)",
    "cuda-events": "CUDA events",
    "opencl-profiling": "OpenCL profiling events",
    "opencl-markers": "OpenCL markers around the library call",
    "nsight-compute": "Nsight Compute",
    "host": "host clock",
}
_NOT_RECORDED = "clock not recorded"  # files from before records named their clock
_MOST_LABELS = 4  # labels named per clock before "and N more"

OVERHEAD_MEANING = (
    "the API's time (CUDA events / OpenCL profiling events) less the kernels' own span on "
    "the GPU clock: what a launch costs beyond the kernel"
)


def clock_name(clock: str) -> str:
    """A clock's readable name (an unknown clock by its own name)."""
    if not clock:
        return _NOT_RECORDED
    return CLOCK_NAMES.get(clock, " ".join(clock.split()))


def _clock_order(clock: str) -> tuple[int, str]:
    order = list(CLOCK_NAMES)
    known = order.index(clock) if clock in order else len(order) + (not clock)
    return (known, clock)


def clocks_by_label(points: Iterable[PointRecord]) -> dict[str, list[str]]:
    """The backend labels each clock timed, of the measured points: clock -> names.

    A label whose variants several clocks timed (OpenCL's kernels by profiling events,
    its vendor line by the host) is named plainly under the clock of most of its
    variants, and with the others' variants under theirs: "opencl (vendor)"."""
    variants: dict[str, dict[str, set[str]]] = {}
    for point in points:
        if point.measured:
            variants.setdefault(point.label, {}).setdefault(point.clock, set()).add(point.variant)
    found: dict[str, list[str]] = {}
    for label in sorted(variants):
        clocks = variants[label]
        main = max(sorted(clocks, key=_clock_order), key=lambda clock: len(clocks[clock]))
        for clock, names in clocks.items():
            shown = label if clock == main else f"{label} ({', '.join(sorted(names))})"
            found.setdefault(clock, []).append(shown)
    return {clock: found[clock] for clock in sorted(found, key=_clock_order)}


def clock_note(points: Iterable[PointRecord]) -> str:
    """One line saying which clock timed the kernels, by backend label: "kernel time:
    GPU clock inside the kernels (globaltimer) for cuda; host clock for cpu". Empty where
    no point names its clock (older files: their figures stay as they were)."""
    found = clocks_by_label(points)
    if not found or set(found) == {""}:
        return ""
    parts = []
    for clock, labels in found.items():
        shown = ", ".join(labels[:_MOST_LABELS])
        if len(labels) > _MOST_LABELS:
            shown += f" and {len(labels) - _MOST_LABELS} more"
        parts.append(f"{clock_name(clock)} for {shown}")
    return "kernel time: " + "; ".join(parts)


def wrapped(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken after its "; " where it
    can (one clock a line), else between words."""
    lines: list[str] = []
    for part in text.split("; "):
        joined = f"{lines[-1]}; {part}" if lines else part
        if lines and len(joined) <= width:
            lines[-1] = joined
        else:
            lines[-1:] = [f"{lines[-1]};"] if lines else []
            lines += textwrap.wrap(part, width, break_on_hyphens=False) or [part]
    return lines


def has_overhead(points: Iterable[PointRecord]) -> bool:
    """Whether any measured point has the API's time beside its kernels' own."""
    return any(point.measured and point.overhead_s is not None for point in points)


@dataclasses.dataclass(frozen=True)
class Overhead:
    """The launch overhead of one backend's variant across its sizes, in seconds."""

    label: str
    device: str
    variant: str
    tile: int | None
    points: int  # points with an overhead
    median_s: float  # the median of the points' overheads
    low_s: float
    high_s: float
    gap_s: float | None  # the median of the points' gaps between launches, where recorded
    launches: tuple[int, int]  # the fewest and most launches a sample


def overheads(points: Iterable[PointRecord]) -> list[Overhead]:
    """Per backend label, device, variant and tile, single launches apart from batches
    (a batch shares a launch's fixed costs): the median overhead of its points (each its
    API median less its kernel median), their range and the gap between launches.
    Trusted points only, as in the figures."""
    groups: dict[_Group, list[PointRecord]] = {}
    for point in points:
        if point.trusted and point.overhead_s is not None:
            key = (point.label, point.device, point.variant, point.tile, point.launches > 1)
            groups.setdefault(key, []).append(point)
    found = []
    for (label, device, variant, tile, _), part in sorted(groups.items(), key=_group_sort):
        values = [p.overhead_s for p in part if p.overhead_s is not None]
        gaps = [gap for gap in (p.gap_median_s for p in part) if gap is not None]
        launches = [p.launches for p in part]
        found.append(
            Overhead(
                label,
                device,
                variant,
                tile,
                len(values),
                statistics.median(values),
                min(values),
                max(values),
                statistics.median(gaps) if gaps else None,
                (min(launches), max(launches)),
            )
        )
    return found


_Group = tuple[str, str, str, int | None, bool]  # label, device, variant, tile, batched


def _group_sort(item: tuple[_Group, object]) -> tuple[object, ...]:
    (label, device, variant, tile, batched), _ = item
    return (label, device, variant, tile or 0, batched)
