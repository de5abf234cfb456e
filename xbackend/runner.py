"""Plan -> run -> verify -> record: the sweep behind ``xbackend compare``.

For every size the inputs are made once (seeded) and the float64 reference is
computed once; then every (backend, variant, tile) configuration computes the
product, is checked against the reference and timed, and its record is
appended to the results before the next point starts. A point that fails is
recorded with its reason and the sweep goes on.
"""

from __future__ import annotations

import dataclasses
import sys
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from xbackend.backends.base import Backend
from xbackend.errors import UnsupportedParameter
from xbackend.machine import environment
from xbackend.problems import (
    Reference,
    Shape,
    check,
    dtype_named,
    flops,
    make_operands,
    output_size,
)
from xbackend.results import (
    CSV_NAME,
    JSONL_NAME,
    PointRecord,
    ResultsError,
    ResultsWriter,
    load,
    now_iso,
    point_key,
)
from xbackend.safeio import output_folder, refuse_link
from xbackend.timing import Stats, format_seconds


@dataclasses.dataclass(frozen=True)
class Target:
    """A backend to run, as named on the command line: ``name`` or ``name:device``."""

    name: str
    device: str | None = None

    @classmethod
    def parse(cls, text: str) -> Target:
        name, _, device = text.strip().partition(":")
        if not name:
            raise ValueError(f"bad backend {text!r}: write NAME or NAME:DEVICE")
        return cls(name.lower(), device or None)

    @property
    def label(self) -> str:
        return f"{self.name}:{self.device}" if self.device else self.name


@dataclasses.dataclass
class Plan:
    """What to measure and how thoroughly."""

    shapes: list[Shape]
    ops: list[str] = dataclasses.field(default_factory=lambda: ["mm"])
    dtypes: list[str] = dataclasses.field(default_factory=lambda: ["float32"])
    batch: int = 1  # products per bmm
    variants: list[str] | None = None  # None: every variant of each backend
    tiles: list[int] | None = None  # None: each variant's default tile
    preset: str | None = None  # the experiment this plan comes from, for the report
    seed: int = 0
    warmup: int = 1
    samples: int = 10
    min_samples: int = 3
    max_sample_time_s: float = 1.0
    budget_s: float = 20.0  # per point; 0 turns the estimate off

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["shapes"] = [[s.M, s.K, s.N] for s in self.shapes]
        return data


@dataclasses.dataclass(frozen=True)
class Config:
    """One line of the comparison: a backend instance, an operation, variant, tile, dtype."""

    label: str
    backend: Backend
    op: str
    variant: str
    tile: int | None
    dtype: str
    problem: str | None = None  # why this cannot run here

    @property
    def title(self) -> str:
        tile = f" T={self.tile}" if self.tile else ""
        return f"{self.label} {self.op} {self.variant}{tile} {self.dtype}"


def configs(plan: Plan, opened: Sequence[tuple[str, Backend]]) -> list[Config]:
    """Every (backend, op, variant, tile, dtype) the plan asks for, in a stable order."""
    result = []
    for op in plan.ops:
        for label, backend in opened:
            for variant in backend.variants(op):
                if plan.variants is not None and variant not in plan.variants:
                    continue
                spec = backend.variant_spec(variant, op)
                tiles: list[int | None] = [None]
                if spec.takes_tile and (plan.tiles or not spec.tuned):
                    tiles = list(plan.tiles or [spec.default_tile or spec.tiles[0]])
                for tile in tiles:
                    for dtype in plan.dtypes:
                        problem = _problem(backend, op, variant, tile, dtype_named(dtype))
                        result.append(Config(label, backend, op, variant, tile, dtype, problem))
    return result


def _problem(
    backend: Backend, op: str, variant: str, tile: int | None, dtype: np.dtype
) -> str | None:
    """Why this configuration cannot run on the backend's device, or None."""
    problem = backend.dtype_problem(dtype)
    if problem:
        return f"{dtype} cannot run on this device: {problem}"
    problem = backend.variant_problem(variant, dtype, op)
    if problem:
        return problem
    if tile is not None:
        problem = backend.tile_problem(variant, tile, dtype.itemsize, op)
        if problem:
            return f"tile {tile} cannot run on this device: {problem}"
    return None


class _CostModel:
    """Predicts a configuration's time per run from the sizes it already ran.

    With two or more measured sizes it fits ``t = overhead + flops / rate`` to
    the two largest; with one it scales linearly in flops, but only from a time
    long enough (10 ms) not to be launch overhead. Without a prediction, it
    does not skip.
    """

    def __init__(self) -> None:
        self._seen: dict[Config, list[tuple[int, float]]] = {}

    def add(self, config: Config, flops: int, seconds: float) -> None:
        self._seen.setdefault(config, []).append((flops, seconds))

    def predict(self, config: Config, flops: int) -> float | None:
        seen = sorted(self._seen.get(config, []))
        if len(seen) >= 2 and seen[-1][0] > seen[-2][0]:
            (f1, t1), (f2, t2) = seen[-2], seen[-1]
            slope = max((t2 - t1) / (f2 - f1), t2 / f2 / 4)
            return max(t2 + slope * (flops - f2), 0.0)
        if seen and seen[-1][1] >= 0.01:
            return seen[-1][1] * flops / seen[-1][0]
        return None


