"""``tune`` on a cluster: each device model's searches shared out among the devices of
that model, one search (``tune_search.TuneItem``: a variant, an operation, a size) at a
time.

A search and its race run whole on one device, as in a serial ``tune``, so its cache
entry is what a serial tune would write; the entries are keyed by device model, so the
devices of a model fill one set of entries between them. Which device takes which search
is decided as each becomes idle (a search of block tiles takes a minute, one of a fixed
tile seconds). Searches of which one writes an entry the other writes or reads (two
sizes of one shape class; rmm, whose untuned trial reads mm's choice; a medium and a
large class, each the other's fallback) run one after the other, in the serial order, so
that the entries are those a serial tune leaves. The rules of the compare's schedule
hold: one task per worker and per device, and a processor's searches (the CPU, OpenCL on
the CPU) alone on their host, after the devices' searches of that host.

Pure logic: ``session.Cluster.tune`` turns its decisions into Dask tasks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from xbackend.cluster.devices import Offer, WorkerReport
from xbackend.operations import operation
from xbackend.tuning.cache import NEIGHBOUR
from xbackend.tuning.searching import TuneItem

Holder = tuple[WorkerReport, Offer]


def reads(item: TuneItem) -> set[tuple[str, str, str]]:
    """The cache entries a search can read (``tune_cache.find``: its own, its shape
    class's neighbour's, those of the operations it is tuned as): its untuned trial
    takes the cached choice, so a search after one of these in the serial order finds
    that one's entry written."""
    classes = [item.shape_class, NEIGHBOUR.get(item.shape_class, "")]
    return {item.entry} | {
        (item.variant, op, shape_class)
        for op in operation(item.op).tuned_as
        for shape_class in classes
        if shape_class
    }


@dataclasses.dataclass(eq=False)
class _Job:
    label: str
    index: int  # the search's place in the label's serial order
    item: TuneItem
    holder: Holder | None = None  # where it runs, once started


class TuneQueue:
    """The searches of every label, dealt to the idle devices that hold the label.

    ``holders``: for each label, the devices (worker, offer) that may tune it: GPUs of
    one model share a label; ``items``: each label's searches in the serial order.
    ``alone`` as the schedule's: "all" runs every search alone on its host.
    """

    def __init__(
        self,
        holders: Mapping[str, Sequence[Holder]],
        items: Mapping[str, Sequence[TuneItem]],
        alone: str = "cpu",
    ):
        self.holders = {label: list(found) for label, found in holders.items()}
        self.alone = alone
        self.waiting = [
            _Job(label, index, item)
            for label in holders
            for index, item in enumerate(items.get(label, ()))
        ]
        self.running: list[_Job] = []

    def _alone(self, offer: Offer) -> bool:
        return offer.shares_host or self.alone == "all"

    def starts(self) -> list[tuple[str, int, TuneItem, WorkerReport, Offer]]:
        """The searches to start now, each on an idle device of its label: (label, its
        index, the search, the worker, the device)."""
        busy_workers = {job.holder[0].address for job in self.running if job.holder}
        busy_devices = {(h[0].host, h[1].identity) for job in self.running if (h := job.holder)}
        hosts_busy = {job.holder[0].host for job in self.running if job.holder}
        hosts_alone = {h[0].host for job in self.running if (h := job.holder) and self._alone(h[1])}
        # a host's devices (not alone) have work waiting: its processors wait for them
        devices_waiting = {
            worker.host
            for job in self.waiting
            for worker, offer in self.holders[job.label]
            if not self._alone(offer)
        }
        started = []
        for job in list(self.waiting):
            if any(self._before(other, job) for other in [*self.running, *self.waiting]):
                continue  # its entry's earlier search first
            for worker, offer in self.holders[job.label]:
                host, alone = worker.host, self._alone(offer)
                if worker.address in busy_workers or (host, offer.identity) in busy_devices:
                    continue
                if host in hosts_alone or (
                    alone and (host in hosts_busy or host in devices_waiting)
                ):
                    continue
                job.holder = (worker, offer)
                self.waiting.remove(job)
                self.running.append(job)
                busy_workers.add(worker.address)
                busy_devices.add((host, offer.identity))
                hosts_busy.add(host)
                if alone:
                    hosts_alone.add(host)
                started.append((job.label, job.index, job.item, worker, offer))
                break
        return started

    @staticmethod
    def _before(other: _Job, job: _Job) -> bool:
        """Whether ``other`` must be done before ``job`` starts: it comes first in the
        serial order and one of them writes an entry the other writes or reads."""
        if other.label != job.label or other.index >= job.index:
            return False
        return other.item.entry in reads(job.item) or job.item.entry in reads(other.item)

    def finished(self, label: str, index: int) -> None:
        """The search ``index`` of ``label`` came back (done or failed): its device is free."""
        self.running = [j for j in self.running if (j.label, j.index) != (label, index)]

    def again(self, label: str, index: int, item: TuneItem) -> None:
        """The search ``index`` of ``label`` is to be made again (its worker died): back
        among the waiting, in its place in the serial order."""
        self.waiting.append(_Job(label, index, item))
        self.waiting.sort(key=lambda job: (list(self.holders).index(job.label), job.index))

    def drop(self, address: str) -> list[tuple[str, int, TuneItem]]:
        """The worker at ``address`` is gone: its devices take no more searches. The
        waiting searches that no device holds any more are taken out and returned."""
        for label in self.holders:
            self.holders[label] = [h for h in self.holders[label] if h[0].address != address]
        orphans = [job for job in self.waiting if not self.holders[job.label]]
        self.waiting = [job for job in self.waiting if self.holders[job.label]]
        return [(job.label, job.index, job.item) for job in orphans]

    @property
    def done(self) -> bool:
        return not self.waiting and not self.running
