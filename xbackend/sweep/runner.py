"""Plan -> run -> verify -> record: the sweep behind ``xbackend compare``.

For every size the inputs are made once (seeded) and the float64 reference is
computed once; then every (backend, variant, tile) configuration computes the
product, is checked against the reference and timed (``measure.py``), and its
record is appended to the results before the next point starts. A point that
fails is recorded with its reason and the sweep goes on.

Before the first point, each device's ceilings are measured (``Backend.ceilings``, for
the plan's float dtypes: a second or two per device) and kept in the run header, for the
tables' roof shares and the roofline; ``XBACKEND_NO_CEILINGS=1`` leaves them out.

``Sweep`` is what the serial sweep here and the distributed one (``xbackend.cluster``:
the same points on Dask workers) share: what a resume measures again, what it learns
from, and how a finished point is written (once).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
import uuid
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from xbackend import families
from xbackend.launches.geometries import per_product
from xbackend.measuring.timing import CONDITIONS, Sampling, format_seconds
from xbackend.operations import Shape, operation
from xbackend.results import (
    CSV_NAME,
    JSONL_NAME,
    MEASURED,
    WORKER_LOST,
    PointKey,
    PointRecord,
    ResultsError,
    ResultsWriter,
    RunHeader,
    load,
    now_iso,
)
from xbackend.results.plan import Plan, Target
from xbackend.safeio import output_folder, refuse_link
from xbackend.sweep.configs import Config, configs
from xbackend.sweep.cost import CostModel
from xbackend.sweep.environment import environment
from xbackend.sweep.isolation import Isolation
from xbackend.sweep.measure import (
    PILOT_ABOVE_FLOPS,
    Inputs,
    fewest_samples,
    measure_point,
    memory_problem,
)
from xbackend.sweep.progress import SweepDisplay
from xbackend.tuning.cache import CachedChoices

if TYPE_CHECKING:
    from xbackend.backends.interface import Backend

__all__ = [
    "PILOT_ABOVE_FLOPS",
    "Config",
    "Line",
    "Plan",
    "Sweep",
    "Target",
    "configs",
    "device_record",
    "new_run_id",
    "plan_lines",
    "point_time_s",
    "recorded",
    "resume_notes",
    "run",
    "say_closing",
]


class Line(Hashable, Protocol):
    """What the sweep needs of one line of the comparison: a ``configs.Config`` here,
    a line measured on a worker elsewhere (``xbackend.cluster``)."""

    @property
    def op(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def problem(self) -> str | None: ...

    def record(self, run_id: str, shape: Shape, step: int, plan_batch: int) -> PointRecord: ...


LineT = TypeVar("LineT", bound=Line)


@dataclasses.dataclass
class Sweep(Generic[LineT]):
    """What a sweep learns as it goes: times for the budget, failures, what is done.

    The one place that decides what a resume measures again, learns from what it
    recorded, and writes a finished point (each point once per run), whether the
    points are measured here (``run``) or on workers (``xbackend.cluster``).
    """

    plan: Plan
    run_id: str
    todo: list[LineT]
    done: dict[PointKey, PointRecord]
    display: SweepDisplay
    cost: CostModel = dataclasses.field(default_factory=CostModel)
    failed: dict[LineT, str] = dataclasses.field(default_factory=dict)
    records: list[PointRecord] = dataclasses.field(default_factory=list)
    finished: set[tuple[int, LineT]] = dataclasses.field(default_factory=set)
    point_walls_s: list[float] = dataclasses.field(default_factory=list)
    # The (flops, seconds) each line learnt from, for a worker's cost model.
    history: dict[LineT, list[tuple[int, float]]] = dataclasses.field(default_factory=dict)
    written: set[PointKey] = dataclasses.field(default_factory=set)

    def prior(self, step: int, line: LineT) -> tuple[PointRecord, PointRecord | None] | None:
        """The point of ``line`` at ``step`` if it is still to measure, with what a resume
        found for it; None if it is recorded: then its time or failure is learnt from.

        A skip is looked at again, and so is a point a lost worker left unmeasured.
        """
        due = self.unrecorded(step, line)
        if due is not None:
            return due
        record = line.record(self.run_id, self.plan.shapes[step - 1], step, self.plan.batch)
        prior = self.done[record.key]
        self.display.learnt()
        self.finished.add((step, line))
        if prior.status in MEASURED and prior.end_to_end_s is not None:
            self.learn(line, prior.flops, prior.end_to_end_s["median"])
        elif prior.status == "error":
            self.failed[line] = prior.reason.splitlines()[0]
        return None

    def unrecorded(self, step: int, line: LineT) -> tuple[PointRecord, PointRecord | None] | None:
        """``prior`` without learning: the point if it is still to measure, else None."""
        record = line.record(self.run_id, self.plan.shapes[step - 1], step, self.plan.batch)
        prior = self.done.get(record.key)
        if prior is None or prior.status == "skipped" or WORKER_LOST in prior.flags:
            return record, prior
        return None

    def pending(self, step: int) -> list[tuple[PointRecord, LineT, PointRecord | None]]:
        """The points of one size still to measure, each with what a resume found for it."""
        pending = []
        for line in self.todo:
            due = self.prior(step, line)
            if due is not None:
                pending.append((due[0], line, due[1]))
        return pending

    def learn(self, line: LineT, flops: int, seconds: float) -> None:
        """A time of ``line``: for the budget's predictions and the time left."""
        self.cost.add(line, flops, seconds)
        self.history.setdefault(line, []).append((flops, seconds))

    def finish(
        self, line: LineT, record: PointRecord, prior: PointRecord | None, writer: ResultsWriter,
        wall_s: float,
    ) -> None:  # fmt: skip
        """A point is done: shown and appended, unless it repeats what was recorded (a
        skip for the same reason) or this run wrote it already."""
        if record.status != "skipped":
            self.point_walls_s.append(wall_s)
        assert record.step is not None
        self.finished.add((record.step, line))
        if record.key in self.written:
            return  # whatever comes back twice (a worker given up on, say), kept once
        if prior is not None and (record.status, record.reason) == (prior.status, prior.reason):
            self.display.learnt()
            return  # skipped again for the same reason: recorded already
        self.written.add(record.key)
        writer.append(record)
        self.records.append(record)
        self.display.finished(record)

    def remaining_s(self, step: int) -> float | None:
        """The predicted time of the points not done yet: the cost model's time where it
        has one, the average point measured so far elsewhere (None: nothing to go by)."""
        average = sum(self.point_walls_s) / len(self.point_walls_s) if self.point_walls_s else None
        total = 0.0
        for later in range(step, len(self.plan.shapes) + 1):
            shape = self.plan.shapes[later - 1]
            for line in self.todo:
                if (later, line) in self.finished or line.problem or line in self.failed:
                    continue
                flops = operation(line.op).flops(
                    shape, operation(line.op).batch_of(self.plan.batch)
                )
                predicted = point_time_s(self.plan, self.cost.predict(line, flops))
                if predicted is None and average is None:
                    return None
                total += predicted if predicted is not None else average or 0.0
        return total