class Progress:
    """A one-line progress bar on a terminal; silence elsewhere (logs have the point lines)."""

    def __init__(self, total: int, stream: TextIO = sys.stderr):
        self.total = total
        self.done = 0
        self.stream = stream
        self.live = stream.isatty()
        self.start = time.perf_counter()

    def show(self, text: str) -> None:
        if not self.live:
            return
        width = 24
        filled = int(width * self.done / max(self.total, 1))
        elapsed = time.perf_counter() - self.start
        eta = elapsed / self.done * (self.total - self.done) if self.done else 0.0
        bar = "#" * filled + "-" * (width - filled)
        line = f"[{bar}] {self.done}/{self.total}  eta {eta:4.0f} s  {text}"
        self.stream.write("\r\033[K" + line[:150])
        self.stream.flush()

    def clear(self) -> None:
        if self.live:
            self.stream.write("\r\033[K")
            self.stream.flush()


def equality_line(record: PointRecord, index: int, total: int) -> str:
    """The log line of one point, after the assignment's "code equality" printout."""
    tile = f"T={record.tile}" if record.tile else ""
    if not record.tile and record.params and "BM" in record.params:
        tile = f"{record.params['BM']}×{record.params['BN']}"  # the tuned variant's choice
    batch = f"{record.batch}×" if record.op == "bmm" else ""
    kind = "" if (record.op, record.dtype) == ("mm", "float32") else f"{record.op} {record.dtype} "
    head = (
        f"[{index:>{len(str(total))}}/{total}] {record.label:<10} {record.variant:<6} {tile:<5} "
        f"{kind}{batch}{record.M}×{record.K} · {record.K}×{record.N}"
    )
    if record.status in ("skipped", "error"):
        return f"{head}  {record.status}: {record.reason.splitlines()[0]}"
    assert record.kernel_s is not None and record.end_to_end_s is not None
    return (
        f"{head}  code equality: {record.equal}  "
        f"max|err| {record.max_abs_error:.2g} ({record.bound_ratio:.2g} of bound)  "
        f"kernel {format_seconds(record.kernel_s['median'])}  "
        f"end-to-end {format_seconds(record.end_to_end_s['median'])}  "
        f"{record.gflops:.3g} GFLOP/s"
    )


def _key(config: Config, shape: Shape, batch: int) -> tuple[Any, ...]:
    """The results' point_key of a configuration at a size."""
    fields = {
        "label": config.label,
        "device": config.backend.device.name,
        "op": config.op,
        "variant": config.variant,
        "tile": config.tile,
        "dtype": config.dtype,
        "batch": batch if config.op == "bmm" else 1,
        "M": shape.M,
        "K": shape.K,
        "N": shape.N,
    }
    return point_key(fields)


def run(
    plan: Plan,
    opened: Sequence[tuple[str, Backend]],
    out: Path,
    *,
    log: Callable[[str], None] = print,
    resume: bool = False,
) -> list[PointRecord]:
    """Measure every point of ``plan`` on the opened backends; append each to ``out``.

    With ``resume``, points already in ``out`` are not measured again; what they
    measured still feeds the time predictions and the failure memory.
    """
    run_id = uuid.uuid4().hex[:12]
    todo = configs(plan, opened)
    cost = _CostModel()
    failed: dict[Config, str] = {}
    records: list[PointRecord] = []
    total = len(todo) * len(plan.shapes)
    progress = Progress(total)
    done: dict[tuple[Any, ...], dict[str, Any]] = {}
    output_folder(out)
    for name in (JSONL_NAME, CSV_NAME):
        refuse_link(out / name)  # before reading: a resume writes there
    if resume and (out / JSONL_NAME).exists():
        runs, points = load([out])
        for note in resume_notes(plan, list(runs.values())):
            log(note)
        done = {point_key(point): point for point in points}
    header = {
        "run_id": run_id,
        "timestamp": now_iso(),
        "environment": environment(),
        "plan": plan.to_dict(),
        "devices": {label: backend.device.to_dict() for label, backend in opened},
    }
    with ResultsWriter(out, header) as writer:
        try:
            for shape in plan.shapes:
                pending: list[tuple[Config, dict[str, Any] | None]] = []
                for config in todo:
                    prior = done.get(_key(config, shape, plan.batch))
                    if prior is None or prior["status"] == "skipped":
                        pending.append((config, prior))  # a skip is looked at again
                        continue
                    progress.done += 1
                    if prior["status"] in ("ok", "mismatch"):
                        cost.add(config, prior["flops"], prior["end_to_end_s"]["median"])
                    elif prior["status"] == "error":
                        failed[config] = prior["reason"].splitlines()[0]
                inputs = _Inputs(shape, plan.seed, plan.batch)
                for config, prior in pending:
                    progress.show(f"{config.title} {shape}")
                    record = _measure_point(plan, config, shape, inputs, cost, failed)
                    progress.done += 1
                    if prior is not None and (record.status, record.reason) == (
                        prior["status"],
                        prior["reason"],
                    ):
                        continue  # skipped again for the same reason: recorded already
                    record.run_id = run_id
                    writer.append(record)
                    records.append(record)
                    progress.clear()
                    log(equality_line(record, progress.done, total))
        finally:
            progress.clear()
    return records


