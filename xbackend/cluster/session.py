"""A Dask cluster for one command: started here (``--gpus``, ``--workers``) or joined
(``--scheduler``), its workers asked what they hold, and closed at the end.

A local cluster has one worker process per group of devices (``devices.local_workers``),
each under a nanny that starts it again if it dies, with no memory limit (a large
product's reference needs the host's memory) and one thread (one point at a time). An
existing cluster's workers open every device of ``--backends`` they have, and its lines
are named by device model (the same points on each model present).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import xbackend.cluster.schedule as rules
from xbackend import families
from xbackend.backends.registry import backend_names
from xbackend.cluster.connection import (
    CONNECT_TIMEOUT_S,
    SchedulerLost,
    deliver,
    held_interrupts,
    lost,
    quiet_dask,
    quiet_lost_workers,
    reach,
)
from xbackend.cluster.devices import (
    Offer,
    WorkerReport,
    local_workers,
    shared_gpu_labels,
    targets_of,
)
from xbackend.cluster.driver import GRACE_S, Driver
from xbackend.cluster.host_references import HostReferences, run_folder
from xbackend.cluster.lines import Prepared, RemoteLine, TuneRequest
from xbackend.cluster.offered import Offered
from xbackend.cluster.schedule import Lane, Schedule
from xbackend.cluster.worker import (
    PLUGIN,
    DevicesPlugin,
    planned,
    prepare,
    report,
)
from xbackend.errors import XBackendError
from xbackend.results import PointRecord, ResultsWriter, RunHeader, now_iso
from xbackend.results.plan import Plan, Target
from xbackend.sweep.environment import environment
from xbackend.sweep.progress import SweepDisplay
from xbackend.sweep.runner import Sweep, new_run_id, recorded, say_closing

if TYPE_CHECKING:
    from xbackend.backends.interface import Backend
    from xbackend.tuning import TuneResult

# How long to wait for a cluster's first workers (seconds): a batch system may take long.
CONNECT_S = 60.0


@dataclasses.dataclass(frozen=True)
class ClusterSpec:
    """Which cluster a command runs on: exactly one of ``gpus``, ``workers``, ``scheduler``."""

    gpus: tuple[int, ...] | str | None = None  # GPU ordinals, or "all"
    workers: int | None = None
    scheduler: str | None = None  # the address of an existing Dask scheduler
    alone: str = "cpu"  # schedule.ALONE: which points run alone on their host
    each_gpu: bool = False  # --gpus: every point on every GPU, not the GPUs sharing them
    grace_s: float = GRACE_S
    connect_s: float = CONNECT_TIMEOUT_S  # --scheduler: the connection and first answer


class Cluster:
    """The cluster of one command, with what its workers hold (``reports``)."""

    def __init__(self, client: Any, spec: ClusterSpec, backends: str, local: Any = None):
        self.client, self.spec, self.backends, self.local = client, spec, backends, local
        self.reports: list[WorkerReport] = []
        self.token = uuid.uuid4().hex  # names the folder of its workers' shared references
        self._log_level: int | None = None  # Dask's log level before this client quieted it

    @classmethod
    def start(cls, spec: ClusterSpec, backends: str, say: Callable[[str], None] = print) -> Cluster:
        """Start or join the cluster of ``spec``, its workers holding ``backends``'s devices
        (an existing scheduler first reached within ``spec.connect_s``)."""
        if spec.scheduler:
            settings, assigned, expected = reach(spec.scheduler, spec.connect_s), None, 1
        else:
            assigned = local_workers(targets_of(backends, say), spec.gpus, spec.workers)
            settings, expected = None, len(assigned)
        quiet_lost_workers()  # the driver says it when workers die, once
        with held_interrupts() as pressed:  # neither is stopped half made
            cluster = cls._connected(spec, backends, assigned, settings)
        try:
            deliver(pressed)  # Ctrl-C, SIGTERM or SIGHUP while it started
            folders = tuple(str(folder) for folder in families.added_folders())
            plugin = DevicesPlugin(backends, assigned, run=cluster.token, folders=folders)
            cluster.client.register_plugin(plugin, name=PLUGIN)
            cluster._wait_for_workers(expected)
            cluster.reports = cluster._describe(say)
        except BaseException as error:
            # whether the scheduler was lost, asked before closing (a closed client is)
            was_lost = lost(cluster.client)
            cluster.close()
            if was_lost and not isinstance(error, KeyboardInterrupt):
                raise cluster.lost_error() from None
            raise
        return cluster

    @classmethod
    def _connected(cls, spec: ClusterSpec, backends: str, assigned: Any, settings: Any) -> Cluster:
        """A client of the scheduler at ``spec.scheduler`` (reached already, ``settings``
        its ``Security``), or of a local cluster of the ``assigned`` workers, started."""
        from distributed import Client

        if spec.scheduler:
            client = Client(spec.scheduler, timeout=spec.connect_s, security=settings)
            joined = cls(client, spec, backends)
            # Dask's client logs its connection's end (a traceback at INFO) when the
            # scheduler goes: the command says it in one line (``lost_error``) instead.
            joined._log_level = _DASK_LOG.level
            _DASK_LOG.setLevel(logging.ERROR)
            return joined
        local = _local_cluster(list(assigned))
        try:
            return cls(Client(local), spec, backends, local)
        except BaseException:
            local.close()
            raise

    def _wait_for_workers(self, expected: int) -> None:
        try:
            self.client.wait_for_workers(expected, timeout=CONNECT_S)
        except TimeoutError:
            if lost(self.client):
                raise
            where = self.spec.scheduler or "the local cluster"
            option = " (--scheduler)" if self.spec.scheduler else ""
            raise XBackendError(
                f"{expected} worker(s) did not join {where}{option} within {CONNECT_S:g} s"
            ) from None

    def lost_error(self, out: Path | None = None) -> SchedulerLost:
        """The error that says this command lost its scheduler (``out``: where the
        finished points are kept, and how to continue them)."""
        if self.spec.scheduler:
            where = f"the Dask scheduler at {self.spec.scheduler} (--scheduler)"
        else:
            where = "the local cluster's scheduler"
        kept = ""
        if out is not None:
            again = f" --scheduler {self.spec.scheduler}" if self.spec.scheduler else ""
            kept = (
                f": every finished point is kept in {out}; once it is back, continue "
                f"with: xbackend compare ...{again} --out {out} --resume"
            )
        return SchedulerLost(f"lost {where}{kept}")

    def _describe(self, say: Callable[[str], None]) -> list[WorkerReport]:
        """Every worker's report, in the order of their names; a local worker that
        cannot open its devices is an error, an existing cluster's is left out."""
        addresses = sorted(self.client.nthreads())
        futures = [self.submit_to(report, address) for address in addresses]
        reports = []
        for future in futures:
            try:
                reports.append(future.result())
            except Exception as error:
                if self.local is not None:
                    _raise_as_here(error)
                say(f"a worker left out: {error}")
        for worker in reports:
            for problem in worker.problems:
                if self.local is not None:  # a device named here that would not open
                    raise XBackendError(f"worker {worker.name}: {problem}")
                say(f"worker {worker.name} on {worker.host}: {problem}")
        if not any(worker.offers for worker in reports):
            raise XBackendError(f"no worker holds any device of --backends {self.backends}")
        reports = sorted(reports, key=lambda worker: worker.name)
        return shared_gpu_labels(reports) if self._shared_labels else reports

    @property
    def _shared_labels(self) -> bool:
        """Whether the GPUs of one model share their lines' labels: on a local cluster
        (``--gpus``, and ``--workers``, which opens every GPU too), so that its lines are
        the serial run's (``opencl``, not ``opencl:0``); not under ``--each-gpu``."""
        return self.local is not None and not self.spec.each_gpu

    def labelled(self, joined: WorkerReport) -> WorkerReport:
        """A worker that joins mid-run (a nanny restarted it), its lines named as those of
        the workers before it: under ``--gpus`` a restarted GPU's worker offers ``cuda``,
        not ``cuda:1``, or no line of the run would go to it."""
        if not self._shared_labels:
            return joined
        return shared_gpu_labels([*self.reports, joined])[-1]

    def submit_to(self, function: Callable[..., Any], address: str, *args: Any) -> Any:
        """``function(*args)`` as a task on the worker at ``address``, and only there."""
        return self.client.submit(
            function, *args, workers=[address], allow_other_workers=False, pure=False
        )

    def holders(self) -> dict[str, tuple[WorkerReport, Offer]]:
        """One worker and device per line label, in the order of ``--backends``."""
        return {label: found[0] for label, found in self.groups().items()}

    def groups(self) -> dict[str, list[tuple[WorkerReport, Offer]]]:
        """Every worker and device of each line label (the GPUs of one model share one
        under ``--gpus``), the labels in the order of ``--backends``."""
        found: dict[str, list[tuple[WorkerReport, Offer]]] = {}
        for worker in self.reports:
            for offer in worker.offers:
                found.setdefault(offer.label, []).append((worker, offer))
        names = [Target.parse(t).name for t in self.backends.split(",") if t.strip()]
        order = backend_names() if self.backends.strip().lower() == "auto" else names

        def rank(label: str) -> tuple[int, str]:
            backend = found[label][0][1].backend
            return (order.index(backend) if backend in order else len(order), label)

        return {label: found[label] for label in sorted(found, key=rank)}

    def offered(self) -> list[tuple[str, Backend]]:
        """Each line label with a stand-in of its device, to plan with (``offered.py``)."""
        return [(label, Offered.of(offer)) for label, (_, offer) in self.holders().items()]

    def prepare(self, plan: Plan) -> dict[str, Prepared]:
        """Each label's header record (its ceilings measured, one device at a time, as the
        serial run measures them) and lines, from the first worker holding it."""
        return {
            label: self.submit_to(prepare, worker.address, plan, offer.target, label).result()
            for label, (worker, offer) in self.holders().items()
        }

    def run(
        self,
        plan: Plan,
        opened: Sequence[tuple[str, Backend]],
        out: Path,
        *,
        log: Callable[[str], None] = print,
        resume: bool = False,
        display: SweepDisplay | None = None,
    ) -> list[PointRecord]:
        """``runner.run`` on the cluster: every point of ``plan`` measured on the workers
        and appended to ``out`` here (``opened``: the stand-ins it was planned with)."""
        display = display or SweepDisplay("plain", log=log)
        try:
            return self._run(plan, out, resume, display)
        except KeyboardInterrupt:  # Ctrl-C, SIGTERM, SIGHUP: the command ends
            # The shared references go now, not when the cluster closes after the summary
            # and figures: a batch system kills what is left soon after its SIGTERM.
            self._remove_references()
            raise
        except Exception as error:  # Dask's view of a lost connection, whichever it is
            if isinstance(error, SchedulerLost) or lost(self.client):
                raise self.lost_error(out) from None
            raise

    def _run(self, plan: Plan, out: Path, resume: bool, display: SweepDisplay) -> list[PointRecord]:
        done = recorded(plan, out, resume, display)
        prepared = self.prepare(plan)
        labels = list(prepared)
        lines = sorted(
            (line for label in labels for line in prepared[label].lines),
            key=lambda line: (plan.ops.index(line.op), labels.index(line.label)),
        )  # the serial order: by operation, then the backends' order (a stable sort)
        sweep: Sweep[RemoteLine] = Sweep(plan, new_run_id(), lines, done, display)
        schedule = Schedule(
            (Lane(line, order) for order, line in enumerate(lines)), self.spec.alone
        )
        for worker in self.reports:
            schedule.add(worker)
        header = RunHeader(
            run_id=sweep.run_id,
            timestamp=now_iso(),
            environment=environment(),
            plan=plan,
            devices={label: prepared[label].record for label in labels},
            cluster=self.header(schedule),
        )
        with ResultsWriter(out, header) as writer, display.sweep(len(lines) * len(plan.shapes)):
            driver = Driver(
                self.client, schedule, sweep, writer, grace_s=self.spec.grace_s,
                relabel=self.labelled,
            )  # fmt: skip
            driver.run()
        display.note(
            f"cluster: {len(sweep.records)} points in {driver.tasks} tasks "
            f"(a line's sizes in a row while under {driver.batch_s:g} s)"
        )
        say_closing(display)
        return sweep.records

    def header(self, schedule: Schedule) -> dict[str, Any]:
        """The cluster as the run header records it: its workers, their devices, and how
        many points could run at once under which rule."""
        devices: dict[str, list[str]] = {}
        for worker in self.reports:
            for offer in worker.offers:
                devices.setdefault(offer.label, []).append(worker.name)
        return {
            "scheduler": self.spec.scheduler or "local",
            "workers": [worker.to_dict() for worker in self.reports],
            "devices": devices,
            "concurrency": {
                "alone": self.spec.alone,
                "points_at_once": schedule.concurrency(),
                "batch_s": rules.BATCH_S,
                "rule": "one point per worker and per device; a point of a processor "
                + ("(every point) " if self.spec.alone == "all" else "")
                + "alone on its host",
            },
        }

    def plan_lines(
        self, plan: Plan, opened: Sequence[tuple[str, Backend]], recorded: Sequence[PointRecord]
    ) -> list[str]:
        """``compare --dry-run``'s lines, each device's from the worker holding it."""
        lines = []
        for label, (worker, offer) in self.holders().items():
            found = self.submit_to(
                planned, worker.address, plan, offer.target, label, list(recorded)
            )
            lines.append(f"{label} on worker {worker.name} ({worker.host}):")
            lines += [f"  {line}" for line in found.result()]
        return lines

    def tune(
        self, request: TuneRequest, say: Callable[[str], None] = print
    ) -> list[tuple[str, str, list[TuneResult] | str]]:
        """Tune every device the workers hold, each label's searches shared out among its
        devices (``tune_run``). Each (label, device, results in the serial order, or why
        not)."""
        from xbackend.cluster.tune_run import tune

        return tune(self, request, say)

    def close(self) -> None:
        """Stop a local cluster; leave an existing one running, its workers' devices
        closed (the plugin's teardown) so that nothing holds a GPU after the command.
        A client that lost its scheduler is closed quietly, without waiting for it."""
        try:
            if lost(self.client):
                with quiet_dask(), contextlib.suppress(Exception):
                    self.client.close(timeout=self.spec.connect_s)
                return
            if self.local is None:
                with contextlib.suppress(Exception):  # a worker gone meanwhile, say
                    self.client.unregister_worker_plugin(PLUGIN)
            self.client.close()
        finally:
            if self.local is not None:
                self.local.close()
            # once its workers are stopped, so that none makes the folder again
            self._remove_references()
            if self._log_level is not None:
                _DASK_LOG.setLevel(self._log_level)

    def _remove_references(self) -> None:
        """A local cluster's shared references removed: its workers' host is this one,
        whether or not a worker lived to remove them (the plugin's teardown)."""
        if self.local is not None:
            HostReferences(run_folder(self.token)).remove()