def _measure_size(
    sweep: Sweep[Config], step: int, writer: ResultsWriter, isolation: Isolation
) -> None:
    """Measure one size's points here, one after another, in the order of the lines (a
    user's kernel in a process of its own: ``isolation.py``)."""
    plan = sweep.plan
    inputs = Inputs(plan.shapes[step - 1], plan.seed, plan.batch)
    for blank, config, prior in sweep.pending(step):
        left = sweep.remaining_s(step) if sweep.display.wants_eta else None
        sweep.display.working(f"{config.title} {plan.shapes[step - 1]}", left)
        blank = dataclasses.replace(blank, timestamp=now_iso())
        started = time.perf_counter()
        record = measure_point(
            plan, config, blank, inputs, sweep.cost, sweep.failed,
            measurer=isolation.measurer(config),
        )  # fmt: skip
        sweep.finish(config, record, prior, writer, time.perf_counter() - started)


# Set (to anything but "" or "0") to measure no ceilings: the header then has none.
NO_CEILINGS_ENV = "XBACKEND_NO_CEILINGS"


def device_record(backend: Backend, dtypes: Sequence[str] = ()) -> dict[str, Any]:
    """A device as the run header records it, with its state (NVML) where watched and
    its ceilings for ``dtypes`` where measured."""
    record = backend.device.to_dict()
    state = backend.monitor().header()
    if state:
        record["state"] = state
    ceilings = _ceilings(backend, dtypes)
    if ceilings is not None:
        record["ceilings"] = ceilings
    tuned = any(per_product(backend.variant_spec(variant)) for variant in backend.variants())
    if tuned and isinstance(backend.choices, CachedChoices):
        record["tuning"] = backend.choices.describe(backend.name, backend.device.name)
    return record


def _ceilings(backend: Backend, dtypes: Sequence[str]) -> dict[str, Any] | None:
    """The device's measured ceilings for the header; None where the backend measures
    none or ``XBACKEND_NO_CEILINGS`` says not to. A device that fails to measure them
    still runs the comparison: the header says why it has none."""
    if os.environ.get(NO_CEILINGS_ENV, "") not in ("", "0"):
        return None
    try:
        measured = backend.ceilings(dtypes)
    except Exception as error:  # a driver's or a compiler's: any, and only here
        return {"problem": f"{type(error).__name__}: {error}".splitlines()[0]}
    return None if measured is None else measured.to_dict()


