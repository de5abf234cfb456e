"""What the main process and the workers send each other: the lines of the comparison,
a point to measure, and what measuring it gave.

The main process never opens a device: it knows each line as a ``RemoteLine``, plain
data a worker made from its ``configs.Config``, and builds the points' keys from it
exactly as ``Config.record`` does, so that a resume finds them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from xbackend.operations import Shape
from xbackend.results import PointRecord
from xbackend.results.plan import Plan
from xbackend.sweep.configs import Config, line_title, unmeasured


@dataclasses.dataclass(frozen=True)
class RemoteLine:
    """One line of the comparison as the main process knows it: ``Config`` without the
    opened backend (that lives on a worker)."""

    label: str
    backend: str  # the backend's name
    device: str  # the device's name
    op: str
    variant: str
    tile: int | None
    dtype: str
    problem: str | None = None  # why this cannot run on its device

    @classmethod
    def of(cls, config: Config) -> RemoteLine:
        return cls(
            label=config.label,
            backend=config.backend.name,
            device=config.backend.device.name,
            op=config.op,
            variant=config.variant,
            tile=config.tile,
            dtype=config.dtype,
            problem=config.problem,
        )

    @property
    def title(self) -> str:
        return line_title(self.label, self.op, self.variant, self.tile, self.dtype)

    def record(self, run_id: str, shape: Shape, step: int, plan_batch: int) -> PointRecord:
        """This line's point at ``shape``, not measured yet (as ``Config.record``)."""
        return unmeasured(
            run_id, shape, step, plan_batch, backend=self.backend, label=self.label,
            device=self.device, op=self.op, variant=self.variant, tile=self.tile,
            dtype=self.dtype,
        )  # fmt: skip


@dataclasses.dataclass(frozen=True)
class PointTask:
    """Points of one line for a worker, measured in order: the line, on which of its
    devices, with what the main process learnt of the line so far (its times for the
    budget, its failure). Several points (``blanks``, consecutive sizes) make one task
    where the line's points are short (``schedule.batch``): one round trip for them all."""

    plan: Plan
    target: str  # the worker's device to run it on
    line: RemoteLine
    blanks: tuple[PointRecord, ...]  # the points, not measured yet, in ascending size
    history: tuple[tuple[int, float], ...] = ()  # (flops, seconds) the line ran
    failed: str | None = None  # why the line failed at a smaller size


@dataclasses.dataclass(frozen=True)
class PointResult:
    """A point measured (or skipped, or failed) on a worker, and what the cost model
    learnt there (a pilot run's time, the point's), for the line's next point; a task
    gives one per point it was sent."""

    record: PointRecord
    learnt: tuple[tuple[int, float], ...]
    wall_s: float


@dataclasses.dataclass(frozen=True)
class Prepared:
    """A device's part of the run header and its lines for the plan, from one worker."""

    record: dict[str, Any]
    lines: tuple[RemoteLine, ...]


@dataclasses.dataclass(frozen=True)
class TuneRequest:
    """``xbackend tune``'s options, for each worker's device."""

    variants: tuple[str, ...]  # empty: every tuned variant of the device
    sizes: tuple[Shape, ...]  # empty: the defaults for the device's kind
    gpu_sizes: tuple[Shape, ...]
    cpu_sizes: tuple[Shape, ...]
    dtype: str
    ops: tuple[str, ...]
    seed: int
    samples: int
    finalist_time_s: float
    search: str = "coarse"  # see tune_search.SEARCHES
    # The deadline of each step of a user's candidate, in its process of its own on the
    # worker (``tune --kernel-timeout``, the main process's XBACKEND_KERNEL_TIMEOUT); None:
    # the worker's own setting.
    kernel_timeout_s: float | None = None

    def default_sizes(self, gpu: bool) -> list[Shape]:
        return list(self.gpu_sizes if gpu else self.cpu_sizes)
