"""The worker's side: a plugin that holds each device open and warm for the whole run,
and the tasks the main process sends (describe yourself, prepare a device, measure a
line's points, tune a device).

Each worker opens its backends once (the first task that needs one) and keeps them,
with their compiled kernels, until it stops: the plugin's ``teardown`` closes them. The
plugin carries the main process's kernel-family folders (``--kernels``), added before a
backend opens, so that a worker's variants are the main process's wherever it runs. The
operands of a size are made on the worker from the plan's seed, so every worker makes
the same ones, and kept for the next line's points of that size (``KEPT_BYTES``); the
full references are made once per host and shared (``host_references.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import platform
import signal
import time
from typing import TYPE_CHECKING, Any

from distributed import WorkerPlugin, get_worker

from xbackend import families
from xbackend.backends.registry import backend_class, backend_names, open_backend
from xbackend.cluster.devices import Offer, WorkerReport, every_device, identity, model_label
from xbackend.cluster.host_references import HostReferences, run_folder
from xbackend.cluster.lines import PointResult, PointTask, Prepared, RemoteLine, TuneRequest
from xbackend.errors import XBackendError
from xbackend.operations import OPERATIONS, Shape
from xbackend.problems import dtype_named
from xbackend.results import PointRecord, now_iso
from xbackend.results.plan import Plan, Target
from xbackend.sweep.configs import Config, configs
from xbackend.sweep.cost import CostModel
from xbackend.sweep.isolation import Isolation
from xbackend.sweep.measure import Inputs, measure_point
from xbackend.sweep.runner import device_record, plan_lines
from xbackend.sweep.tune_isolation import Isolated
from xbackend.tuning.searching import TuneItem, items, tuned_variants

if TYPE_CHECKING:
    from xbackend.backends.interface import Backend
    from xbackend.tuning import TuneResult

PLUGIN = "xbackend"


# A worker keeps the operands and references of every size it measured, up to a
# thirty-second of the host's memory (eight GPUs' workers: a quarter of it), counted in
# the bytes they hold: a task measures a line's sizes in a row, so the next line comes
# back to each size. Kept only while they all fit in 2^25 elements in an early version, a
# 4096x4096 size (50 million) was kept alone, its reference made again for every line,
# and two GPUs took 26 s for a plan one GPU ran in 30 s serially.
def kept_bytes() -> int:
    """How many bytes of inputs a worker keeps: a thirty-second of the host's memory
    (psutil, which Dask needs), 1 GiB where it cannot be read."""
    try:
        import psutil

        return int(psutil.virtual_memory().total // 32)
    except Exception:  # no psutil, or a host that does not say
        return 1 << 30


KEPT_BYTES = kept_bytes()


class DevicesPlugin(WorkerPlugin):  # type: ignore[misc]  # distributed is untyped here
    """What a worker holds across tasks: its opened backends and the last inputs.

    ``assigned`` maps a local cluster's worker names to the targets each opens; without
    it (an existing cluster) a worker opens every device of ``backends`` it has, and
    names its lines by device model (``devices.model_label``). ``folders``: the main
    process's kernel-family folders (``families.added_folders``).
    """

    name = PLUGIN

    def __init__(
        self, backends: str, assigned: dict[str, list[str]] | None = None, run: str = "",
        folders: tuple[str, ...] = (),
    ):  # fmt: skip
        self.backends_text = backends
        self.assigned = assigned
        self.run = run  # the run's token: the folder its references are shared in
        self.folders = folders
        self.opened: dict[str, Backend] = {}
        self.inputs: dict[tuple[Shape, int, int], Inputs] = {}
        self.shared: HostReferences | None = None

    def setup(self, worker: Any) -> None:
        self.opened, self.inputs = {}, {}
        families.read_again()  # a worker of an existing cluster: the last run's are stale
        self.shared = HostReferences(run_folder(self.run)) if self.run else None
        # Ctrl-C on a terminal reaches the workers too: the main process stops them
        # (ValueError: not the main thread of the worker's process).
        with contextlib.suppress(ValueError):
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        if self.assigned is not None:  # a local cluster's worker: its log is the terminal
            _TASK_LOG.addFilter(_said_by_the_main_process)

    def teardown(self, worker: Any) -> None:
        for backend in self.opened.values():
            backend.close()
        self.opened.clear()
        if self.shared is not None:
            self.shared.remove()  # the first worker to close; the others' maps stay valid

    def backend(self, target: str) -> Backend:
        """The backend of ``target``, opened on first use and kept."""
        if target not in self.opened:
            # Here, not in ``setup``: a folder this worker's host lacks is then said as
            # the worker's problem (``report``), where Dask would log a plugin's error.
            families.use_folders(self.folders)
            parsed = Target.parse(target)
            self.opened[target] = open_backend(parsed.name, parsed.device)
        return self.opened[target]

    def inputs_for(self, shape: Shape, seed: int, batch: int) -> Inputs:
        """The operands and references of one size, kept for the next points of it: every
        size's, up to ``KEPT_BYTES`` in all (the oldest dropped first), the one asked for
        always."""
        key = (shape, seed, batch)
        kept = self.inputs.pop(key, None) or Inputs(shape, seed, batch, self.shared)
        self.inputs[key] = kept  # the most recent last
        self.trim()
        return kept

    def trim(self) -> None:
        """Drop the oldest sizes' inputs while they hold more than ``KEPT_BYTES`` (a new
        size's grow as points use them: trimmed again after each point), never the most
        recent one's."""
        total = sum(inputs.nbytes for inputs in self.inputs.values())
        for other in list(self.inputs)[:-1]:  # the oldest first
            if total <= KEPT_BYTES:
                break
            total -= self.inputs.pop(other).nbytes

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