# What a resume must share with the recorded runs, and what it may change.
_SAME_INPUTS = ("seed",)
_THOROUGHNESS = ("warmup", "samples", "min_samples", "max_sample_time_s")


def resume_notes(plan: Plan, runs: list[dict[str, Any]]) -> list[str]:
    """Refuse a resume whose plan contradicts the recorded runs; say what it keeps.

    Points made from other inputs (another seed) cannot be mixed with this plan's:
    that is an error. Other sample counts only change how thoroughly the new
    points are measured: the recorded points keep theirs, and a note says so.
    Points skipped for the budget are looked at again, so a larger ``--budget``
    measures them.
    """
    new = plan.to_dict()
    notes = []
    for run in runs:
        recorded = run.get("plan") or {}
        for name in _SAME_INPUTS:
            if name in recorded and recorded[name] != new[name]:
                raise ResultsError(
                    f"the results being resumed were made with {name} {recorded[name]!r}, "
                    f"this run asks for {new[name]!r}: resume with the same "
                    f"--{name}, or choose another --out"
                )
        changed = [
            f"{name} {recorded[name]!r} -> {new[name]!r}"
            for name in _THOROUGHNESS
            if name in recorded and recorded[name] != new[name]
        ]
        if changed:
            notes.append(
                f"resume: the recorded points keep their measurement ({', '.join(changed)} "
                "apply to the new points only)"
            )
    return list(dict.fromkeys(notes))


# A configuration's first size above this many flops is preceded by a pilot run.
PILOT_ABOVE_FLOPS = 2e9