_DASK_LOG = logging.getLogger("distributed")


def _raise_as_here(error: Exception) -> None:
    """An error a local worker raised opening its devices, raised as the serial run
    raises it: a refusal (a wrong family, an option the device cannot take) as itself,
    one line and exit 2; anything else named as the worker's."""
    if isinstance(error, (XBackendError, ValueError)):
        raise error.with_traceback(None) from None
    raise XBackendError(
        f"a worker could not open its devices: {type(error).__name__}: {error}"
    ) from None


# What Dask's nannies set in a worker's environment by default, and xbackend does not:
# one OpenMP/MKL/OpenBLAS thread and malloc trimming above 64 KiB. A worker would then run
# the CPU backend's BLAS and the host's float64 references on one thread, and pay for the
# trimming on every NumPy temporary: the CPU's points 2-4 times slower than a serial run
# of the same plan (measured on the CI machine). Workers inherit this process's instead.
NANNY_ENVIRONMENT = "distributed.nanny.pre-spawn-environ"
# Dask's statistical profiler takes the GIL in each worker every 10 ms to walk the
# threads' stacks; the point's thread, launching kernels from Python, waited for it: one
# GPU's worker took 33 s from the first point to the last of the default schedule with it
# and 18 s without (two H200s, OpenBLAS's threads still spinning; docs/cluster.md).
PROFILER = "distributed.worker.profile.enabled"


def _local_cluster(names: Sequence[str]) -> Any:
    """One nanny-kept worker process per name, on this host, each with one thread (one
    point at a time), this process's environment (``NANNY_ENVIRONMENT``) and no profiler
    (``PROFILER``)."""
    import dask
    from distributed import Nanny, Scheduler, SpecCluster

    quiet = {"silence_logs": logging.ERROR}
    options = {"nthreads": 1, "memory_limit": 0, "host": "127.0.0.1", **quiet}
    # read once, by each nanny it starts, and passed on to its worker
    with dask.config.set({NANNY_ENVIRONMENT: {}, PROFILER: False}):
        return SpecCluster(
            workers={name: {"cls": Nanny, "options": options} for name in names},
            scheduler={
                "cls": Scheduler,
                # Its HTTP server on a free port: Dask's default, 8787, is taken by any
                # other cluster on the host (a warning on stderr, then another port).
                "options": {"dashboard_address": "127.0.0.1:0", "host": "127.0.0.1"},
            },
            **quiet,
        )
