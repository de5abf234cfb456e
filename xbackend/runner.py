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

from xbackend.backends.base import Backend, UnsupportedParameter
from xbackend.problems import Reference, Shape, check, make_operands
from xbackend.results import (
    JSONL_NAME,
    PointRecord,
    ResultsWriter,
    environment,
    load,
    now_iso,
    point_key,
)
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
    variants: list[str] | None = None  # None: every variant of each backend
    tiles: list[int] | None = None  # None: each variant's default tile
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
    """One line of the comparison: a backend instance, a variant and a tile."""

    label: str
    backend: Backend
    variant: str
    tile: int | None
    problem: str | None = None  # why this tile cannot run here

    @property
    def title(self) -> str:
        tile = f" T={self.tile}" if self.tile else ""
        return f"{self.label} {self.variant}{tile}"


def configs(plan: Plan, opened: Sequence[tuple[str, Backend]]) -> list[Config]:
    """Every (backend, variant, tile) the plan asks for, in a stable order."""
    result = []
    for label, backend in opened:
        for variant in backend.variants():
            if plan.variants is not None and variant not in plan.variants:
                continue
            spec = backend.variant_spec(variant)
            if not spec.takes_tile:
                result.append(Config(label, backend, variant, None))
                continue
            for tile in plan.tiles or [spec.default_tile or spec.tiles[0]]:
                problem = backend.tile_problem(variant, tile)
                result.append(Config(label, backend, variant, tile, problem))
    return result


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
    head = (
        f"[{index:>{len(str(total))}}/{total}] {record.label:<10} {record.variant:<6} {tile:<5} "
        f"{record.M}×{record.K} · {record.K}×{record.N}"
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


def _key(config: Config, shape: Shape) -> tuple[Any, ...]:
    device = config.backend.device.name
    dtype = "float32"
    return (config.label, device, config.variant, config.tile, shape.M, shape.K, shape.N, dtype)


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
    if resume and (out / JSONL_NAME).exists():
        done = {point_key(point): point for point in load([out])[1]}
    with ResultsWriter(out) as writer:
        writer.write_run(
            {
                "run_id": run_id,
                "timestamp": now_iso(),
                "environment": environment(),
                "plan": plan.to_dict(),
                "devices": {label: backend.device.to_dict() for label, backend in opened},
            }
        )
        try:
            for shape in plan.shapes:
                pending = []
                for config in todo:
                    prior = done.get(_key(config, shape))
                    if prior is None:
                        pending.append(config)
                        continue
                    progress.done += 1
                    if prior["status"] in ("ok", "mismatch"):
                        cost.add(config, shape.flops, prior["end_to_end_s"]["median"])
                    elif prior["status"] == "error":
                        failed[config] = prior["reason"].splitlines()[0]
                if not pending:
                    continue
                A, B = make_operands(shape, plan.seed)
                reference = Reference.of(A, B)
                for config in pending:
                    progress.show(f"{config.title} {shape}")
                    record = _measure_point(plan, config, shape, A, B, reference, cost, failed)
                    record.run_id = run_id
                    writer.append(record)
                    records.append(record)
                    progress.done += 1
                    progress.clear()
                    log(equality_line(record, progress.done, total))
        finally:
            progress.clear()
    return records


def _measure_point(
    plan: Plan,
    config: Config,
    shape: Shape,
    A: np.ndarray,
    B: np.ndarray,
    reference: Reference,
    cost: _CostModel,
    failed: dict[Config, str],
) -> PointRecord:
    record = PointRecord(
        run_id="",
        backend=config.backend.name,
        label=config.label,
        device=config.backend.device.name,
        variant=config.variant,
        tile=config.tile,
        dtype=str(A.dtype),
        M=shape.M,
        K=shape.K,
        N=shape.N,
        flops=shape.flops,
        status="skipped",
        timestamp=now_iso(),
    )
    if config.problem:
        record.reason = f"tile {config.tile} cannot run on this device: {config.problem}"
        return record
    if config in failed:
        record.reason = f"failed at a smaller size: {failed[config]}"
        return record
    per_run_s = cost.predict(config, shape.flops)
    if plan.budget_s > 0 and per_run_s is not None:
        point_s = per_run_s * (1 + plan.warmup + plan.min_samples)
        if point_s > plan.budget_s:
            record.reason = (
                f"estimated {point_s:.3g} s for this point exceeds the budget of "
                f"{plan.budget_s:g} s per point (--budget)"
            )
            return record
    try:
        measurement = config.backend.measure(
            A,
            B,
            config.variant,
            config.tile,
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
    first = check(measurement.result, reference)
    last = check(measurement.last_result, reference)
    worst = first if not first.equal or first.bound_ratio >= last.bound_ratio else last
    record.equal = first.equal and last.equal
    record.status = "ok" if record.equal else "mismatch"
    if not record.equal:
        which = "the first run" if not first.equal else "the last timed run"
        nan = f", {worst.nan_count} elements not finite" if worst.nan_count else ""
        record.reason = f"{which} differs from the reference beyond the rounding bound{nan}"
    record.max_abs_error = worst.max_abs_error
    record.bound_ratio = worst.bound_ratio
    kernel = Stats.of(measurement.kernel_s)
    end_to_end = Stats.of(measurement.end_to_end_s)
    record.kernel_s = kernel.to_dict()
    record.end_to_end_s = end_to_end.to_dict()
    record.kernel_samples_s = measurement.kernel_s
    record.end_to_end_samples_s = measurement.end_to_end_s
    record.gflops = shape.flops / kernel.median / 1e9 if kernel.median > 0 else float("inf")
    cost.add(config, shape.flops, end_to_end.median)
    return record


def _describe_error(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    if not isinstance(error, UnsupportedParameter):
        frame = traceback.extract_tb(error.__traceback__)[-1:]
        if frame:
            text += f" (at {Path(frame[0].filename).name}:{frame[0].lineno})"
    return text[:4000]