def _pilot(
    config: Config, shape: Shape, batch: int, cost: _CostModel, point_flops: int
) -> float | None:
    """Time one unrecorded run at a quarter of each dimension, to predict this point.

    Without it a configuration's first size has no history, and nothing would stop
    the serial CPU loop from starting an hour-long product.
    """

    def quarter(n: int) -> int:
        return max(2, n // 8 * 2) if config.op == "rmm" else max(1, n // 4)

    small = Shape(quarter(shape.M), quarter(shape.K), quarter(shape.N))
    try:
        A, B = make_operands(
            small, 0, dtype_named(config.dtype), batch if config.op == "bmm" else None
        )
        measured = config.backend.measure(
            A, B, config.variant, config.tile, op=config.op, warmup=0, samples=1, min_samples=1
        )
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception:  # MemoryError included
        return None  # the real point will meet the same problem and record it
    cost.add(config, flops(config.op, small, batch), measured.end_to_end_s[0])
    return cost.predict(config, point_flops)


class _Inputs:
    """Operands and references of one size, made once and shared by every configuration."""

    def __init__(self, shape: Shape, seed: int, batch: int):
        self.shape, self.seed, self.batch = shape, seed, batch
        self._operands: dict[tuple[bool, str], tuple[np.ndarray, np.ndarray]] = {}
        self._references: dict[tuple[str, str], Reference] = {}

    def operands(self, op: str, dtype: str) -> tuple[np.ndarray, np.ndarray]:
        key = (op == "bmm", dtype)
        if key not in self._operands:
            batch = self.batch if op == "bmm" else None
            self._operands[key] = make_operands(self.shape, self.seed, dtype_named(dtype), batch)
        return self._operands[key]

    def reference(self, op: str, dtype: str) -> Reference:
        if (op, dtype) not in self._references:
            self._references[(op, dtype)] = Reference.of(*self.operands(op, dtype), op=op)
        return self._references[(op, dtype)]


def _measure_point(
    plan: Plan,
    config: Config,
    shape: Shape,
    inputs: _Inputs,
    cost: _CostModel,
    failed: dict[Config, str],
) -> PointRecord:
    batch = plan.batch if config.op == "bmm" else 1
    point_flops = flops(config.op, shape, batch)
    record = PointRecord(
        run_id="",
        backend=config.backend.name,
        label=config.label,
        device=config.backend.device.name,
        variant=config.variant,
        tile=config.tile,
        dtype=config.dtype,
        M=shape.M,
        K=shape.K,
        N=shape.N,
        flops=point_flops,
        status="skipped",
        op=config.op,
        batch=batch,
        timestamp=now_iso(),
    )
    if config.problem:
        record.reason = config.problem
        return record
    if config in failed:
        record.reason = f"failed at a smaller size: {failed[config]}"
        return record
    problem = _memory_problem(config, shape, batch)
    if problem:
        record.reason = problem
        return record
    per_run_s = cost.predict(config, point_flops)
    if plan.budget_s > 0 and per_run_s is None and point_flops > PILOT_ABOVE_FLOPS:
        per_run_s = _pilot(config, shape, batch, cost, point_flops)
    if plan.budget_s > 0 and per_run_s is not None:
        point_s = per_run_s * (1 + plan.warmup + plan.min_samples)
        if point_s > plan.budget_s:
            record.reason = (
                f"estimated {point_s:.3g} s for this point exceeds the budget of "
                f"{plan.budget_s:g} s per point (--budget)"
            )
            return record
    try:
        A, B = inputs.operands(config.op, config.dtype)
        reference = inputs.reference(config.op, config.dtype)
        measurement = config.backend.measure(
            A,
            B,
            config.variant,
            config.tile,
            op=config.op,
            warmup=plan.warmup,
            samples=plan.samples,
            min_samples=plan.min_samples,
            max_sample_time_s=plan.max_sample_time_s,
        )
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as error:
        record.status = "error"
        record.reason = _describe_error(error)
        failed[config] = record.reason.splitlines()[0]
        return record
    # The record keeps the configuration's tile (None: the variant chose), so that a
    # resume finds it under the key it was asked for; a tuned choice is in params.
    record.params = measurement.params
    first = check(measurement.result, reference)
    last = check(measurement.last_result, reference)
    worst = first if not first.equal or first.bound_ratio >= last.bound_ratio else last
    record.equal = first.equal and last.equal
    record.status = "ok" if record.equal else "mismatch"
    if not record.equal:
        which = "the first run" if not first.equal else "the last timed run"
        nan = f", {worst.nan_count} elements not finite" if worst.nan_count else ""
        record.reason = f"{which} differs from the reference beyond the tolerance{nan}"
    record.max_abs_error = worst.max_abs_error
    record.bound_ratio = worst.bound_ratio
    kernel = Stats.of(measurement.kernel_s)
    end_to_end = Stats.of(measurement.end_to_end_s)
    record.kernel_s = kernel.to_dict()
    record.end_to_end_s = end_to_end.to_dict()
    record.kernel_samples_s = measurement.kernel_s
    record.end_to_end_samples_s = measurement.end_to_end_s
    record.gflops = point_flops / kernel.median / 1e9 if kernel.median > 0 else float("inf")
    cost.add(config, point_flops, end_to_end.median)
    return record


def _available_host_bytes() -> int | None:
    """What the host can still give (MemAvailable), where the system says."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.3g} GiB"


def _memory_problem(config: Config, shape: Shape, batch: int) -> str | None:
    """Why this point cannot fit the device or the host, checked before anything is made.

    The device holds A, B and C; the host holds A and B, their float64 copies and
    the float64 reference, and the outputs of the first and the last run.
    """
    itemsize = dtype_named(config.dtype).itemsize
    rows, columns = output_size(config.op, shape)
    a, b, c = (batch * shape.M * shape.K, batch * shape.K * shape.N, batch * rows * columns)
    device = config.backend.device
    on_device = (a + b + c) * itemsize
    if device.global_mem_bytes and on_device > device.global_mem_bytes:
        return f"A, B and C need {_gib(on_device)}; the device has {_gib(device.global_mem_bytes)}"
    if device.max_alloc_bytes and max(a, b, c) * itemsize > device.max_alloc_bytes:
        return (
            f"the largest matrix needs {_gib(max(a, b, c) * itemsize)}; one buffer of "
            f"the device holds at most {_gib(device.max_alloc_bytes)}"
        )
    on_host = (a + b) * (itemsize + 8) + c * (8 + 2 * itemsize)
    available = _available_host_bytes()
    if available is not None and on_host > available:
        return (
            f"the operands, the float64 reference and the outputs need {_gib(on_host)} "
            f"of host memory; {_gib(available)} is available"
        )
    return None


def _describe_error(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    if not isinstance(error, UnsupportedParameter):
        frame = traceback.extract_tb(error.__traceback__)[-1:]
        if frame:
            text += f" (at {Path(frame[0].filename).name}:{frame[0].lineno})"
    return text[:4000]
