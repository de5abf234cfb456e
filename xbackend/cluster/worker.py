"""The worker's side: a plugin that holds each device open and warm for the whole run,
and the tasks the main process sends (describe yourself, prepare a device, measure a
point, tune a device).

Each worker opens its backends once (the first task that needs one) and keeps them,
with their compiled kernels, until it stops: the plugin's ``teardown`` closes them. The
operands of a size are made on the worker from the plan's seed, so every worker makes
the same ones; the last size's are kept for the next point of that size.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import signal
import time
from typing import TYPE_CHECKING, Any

from distributed import WorkerPlugin, get_worker

from xbackend.backends.registry import backend_class, backend_names, get_backend
from xbackend.cluster.devices import Offer, WorkerReport, every_device, identity, model_label
from xbackend.cluster.lines import PointResult, PointTask, Prepared, RemoteLine, TuneRequest
from xbackend.configs import Config, configs
from xbackend.cost import CostModel
from xbackend.errors import XBackendError
from xbackend.measure import Inputs, measure_point
from xbackend.operations import OPERATIONS, Shape
from xbackend.plan import Plan, Target
from xbackend.problems import dtype_named
from xbackend.results import PointRecord, now_iso
from xbackend.runner import device_record, plan_lines

if TYPE_CHECKING:
    from xbackend import Backend
    from xbackend.tuning import TuneResult

PLUGIN = "xbackend"


class DevicesPlugin(WorkerPlugin):  # type: ignore[misc]  # distributed is untyped here
    """What a worker holds across tasks: its opened backends and the last inputs.

    ``assigned`` maps a local cluster's worker names to the targets each opens; without
    it (an existing cluster) a worker opens every device of ``backends`` it has, and
    names its lines by device model (``devices.model_label``).
    """

    name = PLUGIN

    def __init__(self, backends: str, assigned: dict[str, list[str]] | None = None):
        self.backends_text = backends
        self.assigned = assigned
        self.opened: dict[str, Backend] = {}
        self.inputs: Inputs | None = None

    def setup(self, worker: Any) -> None:
        self.opened, self.inputs = {}, None
        # Ctrl-C on a terminal reaches the workers too: the main process stops them
        # (ValueError: not the main thread of the worker's process).
        with contextlib.suppress(ValueError):
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    def teardown(self, worker: Any) -> None:
        for backend in self.opened.values():
            backend.close()
        self.opened.clear()

    def backend(self, target: str) -> Backend:
        """The backend of ``target``, opened on first use and kept."""
        if target not in self.opened:
            parsed = Target.parse(target)
            self.opened[target] = get_backend(parsed.name, parsed.device)
        return self.opened[target]

    def inputs_for(self, shape: Shape, seed: int, batch: int) -> Inputs:
        """The operands and references of one size, kept for the next point of it."""
        kept = self.inputs
        if kept is None or (kept.shape, kept.seed, kept.batch) != (shape, seed, batch):
            self.inputs = kept = Inputs(shape, seed, batch)
        return kept

    def targets(self) -> tuple[list[str], list[str]]:
        """The targets this worker opens, and the problems of those it cannot."""
        if self.assigned is not None:
            return list(self.assigned.get(str(get_worker().name), [])), []
        wanted = [Target.parse(t) for t in self.backends_text.split(",") if t.strip()]
        if self.backends_text.strip().lower() == "auto":
            wanted = [Target(name) for name in backend_names()]
        usable, problems = [], []
        for target in wanted:
            available, reason = backend_class(target.name).available()
            if available:
                usable.append(target)
            elif self.backends_text.strip().lower() != "auto":
                problems.append(f"{target.label}: {reason}")
        return every_device(usable), problems


def _plugin() -> DevicesPlugin:
    plugin = get_worker().plugins[PLUGIN]
    assert isinstance(plugin, DevicesPlugin)
    return plugin


def host_name() -> str:
    return platform.node()


def report() -> WorkerReport:
    """Task: open this worker's devices; say what it holds (and advertise it to Dask as
    resources: ``xbackend-device:cuda:1`` for each device, ``xbackend-gpu:NVIDIA H200``
    counting each model, for the dashboard and for tasks of one's own)."""
    plugin, worker = _plugin(), get_worker()
    targets, problems = plugin.targets()
    offers = []
    for target in targets:
        try:
            backend = plugin.backend(target)
        except Exception as error:  # a driver's, a plugin's: said, and the others go on
            problems.append(f"{target}: {type(error).__name__}: {error}")
            continue
        label = target if plugin.assigned is not None else model_label(backend.name, backend.device)
        ops = {op: backend.variants(op) for op in OPERATIONS}
        offers.append(
            Offer(label, target, backend.name, backend.device, ops, host_name(),
                  identity(target, backend.device))
        )  # fmt: skip
    resources: dict[str, float] = {f"xbackend-device:{offer.target}": 1 for offer in offers}
    for offer in offers:
        model = f"xbackend-{offer.device.kind}:{offer.device.name}"
        resources[model] = resources.get(model, 0) + 1
    worker.loop.add_callback(worker.set_resources, **resources)
    return WorkerReport(
        worker.address, str(worker.name), host_name(), os.getpid(), tuple(offers), tuple(problems)
    )


