"""Which point runs where, and when: the schedule of a distributed sweep, kept by the
main process alone (no locks on the workers, nothing to undo when one dies).

* A line of the comparison is a *lane*: its sizes in ascending order, a batch at a time
  (``batch``: consecutive sizes predicted to take under ``BATCH_S`` together, measured in
  order by one task), each batch sent when the last came back, so the cost model, the
  budget and "skip larger sizes after a failure" work as in the serial sweep. A lane's
  points all go to one worker and device, its *home*, until that worker dies.
* A worker runs one point at a time, and a device (``Offer.identity`` on its host) one
  point at a time, whichever worker holds it.
* A point that shares the host (a processor's: the CPU backend, OpenCL on the CPU; every
  point with ``alone="all"``) runs alone on its host, and only once no other point on
  that host is waiting to start: the devices' points first, then the host's one by one.
  Among the rest, the smallest size goes first, then the lines' order: on a host of
  processors alone, the serial sweep's order.
* A worker that dies gives its lane back: the point is measured again by another worker
  holding the same device (or the same model), or, after ``MAX_DEATHS`` deaths under the
  same point, recorded as its error. A lane no live worker can take is an *orphan*; after
  a grace period the driver records its points as lost (``results.WORKER_LOST``).

Pure logic: the driver (``driver.py``) turns its decisions into Dask tasks.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from xbackend.cluster.devices import Offer, WorkerReport
from xbackend.cluster.lines import RemoteLine
from xbackend.results import PointRecord

# Which points run alone on their host: a processor's (default), or every point.
ALONE = ("cpu", "all")
# A point under which this many workers died is recorded as an error, not tried again.
MAX_DEATHS = 2
# A task measures a line's next sizes while their predicted time stays under this
# (seconds): a plan of microsecond points then pays a Dask round trip (10-14 ms) per
# batch, not per point, and Ctrl-C or a worker's death costs at most this much measuring
# again (a batch's points are written when it comes back).
BATCH_S = 1.0

Due = tuple[PointRecord, PointRecord | None]  # a point to measure, what a resume found
T = TypeVar("T")


def batch(
    first: T, following: Iterator[T], predict: Callable[[T], float | None], limit_s: float = BATCH_S
) -> list[T]:
    """The points one task measures: ``first``, then as many of ``following`` (the line's
    next points due, in order) as keep the predicted time (``predict``, seconds; None:
    unknown) of them all under ``limit_s``. A point of unknown time ends the batch: it
    goes alone, and the sizes after it wait for what it teaches."""
    total = predict(first)
    chosen = [first]
    for point in following:
        if total is None:
            break
        seconds = predict(point)
        if seconds is None or total + seconds > limit_s:
            break
        chosen.append(point)
        total += seconds
    return chosen


@dataclasses.dataclass(eq=False)
class Lane:
    """One line of the comparison, as it goes: the point due next and where it runs."""

    line: RemoteLine
    order: int  # the line's place in the plan's order
    step: int = 1  # the size due next, from 1
    due: Due | None = None  # the point due next (the first of its batch)
    batch: list[Due] = dataclasses.field(default_factory=list)  # the points sent, in order
    home: tuple[str, str] | None = None  # (worker address, target) its points go to
    on: str | None = None  # the worker measuring its point now
    deaths: int = 0  # workers that died under the point due
    suspect_until: int = 0  # the last size of a batch a worker died under: sent one by one
    orphan_since: float | None = None


@dataclasses.dataclass(eq=False)
class Slot:
    """A live worker, and the point it measures now."""

    report: WorkerReport
    lane: Lane | None = None
    offer: Offer | None = None  # the device the point runs on

    @property
    def address(self) -> str:
        return self.report.address


class Schedule:
    """The lanes, the live workers, and the rules that start points (see the module)."""

    def __init__(self, lanes: Iterable[Lane], alone: str = "cpu"):
        if alone not in ALONE:
            raise ValueError(f"alone must be one of {', '.join(ALONE)}, not {alone!r}")
        self.lanes = list(lanes)
        self.alone = alone
        self.slots: dict[str, Slot] = {}

    def add(self, report: WorkerReport) -> None:
        self.slots[report.address] = Slot(report)

    def alone_on_host(self, offer: Offer) -> bool:
        return offer.shares_host or self.alone == "all"

    def offers(self, lane: Lane) -> list[tuple[Slot, Offer]]:
        """Every live worker's device that can run ``lane``: its label on its model."""
        line = lane.line
        return [
            (slot, offer)
            for slot in self.slots.values()
            for offer in slot.report.offers
            if offer.label == line.label and offer.device.name == line.device
        ]

    def starts(self) -> list[tuple[Lane, Slot, Offer]]:
        """The points to start now, each on a worker and a device, by the rules above."""
        running = [(s, s.offer) for s in self.slots.values() if s.offer is not None]
        hosts_busy = {slot.report.host for slot, _ in running}
        hosts_alone = {s.report.host for s, offer in running if self.alone_on_host(offer)}
        devices_busy = {(slot.report.host, offer.identity) for slot, offer in running}
        homed = collections.Counter(lane.home[0] for lane in self.lanes if lane.home)
        waiting = [lane for lane in self.lanes if lane.due is not None and lane.on is None]
        started = []
        for lane in sorted(waiting, key=lambda lane: (self._alone(lane), lane.step, lane.order)):
            for slot, offer in self._candidates(lane, homed):
                host, alone = slot.report.host, self.alone_on_host(offer)
                if host in hosts_alone or (alone and host in hosts_busy):
                    continue
                if (host, offer.identity) in devices_busy:
                    continue
                slot.lane, slot.offer, lane.on = lane, offer, slot.address
                if lane.home is None:
                    homed[slot.address] += 1
                lane.home = (slot.address, offer.target)
                hosts_busy.add(host)
                devices_busy.add((host, offer.identity))
                if alone:
                    hosts_alone.add(host)
                started.append((lane, slot, offer))
                break
        return started

    def _alone(self, lane: Lane) -> bool:
        offers = self.offers(lane)
        return bool(offers) and self.alone_on_host(offers[0][1])

    def _candidates(self, lane: Lane, homed: collections.Counter[str]) -> list[tuple[Slot, Offer]]:
        """The idle devices ``lane`` may start on: its home while that worker lives,
        else any that can run it, the workers with the fewest lanes first."""
        offers = self.offers(lane)
        home = [(s, o) for s, o in offers if (s.address, o.target) == lane.home]
        offers = home or offers
        idle = [(slot, offer) for slot, offer in offers if slot.lane is None]
        return sorted(idle, key=lambda pair: (homed[pair[0].address], pair[0].report.name))

    def finished(self, lane: Lane) -> None:
        """``lane``'s point came back: its worker is free."""
        slot = self.slots.get(lane.on or "")
        if slot is not None and slot.lane is lane:
            slot.lane = slot.offer = None
        lane.on = None

    def lost(self, address: str) -> tuple[Slot | None, Lane | None]:
        """The worker at ``address`` is gone: its lanes lose their home, and the point it
        measured (its lane returned, the death counted) is due again."""
        slot = self.slots.pop(address, None)
        for lane in self.lanes:
            if lane.home is not None and lane.home[0] == address:
                lane.home = None
        running = slot.lane if slot is not None else None
        if running is not None:
            running.on = None
            running.deaths += 1
        return slot, running

    def orphans(self, now: float, grace_s: float, idle: bool) -> list[Lane]:
        """The lanes with a point due that no live worker could take for ``grace_s``
        (with ``idle``, nothing in flight at all: every lane waiting is one)."""
        found = []
        for lane in self.lanes:
            stuck = lane.due is not None and lane.on is None and (idle or not self.offers(lane))
            if not stuck:
                lane.orphan_since = None
            elif lane.orphan_since is None:
                lane.orphan_since = now
            elif now - lane.orphan_since >= grace_s:
                found.append(lane)
        return found

    def concurrency(self) -> int:
        """How many points can run at once, at most: one per device that does not run
        alone, plus one per host that has only devices that do."""
        devices: set[tuple[str, str]] = set()
        alone_hosts: set[str] = set()
        for slot in self.slots.values():
            for offer in slot.report.offers:
                if self.alone_on_host(offer):
                    alone_hosts.add(slot.report.host)
                else:
                    devices.add((slot.report.host, offer.identity))
        shared = {host for host, _ in devices}
        return max(1, len(devices) + len(alone_hosts - shared))
