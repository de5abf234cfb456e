"""The distributed sweep's main loop: the schedule's points sent to the workers as Dask
tasks, their records written as they come back, the workers watched.

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
from typing import Any

from distributed import wait

from xbackend.cluster.connection import SchedulerLost, lost
from xbackend.cluster.lines import PointResult, PointTask, RemoteLine
from xbackend.cluster.schedule import MAX_DEATHS, Lane, Schedule, Slot
from xbackend.cluster.worker import measure, report
from xbackend.plan import Plan
from xbackend.results import WORKER_LOST, ResultsWriter, now_iso
from xbackend.runner import Sweep

# How often the workers are looked at while points run (seconds).
POLL_S = 0.25
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
    ):
        self.client, self.schedule, self.sweep, self.writer = client, schedule, sweep, writer
        self.plan: Plan = sweep.plan
        self.grace_s, self.poll_s = grace_s, poll_s
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
            blank = lane.due[0]
            shape = self.plan.shapes[lane.step - 1]
            left = self.sweep.remaining_s(lane.step) if self.sweep.display.wants_eta else None
            if left is not None:
                left /= self.schedule.concurrency()
            self.sweep.display.working(f"{lane.line.title} {shape} on {slot.report.name}", left)
            task = PointTask(
                self.plan, offer.target, lane.line, blank,
                tuple(self.sweep.history.get(lane.line, ())), self.sweep.failed.get(lane.line),
            )  # fmt: skip
            future = self.client.submit(
                measure, task, workers=[slot.address], allow_other_workers=False, pure=False
            )
            self.points[future] = lane

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
            result: PointResult = future.result()
        except (Exception, asyncio.CancelledError) as error:
            if address not in set(self.client.nthreads()):  # its worker died with the result
                slot, _ = self.schedule.lost(address)
                if slot is not None:
                    self._died_under(lane, slot)
                return
            blank = dataclasses.replace(lane.due[0], timestamp=now_iso())
            failed = dataclasses.replace(blank, status="error", reason=_described(error))
            result = PointResult(failed, (), 0.0)  # the task itself failed on its worker
        self.schedule.finished(lane)
        self._record(lane, result)

    def _record(self, lane: Lane, result: PointResult) -> None:
        """A point of ``lane`` is done: learnt from, written, and the next one due."""
        assert lane.due is not None
        record, prior = result.record, lane.due[1]
        for flops, seconds in result.learnt:
            self.sweep.learn(lane.line, flops, seconds)
        if record.status == "error" and WORKER_LOST not in record.flags:
            self.sweep.failed[lane.line] = record.reason.splitlines()[0]
        lane.deaths = 0
        self.sweep.finish(lane.line, record, prior, self.writer, result.wall_s)
        lane.step += 1
        self._advance(lane)

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
            self.schedule.add(joined)

    def _died_under(self, lane: Lane, slot: Slot) -> None:
        """The worker measuring ``lane``'s point died: the point is due again elsewhere,
        unless workers keep dying under it."""
        for future, running in list(self.points.items()):
            if running is lane:
                del self.points[future]
                self.client.cancel([future])
        assert lane.due is not None
        where = f"worker {slot.report.name} on {slot.report.host}"
        if lane.deaths < MAX_DEATHS:
            self.sweep.display.note(
                f"{where} died while measuring {lane.line.title} at "
                f"{self.plan.shapes[lane.step - 1]}: measured again on a worker that holds it"
            )
            return
        reason = (
            f"the worker measuring this point died {lane.deaths} times (the last: {where}); "
            "the point may be what kills it (a driver crash, host memory)"
        )
        blank = dataclasses.replace(lane.due[0], timestamp=now_iso())
        failed = dataclasses.replace(blank, status="error", reason=reason)
        self._record(lane, PointResult(failed, (), 0.0))

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
                self._record(lane, PointResult(lost, (), 0.0))


def _described(error: BaseException) -> str:
    """A task's error as a point's reason (the worker's traceback stays in its log)."""
    return f"the worker could not measure it: {type(error).__name__}: {error}"[:4000]