def point_time_s(plan: Plan, per_run_s: float | None) -> float | None:
    """How long a point of ``per_run_s`` a run takes: its checked run, the warm-up and the
    samples (0 if the budget will skip it; None if there is no prediction)."""
    if per_run_s is None:
        return None
    runs = 1 + plan.sampling.warmup + fewest_samples(plan)
    if plan.budget_s > 0 and per_run_s * runs > plan.budget_s:
        return 0.0
    by_time = (
        math.ceil(plan.sampling.timeout_s / per_run_s)
        if per_run_s > 0
        else plan.sampling.max_samples
    )
    # Sampling usually stops on noise between min_samples and twice as many.
    samples = max(1, min(plan.sampling.max_samples, 2 * plan.sampling.min_samples, by_time))
    return per_run_s * (1 + plan.sampling.warmup + samples)


def run(
    plan: Plan,
    opened: Sequence[tuple[str, Backend]],
    out: Path,
    *,
    log: Callable[[str], None] = print,
    resume: bool = False,
    display: SweepDisplay | None = None,
) -> list[PointRecord]:
    """Measure every point of ``plan`` on the opened backends; append each to ``out``.

    With ``resume``, points already in ``out`` are not measured again; what they
    measured still feeds the time predictions and the failure memory. ``display``
    shows the sweep (default: a plain line per point, through ``log``).
    """
    display = display or SweepDisplay("plain", log=log)
    isolation = Isolation()  # its deadline checked before anything is written
    sweep = Sweep(
        plan, new_run_id(), configs(plan, opened), recorded(plan, out, resume, display), display
    )
    header = RunHeader(
        run_id=sweep.run_id,
        timestamp=now_iso(),
        environment=environment(),
        plan=plan,
        devices={label: device_record(backend, plan.dtypes) for label, backend in opened},
    )
    points = len(sweep.todo) * len(plan.shapes)
    with ResultsWriter(out, header) as writer, display.sweep(points), isolation:
        for step in range(1, len(plan.shapes) + 1):
            _measure_size(sweep, step, writer, isolation)
    say_closing(display)
    return sweep.records


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def recorded(
    plan: Plan, out: Path, resume: bool, display: SweepDisplay
) -> dict[PointKey, PointRecord]:
    """The points ``out`` holds already, by key, where this run resumes it (else none);
    ``out`` made, and refused if its files are links. A plan that contradicts the
    recorded runs is refused (``resume_notes``), what it keeps said on ``display``."""
    output_folder(out)
    for name in (JSONL_NAME, CSV_NAME):
        refuse_link(out / name)  # before reading: a resume writes there
    if not (resume and (out / JSONL_NAME).exists()):
        return {}
    runs, points = load([out])
    for note in resume_notes(plan, list(runs.values())):
        display.note(note)
    return {point.key: point for point in points}


def holds_points(out: Path) -> bool:
    """Whether ``out`` holds recorded points, for ``--resume`` to continue: the writer
    makes ``results.jsonl`` with a run's first point, so a run stopped before its first
    point leaves none (or leaves a resumed run's file as it was)."""
    jsonl = out / JSONL_NAME
    return jsonl.is_file() and jsonl.stat().st_size > 0


def say_closing(display: SweepDisplay) -> None:
    closing = display.closing_note()
    if closing:
        display.note(closing)


def plan_lines(
    plan: Plan, opened: Sequence[tuple[str, Backend]], recorded: Sequence[PointRecord] = ()
) -> list[str]:
    """What ``plan`` would run, for ``compare --dry-run``: each configuration with its
    points, what will be skipped and why where that is known without running, and the
    time predicted from ``recorded`` points (a resume's) where there are some."""
    todo = configs(plan, opened)
    done = {point.key: point for point in recorded if point.status != "skipped"}
    cost = CostModel()
    for point in done.values():
        if point.status in MEASURED and point.end_to_end_s is not None:
            cost.add(point.line_key, point.flops, point.end_to_end_s["median"])
    lines = [f"{len(todo)} configurations × {len(plan.shapes)} sizes = "
             f"{len(todo) * len(plan.shapes)} points"]  # fmt: skip
    total: float | None = 0.0
    for config in todo:
        line, predicted = _config_plan(plan, config, done, cost)
        lines.append(line)
        total = None if total is None or predicted is None else total + predicted
    lines.append(f"predicted time: {_predicted_total(total, plan, todo, done)}")
    return lines


