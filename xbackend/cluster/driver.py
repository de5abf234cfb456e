"""The distributed sweep's main loop: the schedule's points sent to the workers as Dask
tasks (a batch of a line's consecutive sizes each, ``schedule.batch``), their records
written as they come back, the workers watched.

The main process is the one writer: a record comes back from its worker, and the
sweep (``runner.Sweep``) appends it at once, once. Each task is pinned to its worker
(``workers=[address]``, no other): a worker that dies leaves its task waiting for an
address that will not return, so the driver watches the workers (``client.nthreads``)
and gives the schedule each one that is gone; a worker that appears (a nanny restarted
one, a new Slurm job) is asked what it holds and joins. Ctrl-C cancels what is in
flight and leaves every written point in place; a scheduler lost mid-run stops the loop
(``connection.SchedulerLost``), every written point in place too.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Iterator
from typing import Any

from distributed import wait

import xbackend.cluster.schedule as rules
from xbackend.cluster.connection import SchedulerLost, lost
from xbackend.cluster.devices import WorkerReport
from xbackend.cluster.lines import PointResult, PointTask, RemoteLine
from xbackend.cluster.schedule import MAX_DEATHS, Due, Lane, Schedule, Slot, batch
from xbackend.cluster.worker import described, measure, report
from xbackend.results import MEASURED, WORKER_LOST, PointRecord, ResultsWriter, now_iso
from xbackend.results.plan import Plan
from xbackend.sweep.runner import Sweep, point_time_s

# How often the workers are looked at while points run (seconds).
POLL_S = 0.25
# How long a finished task's records may take to come back from its worker (seconds).
RESULT_S = 60.0


class WorkerGone(Exception):
    """The worker a task was pinned to is no longer in the cluster."""


# How long a point may wait for a worker that can run it, once none can (a nanny
# restarts a killed worker in a second or two; a batch system may take longer).
GRACE_S = 60.0


class Driver:
    """Runs ``schedule``'s lanes on ``client``'s workers, recording into ``sweep``."""

    def __init__(
        self,
        client: Any,
        schedule: Schedule,
        sweep: Sweep[RemoteLine],
        writer: ResultsWriter,
        *,
        grace_s: float = GRACE_S,
        poll_s: float = POLL_S,
        batch_s: float | None = None,  # default: schedule.BATCH_S
        relabel: Callable[[WorkerReport], WorkerReport] = lambda report: report,
    ):
        self.client, self.schedule, self.sweep, self.writer = client, schedule, sweep, writer
        self.plan: Plan = sweep.plan
        self.grace_s, self.poll_s = grace_s, poll_s
        self.batch_s = rules.BATCH_S if batch_s is None else batch_s
        # a worker that joins (a nanny restarted it) named as the first ones were
        self.relabel = relabel
        self.tasks = 0  # the point tasks sent
        self.walls: dict[RemoteLine, float] = {}  # each line's last measured point's wall time
        self.points: dict[Any, Lane] = {}  # future -> its lane
        self.describing: dict[Any, str] = {}  # future -> the address of a worker joining
        self.unusable: set[str] = set()  # workers that could not say what they hold
        self._watched = 0.0

    def run(self) -> None:
        for lane in self.schedule.lanes:
            self._advance(lane)
        try:
            while self.points or any(lane.due is not None for lane in self.schedule.lanes):
                if lost(self.client):  # before Dask's calls wait on a connection gone
                    raise SchedulerLost("the scheduler is gone")
                self._watch()
                self._start()
                self._give_up_orphans()
                for future in self._wait():
                    self._collect(future)
        finally:  # Ctrl-C included: nothing more is measured; what was written stays
            pending = [*self.points, *self.describing]
            if pending and not lost(self.client):
                self.client.cancel(pending)

    # -- the points --------------------------------------------------------------------

    def _advance(self, lane: Lane) -> None:
        """Make the lane's next point not recorded yet due (a resume learns the rest)."""
        while lane.step <= len(self.plan.shapes):
            due = self.sweep.prior(lane.step, lane.line)
            if due is not None:
                lane.due = due
                return
            lane.step += 1
        lane.due = None

    def _start(self) -> None:
        for lane, slot, offer in self.schedule.starts():
            assert lane.due is not None
            lane.batch = self._batch(lane)
            shapes = [self.plan.shapes[due[0].step - 1] for due in lane.batch if due[0].step]
            left = self.sweep.remaining_s(lane.step) if self.sweep.display.wants_eta else None
            if left is not None:
                left /= self.schedule.concurrency()
            self.sweep.display.working(
                f"{lane.line.title} {_sizes(shapes)} on {slot.report.name}", left
            )
            task = PointTask(
                self.plan, offer.target, lane.line, tuple(due[0] for due in lane.batch),
                tuple(self.sweep.history.get(lane.line, ())), self.sweep.failed.get(lane.line),
            )  # fmt: skip
            future = self.client.submit(
                measure, task, workers=[slot.address], allow_other_workers=False, pure=False
            )
            self.points[future] = lane
            self.tasks += 1

    def _batch(self, lane: Lane) -> list[Due]:
        """The points of ``lane`` to send in one task (``schedule.batch``): one at a time
        through the sizes of a batch a worker died under, so that a point that kills
        workers is found, and recorded after ``MAX_DEATHS``."""
        assert lane.due is not None
        if lane.deaths or lane.step <= lane.suspect_until:
            return [lane.due]
        line, shapes = lane.line, self.plan.shapes

        def following() -> Iterator[Due]:
            for step in range(lane.step + 1, len(shapes) + 1):
                due = self.sweep.unrecorded(step, line)
                if due is None:  # recorded: its time is learnt before the next is sent
                    return
                yield due

        def predicted(due: Due) -> float | None:
            seconds = point_time_s(self.plan, self.sweep.cost.predict(line, due[0].flops))
            # a point takes at least the line's last one: sizes grow, and the cost
            # model's time is the runs' alone, without checking and copying
            return None if seconds is None else max(seconds, self.walls.get(line, 0.0))

        return batch(lane.due, following(), predicted, self.batch_s)

    def _collect(self, future: Any) -> None:
        if future in self.describing:
            self._joined(future)
            return
        lane = self.points.pop(future, None)
        if lane is None or future.status == "cancelled":
            return
        assert lane.due is not None and lane.on is not None
        address = lane.on
        try:
            results = self._results(future, address)
        except WorkerGone:
            slot, _ = self.schedule.lost(address)
            if slot is not None:
                self._died_under(lane, slot)
            lane.on = None
            return
        except (Exception, asyncio.CancelledError) as error:
            # the task itself failed on its worker: its first point is the error, and
            # the line's larger sizes are skipped after it, as after any failure
            blank = dataclasses.replace(lane.due[0], timestamp=now_iso())
            failed = dataclasses.replace(blank, status="error", reason=described(error))
            results = (PointResult(failed, (), 0.0),)
        self.schedule.finished(lane)
        for (_, prior), result in zip(lane.batch, results, strict=False):  # a failed task: one
            self._record(lane, result, prior)
        self._advance(lane)

    def _results(self, future: Any, address: str) -> tuple[PointResult, ...]:
        """A done task's records; ``WorkerGone`` where its worker has died (with the
        result or after it: Dask would wait for ever to compute it again on that worker,
        the one the task is pinned to, or with the error it raised), or its records did not
        come back in time. An error the task raised on a live worker is raised here, as
        itself."""
        if address not in set(self.client.nthreads()):
            raise WorkerGone(address)
        try:
            if future.status != "finished":
                return tuple(future.result())  # raises the task's own error
            try:
                return tuple(future.result(timeout=RESULT_S))
            except TimeoutError:
                raise WorkerGone(address) from None
        except (Exception, asyncio.CancelledError):
            if address not in set(self.client.nthreads()):  # it died with the error
                raise WorkerGone(address) from None
            raise

    def _record(self, lane: Lane, result: PointResult, prior: PointRecord | None) -> None:
        """A point of ``lane`` is done: learnt from and written; the lane moves past it."""
        record = result.record
        for flops, seconds in result.learnt:
            self.sweep.learn(lane.line, flops, seconds)
        if record.status == "error" and WORKER_LOST not in record.flags:
            self.sweep.failed[lane.line] = record.reason.splitlines()[0]
        if record.status in MEASURED:
            self.walls[lane.line] = result.wall_s
        lane.deaths = 0
        self.sweep.finish(lane.line, record, prior, self.writer, result.wall_s)
        assert record.step is not None
        lane.step = record.step + 1

    def _wait(self) -> list[Any]:
        pending = [*self.points, *self.describing]
        if not pending:
            time.sleep(self.poll_s)
            return []
        try:
            done, _ = wait(pending, timeout=self.poll_s, return_when="FIRST_COMPLETED")
        except TimeoutError:
            return []
        return list(done)

    # -- the workers -------------------------------------------------------------------

    def _watch(self) -> None:
        """Give the schedule the workers that are gone; ask those that came what they hold."""
        now = time.monotonic()
        if now - self._watched < self.poll_s:
            return
        self._watched = now
        live = set(self.client.nthreads())
        for future, address in list(self.describing.items()):
            if address not in live:  # gone before it said what it holds
                del self.describing[future]
                self.client.cancel([future])
        for address in [a for a in self.schedule.slots if a not in live]:
            slot, lane = self.schedule.lost(address)
            if slot is not None and lane is not None:
                self._died_under(lane, slot)
        known = {*self.schedule.slots, *self.describing.values(), *self.unusable}
        for address in sorted(live - known):
            future = self.client.submit(
                report, workers=[address], allow_other_workers=False, pure=False
            )
            self.describing[future] = address

    def _joined(self, future: Any) -> None:
        address = self.describing.pop(future)
        try:
            joined = future.result()
        except Exception as error:
            self.unusable.add(address)
            self.sweep.display.note(f"worker {address} could not open its devices: {error}")
            return
        if address in set(self.client.nthreads()):
            self.schedule.add(self.relabel(joined))

    def _died_under(self, lane: Lane, slot: Slot) -> None:
        """The worker measuring ``lane``'s point died: the point is due again elsewhere,
        unless workers keep dying under it."""
        for future, running in list(self.points.items()):
            if running is lane:
                del self.points[future]
                self.client.cancel([future])
        assert lane.due is not None
        steps = [due[0].step for due in lane.batch if due[0].step]
        lane.suspect_until = max([lane.suspect_until, *steps])
        where = f"worker {slot.report.name} on {slot.report.host}"
        if lane.deaths < MAX_DEATHS:
            shapes = [self.plan.shapes[due[0].step - 1] for due in lane.batch if due[0].step]
            again = "it is" if len(shapes) < 2 else "each is"
            self.sweep.display.note(
                f"{where} died while measuring {lane.line.title} at {_sizes(shapes)}: "
                f"{again} measured again on a worker that holds it"
            )
            return
        reason = (
            f"the worker measuring this point died {lane.deaths} times (the last: {where}); "
            "the point may be what kills it (a driver crash, host memory)"
        )
        blank = dataclasses.replace(lane.due[0], timestamp=now_iso())
        failed = dataclasses.replace(blank, status="error", reason=reason)
        self._record(lane, PointResult(failed, (), 0.0), lane.due[1])
        self._advance(lane)

    def _give_up_orphans(self) -> None:
        """Record as lost the points of lanes that no worker could take for the grace."""
        idle = not self.points and not self.describing
        for lane in self.schedule.orphans(time.monotonic(), self.grace_s, idle):
            line = lane.line
            reason = (
                f"not measured: no live worker holds {line.label} ({line.device}); "
                "a resume measures it again"
            )
            while lane.due is not None:
                blank = dataclasses.replace(lane.due[0], timestamp=now_iso())
                lost = dataclasses.replace(
                    blank, status="error", reason=reason, flags=[WORKER_LOST]
                )
                self._record(lane, PointResult(lost, (), 0.0), lane.due[1])
                self._advance(lane)


def _sizes(shapes: list[Any]) -> str:
    """The sizes of a batch, as the progress line and the notes say them."""
    if len(shapes) < 2:
        return str(shapes[0]) if shapes else ""
    return f"{shapes[0]} to {shapes[-1]} ({len(shapes)} sizes)"
