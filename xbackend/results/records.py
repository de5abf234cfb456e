"""The records of a results file, typed: a run header, then one point per measurement.

:meth:`PointRecord.from_dict` and :meth:`RunHeader.from_dict` are the only places
that know the file format's older versions (a point without ``op``, ``batch``,
``dtype`` or ``gflops``; a plan with ``op`` instead of ``ops``) and check every
field; everything else takes records. A field that is missing or not what the
format says raises :class:`RecordError` naming it.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import statistics
from collections.abc import Mapping
from typing import Any, NamedTuple

from xbackend.measuring.timing import unmarked
from xbackend.operations import DEFAULT, OPERATIONS, Operation
from xbackend.results.plan import Plan

STATUSES = ("ok", "mismatch", "skipped", "error")
MEASURED = ("ok", "mismatch")
# Dimensions beyond this are no product any device holds: a field that large is damage.
_MAX_DIMENSION = 2**40
_STATS = ("median", "q1", "q3", "min")
FLAGS = {
    "noisy": "the 95% interval of the kernel time's median is wider than ±2.5% of it, "
    "wider than diff's verdicts need (files from before: than the run's --max-noise)",
    "throttled": "every sample was marked (the GPU throttled, or the CUDA hold gave up): "
    "the statistics are of them all",
    "above-peak-compute": "faster than the device's compute peak: the timing is wrong",
    "above-peak-bandwidth": "moved its operands faster than the device's memory can "
    "(cold cache only): the timing is wrong",
    "worker-lost": "not measured: the cluster's worker for it died and no other could "
    "take it over (a resume measures it again)",
}
WORKER_LOST = "worker-lost"
IMPOSSIBLE = ("above-peak-compute", "above-peak-bandwidth")
# The clock of ``xbackend profile``'s points: the kernels' duration as Nsight Compute
# measured it; such a point has no end-to-end time.
PROFILER_CLOCK = "nsight-compute"


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


class RecordError(ValueError):
    """A field of a record that is missing or not what the results format says."""

    def __init__(self, field: str | None, why: str):
        super().__init__(f"field {field!r}: {why}" if field else why)


class LineKey(NamedTuple):
    """One line of a comparison: a configuration, over sizes."""

    label: str
    device: str
    op: str
    variant: str
    tile: int | None
    dtype: str


class PointKey(NamedTuple):
    """What makes two points the same measurement: the configuration and the size, on
    whatever machine (``diff`` matches two machines' runs by it; a resume, one folder's)."""

    label: str
    device: str
    op: str
    variant: str
    tile: int | None
    dtype: str
    batch: int
    M: int
    K: int
    N: int


class Identity(NamedTuple):
    """What makes a point itself among results of several machines: its host and its key."""

    host: str
    key: PointKey


@dataclasses.dataclass(frozen=True)
class PointRecord:
    """One (size, backend, device, variant, tile) point of a sweep."""

    run_id: str
    backend: str
    label: str  # how figures and tables name this line, e.g. "opencl:pocl"
    device: str
    variant: str
    tile: int | None
    dtype: str
    M: int
    K: int
    N: int
    flops: int
    status: str  # "ok", "mismatch", "skipped", "error"
    op: str = DEFAULT  # "mm", "bmm", "rmm"
    batch: int = 1  # products in a bmm
    reason: str = ""
    equal: bool | None = None
    max_abs_error: float | None = None
    bound_ratio: float | None = None
    # Which check verified it: "full" (the float64 reference), "freivalds" (random
    # vectors, problems.Freivalds); "" where none ran, and in files from before.
    check: str = ""
    # Stats of the kernel samples; its ci_low and ci_high are the 95% interval of the
    # median that sampling stopped on (timing.median_interval: order statistics); in
    # older files, a percentile bootstrap of the median.
    kernel_s: dict[str, float] | None = None
    end_to_end_s: dict[str, float] | None = None  # Stats of the end-to-end samples
    kernel_samples_s: list[float] = dataclasses.field(default_factory=list)
    end_to_end_samples_s: list[float] = dataclasses.field(default_factory=list)
    gflops: float | None = None  # from the kernel median
    timestamp: str = ""
    params: dict[str, int] | None = None  # every launch parameter of a tuned variant
    step: int | None = None  # the size's place in the plan's schedule, from 1
    # How the samples were taken (see timing.Sampling) and why sampling stopped.
    stop: str = ""  # timing.STOP_REASONS, "" before they were recorded
    launches: int = 1  # back-to-back launches per sample (short kernels), each time divided by it
    cache: str = ""  # timing.CACHE_MODES; "" in files from before the modes ("warm")
    host_memory: str = ""  # "pageable", "pinned"; "" where nothing is copied (the CPU)
    # What timed the kernel: "globaltimer" (the GPU's clock read inside the kernels, first
    # group's entry to last group's exit: measuring/stamps.py), "cuda-events",
    # "opencl-profiling", "opencl-markers" (a library call between two markers), "host";
    # "" in files from before.
    clock: str = ""
    # Where the kernels timed themselves: per sample, the API's clock per launch (CUDA
    # events behind the hold, OpenCL profiling events), whose excess over the kernel time
    # is the launch overhead, and a batch's mean gap between launches on the device.
    api_samples_s: list[float] = dataclasses.field(default_factory=list)
    gap_samples_s: list[float] = dataclasses.field(default_factory=list)
    # On a CPU device, per sample, the CPU time this process used over the kernel's run.
    cpu_samples_s: list[float] = dataclasses.field(default_factory=list)
    # One mark per sample where any was left out of the statistics: "" kept,
    # "throttled" (the device slowed its clocks), "hold" (the CUDA hold gave up).
    sample_marks: list[str] = dataclasses.field(default_factory=list)
    state: dict[str, Any] | None = None  # the device's clocks, temperature, power (NVML)
    host_load: dict[str, Any] | None = None  # others' share of the host (host_load.py)
    flags: list[str] = dataclasses.field(default_factory=list)  # see FLAGS
    # The machine that measured it: "" where its run header says (results.load fills it in).
    host: str = ""
    worker: str = ""  # the Dask worker that measured it (xbackend.cluster); "" in a serial run
    # Nsight Compute's counters of the point's kernels (``xbackend profile``), by ncu's
    # metric names, in seconds, bytes, counts and percent; None where none were taken.
    counters: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        point = {"type": "point", **dataclasses.asdict(self)}
        if not self.host:
            del point["host"]  # the run header's, as in files from before
        if not self.worker:
            del point["worker"]  # a serial run's, as in files from before
        if self.counters is None:
            del point["counters"]  # not profiled, as in files from before
        if self.host_load is None:
            del point["host_load"]  # not measured, as in files from before
        for field in ("api_samples_s", "gap_samples_s", "cpu_samples_s"):
            if not point[field]:
                del point[field]  # not stamped, not on a CPU, as in files from before
        return point

    @classmethod
    def from_dict(cls, item: Mapping[str, Any]) -> PointRecord:
        """The point of a results line, checked, with defaults for older files."""
        return cls(**_checked_point(item))

    @property
    def key(self) -> PointKey:
        return PointKey(*self.line_key, self.batch, self.M, self.K, self.N)

    @property
    def identity(self) -> Identity:
        """The point among several machines' results: two hosts' points of one key are two."""
        return Identity(self.host, self.key)

    @property
    def line_key(self) -> LineKey:
        return LineKey(self.label, self.device, self.op, self.variant, self.tile, self.dtype)

    @property
    def operation(self) -> Operation | None:
        """The operation measured, or None for one this version of xbackend does not know."""
        return OPERATIONS.get(self.op)

    @property
    def batched(self) -> bool:
        return self.operation is not None and self.operation.batched

    @property
    def measured(self) -> bool:
        """Timed: a verified result or a wrong one, with its statistics."""
        return self.status in MEASURED and self.kernel_s is not None

    @property
    def kept_kernel_samples_s(self) -> list[float]:
        """The kernel samples the statistics are made of: those not marked."""
        return _kept(self.kernel_samples_s, self.sample_marks)

    @property
    def kept_end_to_end_samples_s(self) -> list[float]:
        return _kept(self.end_to_end_samples_s, self.sample_marks)

    @property
    def trusted(self) -> bool:
        """Measured and not flagged as impossible (above the device's peak)."""
        return self.measured and not any(flag in IMPOSSIBLE for flag in self.flags)

    @property
    def api_median_s(self) -> float | None:
        """The median of the API's clock per launch, where the kernels timed themselves."""
        return _median_kept(self.api_samples_s, self.sample_marks)

    @property
    def gap_median_s(self) -> float | None:
        """The median gap between launches on the device, where batches recorded one."""
        return _median_kept(self.gap_samples_s, self.sample_marks)

    @property
    def overhead_s(self) -> float | None:
        """The launch overhead: the API's median less the kernels' own (a negative one
        is kept as measured: it says the two clocks disagree)."""
        api, kernel = self.api_median_s, self.kernel_median_s
        return None if api is None or kernel is None else api - kernel

    @property
    def kernel_interval_share(self) -> float | None:
        """The half width of the kernel time's 95% interval of the median as a share of
        the median: the precision its sampling stopped at and ``noisy`` is judged by
        (:func:`xbackend.measuring.timing.interval_share`); None without one (fewer than two
        samples, or a file that recorded no interval)."""
        stats = self.kernel_s or {}
        low, high, median = stats.get("ci_low"), stats.get("ci_high"), stats.get("median")
        if low is None or high is None or not median or stats.get("n", 0) < 2:
            return None
        share = (high - low) / 2 / median
        return share if math.isfinite(share) else None

    @property
    def kernel_median_s(self) -> float | None:
        """The median kernel time, where the point has one (a skipped point may have a stub)."""
        return (self.kernel_s or {}).get("median")


@dataclasses.dataclass(frozen=True)
class RunHeader:
    """What a run recorded before its first point: the machine, the plan and the devices."""

    run_id: str
    timestamp: str = ""
    environment: dict[str, Any] = dataclasses.field(default_factory=dict)
    plan: Plan = dataclasses.field(default_factory=lambda: Plan(shapes=[]))
    devices: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    # The Dask cluster a distributed run measured on (xbackend.cluster): its workers,
    # each one's host and devices, and what ran at once; empty for a serial run.
    cluster: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def host(self) -> str:
        host = self.environment.get("host")
        return "" if host is None else str(host)

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "run",
            "run_id": self.run_id,
            "timestamp": self.timestamp,
            "environment": self.environment,
            "plan": self.plan.to_dict(),
            "devices": self.devices,
            **({"cluster": self.cluster} if self.cluster else {}),
        }

    @classmethod
    def from_dict(cls, item: Mapping[str, Any]) -> RunHeader:
        """The run header of a results line; its contents are read loosely, to be shown."""
        if not isinstance(item.get("run_id"), str):
            raise RecordError("run_id", "a run header needs its id")
        parts = {
            field: item.get(field, {}) for field in ("plan", "environment", "devices", "cluster")
        }
        for field, value in parts.items():
            if not isinstance(value, dict):
                raise RecordError(field, "expected an object")
        timestamp = item.get("timestamp")
        return cls(
            run_id=item["run_id"],
            timestamp="" if timestamp is None else str(timestamp),
            environment=parts["environment"],
            plan=Plan.from_dict(parts["plan"]),
            # A device recorded as a bare string is taken for its name.
            devices={
                str(label): device if isinstance(device, dict) else {"name": device}
                for label, device in parts["devices"].items()
            },
            cluster=parts["cluster"],
        )


