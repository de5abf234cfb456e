"""Plan -> run -> verify -> record: the sweep behind ``xbackend compare``.

For every size the inputs are made once (seeded) and the float64 reference is
computed once; then every (backend, variant, tile) configuration computes the
product, is checked against the reference and timed (``measure.py``), and its
record is appended to the results before the next point starts. A point that
fails is recorded with its reason and the sweep goes on.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from xbackend.configs import Config, configs
from xbackend.cost import CostModel
from xbackend.machine import environment
from xbackend.measure import PILOT_ABOVE_FLOPS, Inputs, measure_point
from xbackend.plan import Plan, Target
from xbackend.progress import Progress, equality_line
from xbackend.results import (
    CSV_NAME,
    JSONL_NAME,
    MEASURED,
    PointKey,
    PointRecord,
    ResultsError,
    ResultsWriter,
    RunHeader,
    load,
    now_iso,
)
from xbackend.safeio import output_folder, refuse_link

if TYPE_CHECKING:
    from xbackend import Backend

__all__ = ["PILOT_ABOVE_FLOPS", "Config", "Plan", "Target", "configs", "resume_notes", "run"]


@dataclasses.dataclass
class _Sweep:
    """What a sweep learns as it goes: times for the budget, failures, what is done."""

    plan: Plan
    run_id: str
    todo: list[Config]
    done: dict[PointKey, PointRecord]
    log: Callable[[str], None]
    cost: CostModel = dataclasses.field(default_factory=CostModel)
    failed: dict[Config, str] = dataclasses.field(default_factory=dict)
    records: list[PointRecord] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        self.progress = Progress(len(self.todo) * len(self.plan.shapes))

    def pending(self, step: int) -> list[tuple[PointRecord, Config, PointRecord | None]]:
        """The points of one size still to measure, each with what a resume found for it.

        Recorded points are learnt from instead: their times, their failures.
        """
        shape = self.plan.shapes[step - 1]
        pending = []
        for config in self.todo:
            record = config.record(self.run_id, shape, step, self.plan.batch)
            prior = self.done.get(record.key)
            if prior is None or prior.status == "skipped":
                pending.append((record, config, prior))  # a skip is looked at again
                continue
            self.progress.done += 1
            if prior.status in MEASURED and prior.end_to_end_s is not None:
                self.cost.add(config, prior.flops, prior.end_to_end_s["median"])
            elif prior.status == "error":
                self.failed[config] = prior.reason.splitlines()[0]
        return pending

    def measure_size(self, step: int, writer: ResultsWriter) -> None:
        plan = self.plan
        inputs = Inputs(plan.shapes[step - 1], plan.seed, plan.batch)
        for blank, config, prior in self.pending(step):
            self.progress.show(f"{config.title} {plan.shapes[step - 1]}")
            blank = dataclasses.replace(blank, timestamp=now_iso())
            record = measure_point(plan, config, blank, inputs, self.cost, self.failed)
            self.progress.done += 1
            if prior is not None and (record.status, record.reason) == (prior.status, prior.reason):
                continue  # skipped again for the same reason: recorded already
            writer.append(record)
            self.records.append(record)
            self.progress.clear()
            self.log(equality_line(record, self.progress.done, self.progress.total))


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
    output_folder(out)
    for name in (JSONL_NAME, CSV_NAME):
        refuse_link(out / name)  # before reading: a resume writes there
    done: dict[PointKey, PointRecord] = {}
    if resume and (out / JSONL_NAME).exists():
        runs, points = load([out])
        for note in resume_notes(plan, list(runs.values())):
            log(note)
        done = {point.key: point for point in points}
    sweep = _Sweep(plan, uuid.uuid4().hex[:12], configs(plan, opened), done, log)
    header = RunHeader(
        run_id=sweep.run_id,
        timestamp=now_iso(),
        environment=environment(),
        plan=plan,
        devices={label: backend.device.to_dict() for label, backend in opened},
    )
    with ResultsWriter(out, header) as writer:
        try:
            for step in range(1, len(plan.shapes) + 1):
                sweep.measure_size(step, writer)
        finally:
            sweep.progress.clear()
    return sweep.records


# What a resume must share with the recorded runs, and what it may change.
_SAME_INPUTS = ("seed",)
_THOROUGHNESS = ("warmup", "samples", "min_samples", "max_sample_time_s")


def resume_notes(plan: Plan, runs: list[RunHeader]) -> list[str]:
    """Refuse a resume whose plan contradicts the recorded runs; say what it keeps.

    Points made from other inputs (another seed) cannot be mixed with this plan's:
    that is an error. Other sample counts only change how thoroughly the new
    points are measured: the recorded points keep theirs, and a note says so.
    Points skipped for the budget are looked at again, so a larger ``--budget``
    measures them.
    """
    notes = []
    for run in runs:
        recorded = run.plan
        for name in _SAME_INPUTS:
            if getattr(recorded, name) != getattr(plan, name):
                raise ResultsError(
                    f"the results being resumed were made with {name} "
                    f"{getattr(recorded, name)!r}, this run asks for {getattr(plan, name)!r}: "
                    f"resume with the same --{name}, or choose another --out"
                )
        changed = [
            f"{name} {getattr(recorded, name)!r} -> {getattr(plan, name)!r}"
            for name in _THOROUGHNESS
            if getattr(recorded, name) != getattr(plan, name)
        ]
        if changed:
            notes.append(
                f"resume: the recorded points keep their measurement ({', '.join(changed)} "
                "apply to the new points only)"
            )
    return list(dict.fromkeys(notes))
