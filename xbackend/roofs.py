"""Roofs: the ceilings each run measured per device, and where each point stands under them.

A run measures its devices' ceilings before its first point (``backends/ceilings.py``: the
FLOP/s of an FMA loop per float dtype, the bytes per second of a copy) and keeps them in
its header, under each device's ``ceilings``. From them:

* a point's arithmetic **intensity** is its flops over the bytes it moved to and from the
  device's memory, as Nsight Compute counted them (DRAM bytes read and written) where
  ``xbackend profile`` profiled its configuration (``profiled``: the profile's results
  given beside the run's), else over its operation's fewest bytes (``Operation.min_bytes``:
  each input read once, the output written once);
* its **roof** is min(the compute ceiling of its dtype, intensity × the bandwidth) of the
  device that measured it, as its run measured them;
* its **share** is the GFLOP/s it reached over that roof (1.0: on the roof).

Only verified ("ok"), trusted points of a run whose header has both ceilings get a share.
The tables show it (``tables.py``'s ``roof`` column); ``figures/roofline.py`` draws it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from xbackend.operations import Shape
from xbackend.profiling.metrics import DRAM_READ, DRAM_WRITE, value
from xbackend.results import PointRecord, RunHeader
from xbackend.results.records import PROFILER_CLOCK


@dataclasses.dataclass(frozen=True)
class Roof:
    """One device's measured ceilings, as a run header keeps them."""

    label: str  # the backend's label in that run
    device: str
    flops_per_s: dict[str, float]  # per float dtype
    bytes_per_s: float | None  # read and written

    def attainable(self, dtype: str, flop_per_byte: float | None) -> float | None:
        """The roof at an intensity, in FLOP/s: min(compute, intensity × bandwidth);
        None where either ceiling, or the intensity, is unknown."""
        compute = self.flops_per_s.get(dtype)
        if compute is None or self.bytes_per_s is None or not flop_per_byte:
            return None
        return min(compute, flop_per_byte * self.bytes_per_s)


Roofs = dict[tuple[str, str], Roof]  # (run id, label) -> the roof of that run's device


def _positive(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0 < value < math.inf else None


def _roof(label: str, device: Mapping[str, Any]) -> Roof | None:
    """The roof of a header's device record, read loosely; None without ceilings."""
    ceilings = device.get("ceilings")
    if not isinstance(ceilings, Mapping):
        return None
    rates = ceilings.get("flops_per_s")
    flops = {
        str(dtype): rate
        for dtype, value in (rates.items() if isinstance(rates, Mapping) else ())
        if (rate := _positive(value)) is not None
    }
    bandwidth = _positive(ceilings.get("bytes_per_s"))
    if not flops and bandwidth is None:
        return None
    return Roof(label, str(device.get("name") or ""), flops, bandwidth)


def roofs(runs: Iterable[RunHeader]) -> Roofs:
    """The roof of every device of every run whose header kept its ceilings."""
    found: Roofs = {}
    for run in runs:
        for label, device in run.devices.items():
            roof = _roof(label, device)
            if roof is not None:
                found[(run.run_id, label)] = roof
    return found


def roof_of(point: PointRecord, roofs: Roofs) -> Roof | None:
    """The roof of the device that measured ``point``, as its run measured it."""
    roof = roofs.get((point.run_id, point.label))
    if roof is None:  # a label that tells overlapping runs apart: "cpu (run NAME)"
        roof = roofs.get((point.run_id, point.label.split(" (run ", 1)[0]))
    return roof if roof is not None and roof.device in ("", point.device) else None


def dram_bytes(point: PointRecord) -> float | None:
    """The bytes the point's kernels read from and wrote to DRAM, as Nsight Compute
    counted them; None where it was not profiled."""
    counted = [value(point, DRAM_READ), value(point, DRAM_WRITE)]
    if any(count is None for count in counted):
        return None
    total = math.fsum(count for count in counted if count is not None)
    return total if total > 0 else None


def profiled(points: Iterable[PointRecord]) -> list[PointRecord]:
    """``points`` with each unprofiled point given the DRAM counters of a profiled point
    of its configuration and size (same key: backend, device, operation, variant, tile,
    dtype, size), so that its intensity is what its kernels moved. The profiled points
    themselves are left out: one run under ncu each, they are not timings to draw."""
    points = list(points)
    counted = {p.key: p for p in points if dram_bytes(p) is not None}
    found = []
    for point in points:
        if point.clock == PROFILER_CLOCK:
            continue
        source = counted.get(point.key)
        if source is not None and dram_bytes(point) is None:
            names = (DRAM_READ.metric, DRAM_WRITE.metric)
            bytes_moved = {name: (source.counters or {})[name] for name in names}
            point = dataclasses.replace(point, counters={**(point.counters or {}), **bytes_moved})
        found.append(point)
    return found


def intensity(point: PointRecord) -> float | None:
    """FLOP per byte: the point's flops over the DRAM bytes its kernels moved where they
    were counted (``profiled``), else over its operation's fewest bytes moved (each input
    read once, the output written once); None for an operation or a dtype this version
    does not know."""
    moved = dram_bytes(point)
    if moved is not None and point.flops > 0:
        return point.flops / moved
    op = point.operation
    if op is None or min(point.M, point.K, point.N) < 1:
        return None
    try:
        itemsize = np.dtype(point.dtype).itemsize
    except TypeError:
        return None
    nbytes = op.min_bytes(Shape(point.M, point.K, point.N), point.batch, itemsize)
    return point.flops / nbytes if nbytes else None


def roof_share(point: PointRecord, roofs: Roofs) -> float | None:
    """The share of its roof a verified, trusted point reached: GFLOP/s over the roof at
    its intensity (1.0: on the roof); None where either is unknown."""
    roof = roof_of(point, roofs)
    if roof is None or point.status != "ok" or not point.trusted or not point.gflops:
        return None
    attainable = roof.attainable(point.dtype, intensity(point))
    return None if attainable is None else point.gflops * 1e9 / attainable