def _predicted_total(
    total: float | None, plan: Plan, todo: Sequence[Config], done: dict[PointKey, PointRecord]
) -> str:
    """The dry run's last word: a time, nothing left to run, or why no time."""
    left = sum(
        not config.problem and config.record("", shape, step, plan.batch).key not in done
        for config in todo
        for step, shape in enumerate(plan.shapes, start=1)
    )
    if not left:
        return "none: every point is already recorded (the run measures nothing new)"
    if total is not None:
        return format_seconds(total)
    if not done:
        return "unknown: no earlier points to predict from (a run learns as it goes)"
    return "unknown: the recorded points do not cover these configurations to predict from"


def _config_plan(
    plan: Plan, config: Config, done: dict[PointKey, PointRecord], cost: CostModel
) -> tuple[str, float | None]:
    """One configuration's line of the plan, and its predicted time (None: unknown)."""
    head = f"  {config.title}: {len(plan.shapes)} sizes"
    if config.problem:
        return f"{head}, all skipped: {config.problem.splitlines()[0]}", 0.0
    recorded = misfits = 0
    first_misfit = ""
    predicted: float | None = 0.0
    for step, shape in enumerate(plan.shapes, start=1):
        record = config.record("", shape, step, plan.batch)
        if record.key in done:
            recorded += 1
            continue
        problem = memory_problem(config, shape, record.batch, plan.check)
        if problem:
            misfits += 1
            first_misfit = first_misfit or problem
            continue
        point_s = point_time_s(plan, cost.predict(record.line_key, record.flops))
        predicted = None if predicted is None or point_s is None else predicted + point_s
    notes = [f"{recorded} recorded already"] if recorded else []
    if misfits:
        notes.append(f"{misfits} skipped: {first_misfit}")
    if recorded == len(plan.shapes):
        notes.append("nothing left to measure")
    else:
        notes.append(
            f"predicted {format_seconds(predicted)}"
            if predicted is not None
            else "time unknown until measured"
        )
    return f"{head}; {'; '.join(notes)}", predicted


# What a resume must share with the recorded runs (the inputs, and the sampling's
# conditions: points measured one way cannot be mixed with points measured another under
# the same key), and what it may change: how thoroughly every other field samples.
_SAME_INPUTS = ("seed", *CONDITIONS)
_THOROUGHNESS = tuple(
    field.name for field in dataclasses.fields(Sampling) if field.name not in CONDITIONS
)


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
        _refuse_changed_kernels(plan, run)
        recorded = run.plan
        for name in _SAME_INPUTS:
            was, asked = recorded.setting(name), plan.setting(name)
            if was != asked:
                raise ResultsError(
                    f"the results being resumed were made with {name} {was!r}, this run "
                    f"asks for {asked!r}: resume with the same --{name.replace('_', '-')}, "
                    "or choose another --out"
                )
        changed = [
            f"{name} {recorded.setting(name)!r} -> {plan.setting(name)!r}"
            for name in _THOROUGHNESS
            if recorded.setting(name) != plan.setting(name)
        ]
        if changed:
            notes.append(
                f"resume: the recorded points keep their measurement ({', '.join(changed)} "
                "apply to the new points only)"
            )
    return list(dict.fromkeys(notes))


def _refuse_changed_kernels(plan: Plan, run: RunHeader) -> None:
    """Refuse a resume where a kernel family the plan runs is no longer what the recorded
    run measured (its manifest or a source edited since: another digest in the header),
    as another seed is refused: the new kernel would be measured under the old name."""
    recorded = run.environment.get("kernels")
    if not isinstance(recorded, dict):
        return  # a header from before the digests were kept
    now = families.provenance()
    for name in _plan_families(plan):
        before, after = recorded.get(name), now.get(name)
        if not isinstance(before, dict) or after is None:
            continue  # a family new to this run has no recorded points
        if before.get("digest") != after["digest"]:
            where = "xbackend's" if after["folder"] == "shipped" else f"in {after['folder']}"
            raise ResultsError(
                f"the results being resumed were made with another version of kernel family "
                f"{name!r} ({where}: digest {before.get('digest')!r}, now {after['digest']!r}):"
                " its manifest or kernel files changed since, and the recorded points "
                "measured the old kernels under the same names: resume with the family as "
                "it was, or choose another --out"
            )


def _plan_families(plan: Plan) -> list[str]:
    """The families whose variants ``plan`` may run (by operation and variant name)."""
    return [
        each.name
        for each in families.catalogue()
        if any(
            op in plan.ops and (plan.variants is None or spec.name in plan.variants)
            for op, spec in each.variants
        )
    ]