# Where Dask logs a task's error on its worker ("Compute Failed", the task, a fragment of
# its traceback). The error itself goes back to the main process, which says it as the
# serial run does (one line; a point's record): on a local cluster, whose workers write
# to the command's terminal, the worker's block is left out.
_TASK_LOG = logging.getLogger("distributed.worker")


def _said_by_the_main_process(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("Compute Failed")


def _plugin() -> DevicesPlugin:
    plugin = get_worker().plugins[PLUGIN]
    assert isinstance(plugin, DevicesPlugin)
    return plugin


def described(error: BaseException) -> str:
    """An error raised on a worker, as a point's reason (its traceback stays in the
    worker's log)."""
    return f"the worker could not measure it: {type(error).__name__}: {error}"[:4000]


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


def measure(task: PointTask) -> tuple[PointResult, ...]:
    """Task: a line's points in order, each measured here as the serial sweep measures it
    (``measure_point``): a failure skips the larger sizes after it, and each point's time
    feeds the next one's budget, as in the serial sweep. An error that escapes a point's
    measuring (its check, its statistics) is that point's record, and the larger sizes
    are skipped after it: the points before it keep their records."""
    plugin, line, plan = _plugin(), task.line, task.plan
    backend = plugin.backend(task.target)
    config = Config(line.label, backend, line.op, line.variant, line.tile, line.dtype, line.problem)
    learning = _LearningCost(config, task.history)
    failed = {config: task.failed} if task.failed else {}
    results = []
    for blank in task.blanks:
        started, learnt = time.perf_counter(), len(learning.learnt)
        inputs = plugin.inputs_for(Shape(blank.M, blank.K, blank.N), plan.seed, plan.batch)
        blank = dataclasses.replace(
            blank, timestamp=now_iso(), host=host_name(), worker=str(get_worker().name)
        )
        try:
            record = measure_point(plan, config, blank, inputs, learning, failed)
        except Exception as error:
            reason = described(error)
            record = dataclasses.replace(blank, status="error", reason=reason)
            failed[config] = reason.splitlines()[0]
        plugin.trim()  # the point's size now holds its arrays
        point_learnt = tuple(learning.learnt[learnt:])
        results.append(PointResult(record, point_learnt, time.perf_counter() - started))
    return tuple(results)


def tune_items(target: str, request: TuneRequest) -> tuple[list[TuneItem], list[str]]:
    """Task: the searches ``tune`` makes on one of this worker's devices (``items``), and
    the lines that say what is left out; an ``XBackendError`` where nothing is tuned."""
    from xbackend.tuning import OPS

    backend = _plugin().backend(target)
    tuned = list(dict.fromkeys(v for op in OPS for v in tuned_variants(backend, op)))
    wrong = [v for v in request.variants if v not in tuned]
    if not tuned or wrong:
        raise XBackendError(
            f"{target} ({backend.device.name}): not tuned: {', '.join(wrong) or 'any variant'}"
            f" (tuned: {', '.join(tuned) or 'none'})"
        )
    sizes = request.sizes or request.default_sizes(backend.device.kind == "gpu")
    dtype = dtype_named(request.dtype)
    return items(backend, request.variants or None, sizes, request.ops, dtype)


def tune(target: str, request: TuneRequest, item: TuneItem) -> TuneResult:
    """Task: one search of ``tune`` (``item``) on one of this worker's devices, raced and
    cached as a serial tune does: the cache is written on this worker's host, under its
    lock (``tune_cache.update_entries``). A user's candidates are measured as a serial
    tune measures them, each in a process of its own under the request's deadline
    (``tune_isolation.Isolated``): a hang or a crash is that candidate's failure, and the
    search goes on. The process is the task's: tasks on this worker's other devices run
    beside it, in other threads."""
    from xbackend.tuning import tune as tune_device

    backend = _plugin().backend(target)
    with Isolation(request.kernel_timeout_s) as isolation:
        (result,) = tune_device(
            backend, [item.variant], [item.shape], dtype_named(request.dtype), ops=[item.op],
            seed=request.seed, samples=request.samples, finalist_time_s=request.finalist_time_s,
            how=request.search, progress=lambda line: None,  # the main process prints the table
            measure=Isolated(isolation),
        )  # fmt: skip
    return result