# -- checking a point ------------------------------------------------------------------------


def _integer(point: Mapping[str, Any], field: str, low: int, high: int) -> int:
    value = point.get(field)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordError(field, f"expected an integer, found {value!r:.40}")
    if not low <= value <= high:
        raise RecordError(field, f"{value} is out of range ({low} to {high})")
    return value


def _number(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RecordError(field, f"expected a number, found {value!r:.40}")
    return float(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _stats(point: Mapping[str, Any], field: str, measured: bool) -> dict[str, float] | None:
    """Statistics of samples: checked where the point was timed, else kept as far as numeric."""
    stats = point.get(field)
    if not measured:
        if not isinstance(stats, dict):
            return None
        return {str(key): float(value) for key, value in stats.items() if _is_number(value)}
    if not isinstance(stats, dict):
        raise RecordError(field, f"a measured point needs its statistics, found {stats!r:.40}")
    for key in _STATS:
        _time(stats.get(key), f"{field}.{key}")
    return {str(key): float(value) for key, value in stats.items() if _is_number(value)}


_STRINGS = ("run_id", "backend", "label", "device", "variant", "dtype", "op", "reason")


def _checked_point(item: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a PointRecord from a results line, or RecordError.

    Older files: no ``op`` (mm), ``batch`` (1), ``dtype`` (float32), ``reason``,
    ``tile``, ``run_id``, ``step``, ``check`` (""), nor, for a measured point,
    ``gflops`` (then taken from the median kernel time).
    """
    defaults = {"op": DEFAULT, "batch": 1, "dtype": "float32", "reason": "", "tile": None}
    point = {**defaults, "run_id": "", **item}
    for field in _STRINGS:
        if not isinstance(point.get(field), str):
            raise RecordError(field, f"expected a string, found {point.get(field)!r:.40}")
    if point.get("status") not in STATUSES:
        raise RecordError("status", f"expected one of {', '.join(STATUSES)}")
    fields: dict[str, Any] = {field: point[field] for field in (*_STRINGS, "status")}
    for field in ("M", "K", "N"):
        fields[field] = _integer(point, field, 0, _MAX_DIMENSION)
    fields["flops"] = _integer(point, "flops", 0, 2 * _MAX_DIMENSION**3)
    fields["batch"] = _integer(point, "batch", 1, _MAX_DIMENSION)
    # An unrunnable tile is recorded too: any size from 0.
    fields["tile"] = None if point["tile"] is None else _integer(point, "tile", 0, _MAX_DIMENSION)
    fields["step"] = None if point.get("step") is None else _integer(point, "step", 1, 2**31)
    for field in ("max_abs_error", "bound_ratio", "gflops"):
        value = point.get(field)
        fields[field] = None if value is None else _number(value, field)
    if point.get("equal") not in (None, True, False):
        raise RecordError("equal", "expected true, false or null")
    fields["equal"] = point.get("equal")
    for field in ("check", "host", "worker"):  # "" where absent, as in files from before
        value = point.get(field)
        if value is not None and not isinstance(value, str):
            raise RecordError(field, f"expected a string, found {value!r:.40}")
        fields[field] = value or ""
    fields.update(_samples(point))
    fields.update(_sampling(point))
    fields["params"] = _params(point.get("params"))
    measured = point["status"] in MEASURED
    fields["kernel_s"] = _stats(point, "kernel_s", measured)
    profiled = fields["clock"] == PROFILER_CLOCK
    fields["end_to_end_s"] = _stats(point, "end_to_end_s", measured and not profiled)
    fields["counters"] = _counters(point.get("counters"))
    if measured and fields["gflops"] is None:
        median = fields["kernel_s"]["median"]
        fields["gflops"] = fields["flops"] / median / 1e9  # a median is above 0: _time
    timestamp = point.get("timestamp")
    fields["timestamp"] = "" if timestamp is None else str(timestamp)
    return fields


def _time(value: Any, field: str) -> float:
    """A time in seconds: a finite number above 0. Zero, -0.0, a negative time, NaN or
    infinity is no measurement (a clock or a file gone wrong): a verdict or a figure
    made of it would be made up, so the line is bad like any other malformed line."""
    seconds = _number(value, field)
    if not 0.0 < seconds < math.inf:
        raise RecordError(field, f"{seconds!r} is not a time in seconds (above 0, finite)")
    return seconds


def _samples(point: Mapping[str, Any]) -> dict[str, list[float]]:
    """The raw samples, each a time (:func:`_time`); none where the point was not timed."""
    found = {}
    for field in ("kernel_samples_s", "end_to_end_samples_s", "api_samples_s"):
        samples = point.get(field, [])
        if not isinstance(samples, list):
            raise RecordError(field, "expected a list of seconds")
        values = [_number(value, field) for value in samples]
        if not all(0.0 < value < math.inf for value in values):  # one pass; then which
            for value in values:
                _time(value, field)
        found[field] = values
    for field in ("gap_samples_s", "cpu_samples_s"):
        gaps = point.get(field, [])
        if not isinstance(gaps, list):
            raise RecordError(field, "expected a list of seconds")
        found[field] = [_gap(value, field) for value in gaps]
    return found


def _gap(value: Any, field: str) -> float:
    """A gap between launches, or a CPU time, in seconds: finite and not negative
    (launches may follow each other within one tick of the clock, so 0 is a gap)."""
    seconds = _number(value, field)
    if not 0.0 <= seconds < math.inf:
        raise RecordError(field, f"{seconds!r} is not a gap in seconds (0 or above)")
    return seconds


def _sampling(point: Mapping[str, Any]) -> dict[str, Any]:
    """How the point was sampled; older files have none of it (one launch, unmarked)."""
    found: dict[str, Any] = {}
    for field in ("stop", "cache", "host_memory", "clock"):
        value = point.get(field)
        if value is not None and not isinstance(value, str):
            raise RecordError(field, f"expected a string, found {value!r:.40}")
        found[field] = value or ""
    found["launches"] = _integer(point, "launches", 1, 2**31) if "launches" in point else 1
    for field in ("sample_marks", "flags"):
        values = point.get(field) or []
        if not (isinstance(values, list) and all(isinstance(v, str) for v in values)):
            raise RecordError(field, "expected a list of strings")
        found[field] = list(values)
    state = point.get("state")
    if state is not None and not isinstance(state, dict):
        raise RecordError("state", "expected an object")
    found["state"] = state
    found["host_load"] = _host_load(point.get("host_load"))
    return found


def _host_load(value: Any) -> dict[str, float] | None:
    """A point's ``host_load``: an object of finite numbers, or None (files from before)."""
    if value is None:
        return None
    if not isinstance(value, dict) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        for v in value.values()
    ):
        raise RecordError("host_load", "expected an object of finite numbers")
    return {str(name): float(v) for name, v in value.items()}


def _params(params: Any) -> dict[str, int] | None:
    if params is None:
        return None
    if not (isinstance(params, dict) and all(isinstance(v, int) for v in params.values())):
        raise RecordError("params", "expected an object of integers")
    return {str(name): int(value) for name, value in params.items()}


def _counters(counters: Any) -> dict[str, float] | None:
    if counters is None:
        return None
    if not (isinstance(counters, dict) and all(_is_number(v) for v in counters.values())):
        raise RecordError("counters", "expected an object of numbers")
    return {str(name): float(value) for name, value in counters.items()}


def _median_kept(samples: list[float], marks: list[str]) -> float | None:
    """The median of the samples :func:`_kept` keeps (marks that do not go with the
    samples one for one are not read); None without samples."""
    kept = _kept(samples, marks if len(marks) == len(samples) else [])
    return statistics.median(kept) if kept else None


def _kept(samples: list[float], marks: list[str]) -> list[float]:
    """The unmarked samples; all of them where every one is marked (flag "throttled")."""
    return list(samples) if marks and all(marks) else unmarked(samples, marks)
