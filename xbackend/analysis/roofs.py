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
  device that measured it;
* its **share** is the GFLOP/s it reached over that roof (1.0: on the roof).

**One set of ceilings per device.** Several backends may run on one device (NumPy and a
CPU OpenCL runtime on the same cores; CUDA and OpenCL on one GPU), each measuring its
ceilings its own way. A device is its name on its host (the run header's ``host``; a run
without one is a host of its own), and its ceilings are the highest each backend measured
there (:func:`roofs`): the roofline, the shares and the check below use that one set.

**One rule for times too fast to be true** (:func:`checked`): a point faster than its
device's compute ceiling by more than :data:`TOLERANCE` (or, in a cold cache, than its
bandwidth's slope) is flagged ``above-measured-ceiling``, and ``above-peak-compute`` (or
``-bandwidth``) so that it is not ``trusted``: out of every figure, speed-up and share,
as a point beyond the theoretical peak of ``backends/peaks.py`` is. A share above 1 that
remains (a warm cache beats the DRAM's slope; within the tolerance) is shown marked.

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
from xbackend.results.records import IMPOSSIBLE, PROFILER_CLOCK

# How far above its device's measured ceiling a point may be before it is not trusted:
# as backends/peaks.py's TOLERANCE (the device's and the host's clocks agree to under 1%).
TOLERANCE = 1.05
ABOVE_CEILING = "above-measured-ceiling"
_IMPOSSIBLE_COMPUTE, _IMPOSSIBLE_BANDWIDTH = IMPOSSIBLE  # above-peak-compute, -bandwidth


@dataclasses.dataclass(frozen=True)
class Roof:
    """One device's ceilings: the highest each backend on it measured."""

    label: str  # the backends that measured it, as "cpu, opencl"
    device: str
    flops_per_s: dict[str, float]  # per float dtype
    bytes_per_s: float | None  # read and written
    host: str = ""
    # Per ceiling (a dtype, or "bandwidth"): the backend whose measurement it is.
    by: dict[str, str] = dataclasses.field(default_factory=dict)

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


def _roof(label: str, device: Mapping[str, Any], host: str) -> Roof | None:
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
    by = {**{dtype: label for dtype in flops}, **({"bandwidth": label} if bandwidth else {})}
    return Roof(label, str(device.get("name") or ""), flops, bandwidth, host, by)


def _highest(known: Roof | None, roof: Roof) -> Roof:
    """One roof of two measurements of a device: the higher of each ceiling."""
    if known is None:
        return roof
    flops, by = dict(known.flops_per_s), dict(known.by)
    for dtype, rate in roof.flops_per_s.items():
        if rate > flops.get(dtype, 0.0):
            flops[dtype], by[dtype] = rate, roof.label
    bandwidth = known.bytes_per_s
    if roof.bytes_per_s is not None and roof.bytes_per_s > (bandwidth or 0.0):
        bandwidth, by["bandwidth"] = roof.bytes_per_s, roof.label
    labels = known.label.split(", ")
    label = ", ".join(labels if roof.label in labels else [*labels, roof.label])
    return Roof(label, known.device, flops, bandwidth, known.host, by)


def api_roofs(runs: Iterable[RunHeader]) -> Roofs:
    """The roof each backend of each run measured of its device, as it measured it: a
    point's share of its own API's ceilings (``roofs`` pools a device's backends)."""
    measured: Roofs = {}
    for run in runs:
        for label, device in run.devices.items():
            roof = _roof(label, device, run.host)
            if roof is not None:
                measured[(run.run_id, label)] = roof
    return measured


def roofs(runs: Iterable[RunHeader]) -> Roofs:
    """The roof of every device of every run whose header kept its ceilings: one set
    per device (its name on its host), the highest each of its backends measured."""
    measured = api_roofs(runs)

    def device_of(key: tuple[str, str], roof: Roof) -> tuple[str, ...]:
        run_id, label = key
        if not roof.device:  # no name to know it by: a device of its own
            return ("", run_id, label)
        return (roof.host or f"run {run_id}", roof.device)

    pooled: dict[tuple[str, ...], Roof] = {}
    for key, roof in measured.items():
        known = device_of(key, roof)
        pooled[known] = _highest(pooled.get(known), roof)
    return {key: pooled[device_of(key, roof)] for key, roof in measured.items()}


def devices(found: Roofs) -> list[Roof]:
    """Each device's roof once, in the order first met."""
    unique: dict[tuple[str, str, str], Roof] = {}
    for roof in found.values():
        unique.setdefault((roof.host, roof.device, roof.label), roof)
    return list(unique.values())


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


def above_ceiling(point: PointRecord, roofs: Roofs) -> str | None:
    """Which flag of ``records.IMPOSSIBLE`` a measured point earns against its device's
    measured ceilings: faster than its compute ceiling by more than :data:`TOLERANCE`,
    or, in a cold cache, than its bandwidth's slope at its intensity; None where neither
    (or where the ceilings are unknown)."""
    roof = roof_of(point, roofs)
    if roof is None or not point.measured or not point.gflops:
        return None
    rate = point.gflops * 1e9
    compute = roof.flops_per_s.get(point.dtype)
    if compute is not None and rate > compute * TOLERANCE:
        return _IMPOSSIBLE_COMPUTE
    flop_per_byte = intensity(point)
    cold = point.cache == "cold" and roof.bytes_per_s and flop_per_byte
    if cold and rate > (flop_per_byte or 0.0) * (roof.bytes_per_s or 0.0) * TOLERANCE:
        return _IMPOSSIBLE_BANDWIDTH
    return None


def checked(points: Iterable[PointRecord], roofs: Roofs) -> list[PointRecord]:
    """``points``, each one :func:`above_ceiling` flagged ``above-measured-ceiling`` and
    with the flag that makes it not ``trusted``; the others are the same objects."""
    found = []
    for point in points:
        flag = None if ABOVE_CEILING in point.flags else above_ceiling(point, roofs)
        if flag is not None:
            added = [ABOVE_CEILING, *([flag] if flag not in point.flags else [])]
            point = dataclasses.replace(point, flags=[*point.flags, *added])
        found.append(point)
    return found