def prepare(plan: Plan, target: str, label: str) -> Prepared:
    """Task: the device's header record (its ceilings measured) and its lines."""
    backend = _plugin().backend(target)
    record = device_record(backend, plan.dtypes)
    record.update(host=host_name(), worker=str(get_worker().name), target=target)
    lines = tuple(RemoteLine.of(config) for config in configs(plan, [(label, backend)]))
    return Prepared(record, lines)


def planned(plan: Plan, target: str, label: str, recorded: list[PointRecord]) -> list[str]:
    """Task: ``compare --dry-run``'s lines for one device (``runner.plan_lines``)."""
    return plan_lines(plan, [(label, _plugin().backend(target))], recorded)


class _LearningCost(CostModel):
    """A line's cost model on a worker, from the line's history: what the point adds to
    it (a pilot run's time, the point's own) is sent back to the main process."""

    def __init__(self, config: Config, history: tuple[tuple[int, float], ...]) -> None:
        super().__init__()
        for flops, seconds in history:
            super().add(config, flops, seconds)
        self.learnt: list[tuple[int, float]] = []

    def add(self, config: object, flops: int, seconds: float) -> None:
        super().add(config, flops, seconds)
        self.learnt.append((flops, seconds))


def measure(task: PointTask) -> PointResult:
    """Task: one point, measured here as the serial sweep measures it (``measure_point``)."""
    plugin, started = _plugin(), time.perf_counter()
    line = task.line
    backend = plugin.backend(task.target)
    config = Config(line.label, backend, line.op, line.variant, line.tile, line.dtype, line.problem)
    learning = _LearningCost(config, task.history)
    failed = {config: task.failed} if task.failed else {}
    plan, blank = task.plan, task.blank
    inputs = plugin.inputs_for(Shape(blank.M, blank.K, blank.N), plan.seed, plan.batch)
    blank = dataclasses.replace(
        blank, timestamp=now_iso(), host=host_name(), worker=str(get_worker().name)
    )
    record = measure_point(plan, config, blank, inputs, learning, failed)
    return PointResult(record, tuple(learning.learnt), time.perf_counter() - started)


def tune(target: str, request: TuneRequest) -> list[TuneResult]:
    """Task: ``xbackend tune`` on one of this worker's devices; the cache is written on
    this worker's host, under its lock (``tune_cache.update_entries``)."""
    from xbackend.tuning import tune as tune_device

    backend = _plugin().backend(target)
    tuned = [v for v in backend.variants() if backend.variant_spec(v).tuned]
    wrong = [v for v in request.variants if v not in tuned]
    if not tuned or wrong:
        raise XBackendError(
            f"{target} ({backend.device.name}): not tuned: {', '.join(wrong) or 'any variant'}"
            f" (tuned: {', '.join(tuned) or 'none'})"
        )
    gpu = backend.device.kind == "gpu"
    return tune_device(
        backend, request.variants or tuned, request.sizes or request.default_sizes(gpu),
        dtype_named(request.dtype), ops=request.ops, seed=request.seed,
        samples=request.samples, finalist_time_s=request.finalist_time_s, how=request.search,
        progress=lambda line: None,  # the main process prints each device's table
    )  # fmt: skip
