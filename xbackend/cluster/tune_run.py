"""``tune`` on a cluster, run: each label's searches (``worker.tune_items``) asked of a
worker that holds it, dealt to its devices as they become free (``tune_share.TuneQueue``),
each tuned whole where it lands (``worker.tune``), its worker watched: a search whose
worker dies is made again on another device of its label, if one is left.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from xbackend.cluster.devices import Offer, WorkerReport
from xbackend.cluster.driver import POLL_S, WorkerGone
from xbackend.cluster.lines import TuneRequest
from xbackend.cluster.tune_share import TuneQueue
from xbackend.cluster.worker import tune as tune_search
from xbackend.cluster.worker import tune_items
from xbackend.errors import XBackendError

if TYPE_CHECKING:
    from xbackend.tuning import TuneResult
    from xbackend.tuning.searching import TuneItem


class Spec(Protocol):
    @property
    def alone(self) -> str: ...  # schedule.ALONE: which points run alone on their host


class Cluster(Protocol):
    """What a tune asks of the cluster it runs on (``session.Cluster`` is it): its spec
    (what runs alone on a host), its client, its workers grouped by label, and a task on
    one worker."""

    client: Any

    @property
    def spec(self) -> Spec: ...

    def groups(self) -> dict[str, list[tuple[WorkerReport, Offer]]]: ...

    def submit_to(self, function: Callable[..., Any], address: str, *args: Any) -> Any: ...


def tune(
    cluster: Cluster, request: TuneRequest, say: Callable[[str], None] = print
) -> list[tuple[str, str, list[TuneResult] | str]]:
    """Tune every device the workers hold, each label's searches shared out among its
    devices (``tune_share``: the GPUs of one model under ``--gpus``), the devices
    that do not share their host at once. Each (label, device, results in the serial
    order, or why not)."""
    groups = cluster.groups()
    found, problems, refusals = _searches(cluster, groups, request, say)
    if refusals and not found:  # nothing to tune anywhere: as the serial tune says it
        raise refusals[0].with_traceback(None) from None
    queue = TuneQueue({label: groups[label] for label in found}, found, cluster.spec.alone)
    results = _share(cluster, queue, request, say)
    told: list[tuple[str, str, list[TuneResult] | str]] = []
    for label, holders in groups.items():
        device = holders[0][1].device.name
        if label in problems:
            told.append((label, device, problems[label]))
            continue
        ordered = [results[label][index] for index in sorted(results[label])]
        failed = [str(result) for result in ordered if isinstance(result, str)]
        if failed:  # the other searches' choices are cached all the same
            kept = len(ordered) - len(failed)
            told.append((label, device, f"{kept} of {len(ordered)} searches done "
                         f"and cached; failed: {'; '.join(failed)}"))  # fmt: skip
        else:
            told.append((label, device, [r for r in ordered if not isinstance(r, str)]))
    return told


def _searches(
    cluster: Cluster,
    groups: dict[str, list[tuple[WorkerReport, Offer]]],
    request: TuneRequest,
    say: Callable[[str], None],
) -> tuple[dict[str, list[TuneItem]], dict[str, str], list[Exception]]:
    """Each label's searches (``tune_items``, asked of a worker that holds it: the
    next one where one dies), why a label has none, and the refusals among those (an
    ``XBackendError`` or ``ValueError``: nothing to tune there, said as itself)."""
    found: dict[str, list[TuneItem]] = {}
    problems: dict[str, str] = {}
    refusals: list[Exception] = []
    for label, holders in groups.items():
        for worker, offer in holders:
            try:
                found[label], notes = _live_result(
                    cluster,
                    cluster.submit_to(tune_items, worker.address, offer.target, request),
                    worker.address,
                )
            except Exception as error:
                problems[label] = f"{type(error).__name__}: {error}"
                if isinstance(error, WorkerGone):
                    continue
                if isinstance(error, (XBackendError, ValueError)):
                    problems[label] = str(error)
                    refusals.append(error)
                break
            problems.pop(label, None)
            devices = ", ".join(w.name for w, _ in holders)
            say(f"tuning {label} ({offer.device.name}): {len(found[label])} searches "
                f"on worker{'s' if len(holders) > 1 else ''} {devices}")  # fmt: skip
            for note in notes:
                say(f"  {note}")
            break
    return found, problems, refusals


def _live_result(cluster: Cluster, future: Any, address: str) -> Any:
    """``future``'s result, or a ``WorkerGone`` error as soon as the worker it is pinned
    to has left the cluster (Dask would wait for it for ever)."""
    from distributed import wait

    while True:
        with contextlib.suppress(TimeoutError):
            wait([future], timeout=POLL_S)
        if address not in set(cluster.client.nthreads()):
            future.cancel()
            raise WorkerGone(f"the worker at {address} died")
        if future.done():
            return future.result()


def _share(
    cluster: Cluster, queue: TuneQueue, request: TuneRequest, say: Callable[[str], None]
) -> dict[str, dict[int, TuneResult | str]]:
    """Every search of ``queue`` tuned on the device it deals it to, as each becomes
    free: each label's results (or why not) by the search's index. A search whose
    worker dies is made again on another device of its label, if one is left; that
    worker takes no more."""
    from distributed import wait

    results: dict[str, dict[int, TuneResult | str]] = {label: {} for label in queue.holders}
    running: dict[Any, tuple[str, int, TuneItem, str]] = {}
    while not queue.done:
        for label, index, item, worker, offer in queue.starts():
            say(f"  {label}: {item} on worker {worker.name}")
            future = cluster.submit_to(tune_search, worker.address, offer.target, request, item)
            running[future] = (label, index, item, worker.address)
        if not running:  # nothing can start and nothing runs: the rules went wrong
            raise XBackendError("tune: searches left that no worker can take")
        try:
            done, _ = wait(list(running), timeout=POLL_S, return_when="FIRST_COMPLETED")
        except TimeoutError:
            done = set()
        live = set(cluster.client.nthreads())
        # a task pinned to a worker that died waits for it for ever: given up here
        lost_tasks = {f for f, (*_, address) in running.items() if address not in live}
        for future in [*done, *(lost_tasks - set(done))]:
            label, index, item, address = running.pop(future)
            queue.finished(label, index)
            if address not in live:  # its result too: Dask would compute it again there
                future.cancel()
                say(f"  {label}: the worker tuning {item} died: it is tuned again")
                queue.again(label, index, item)  # dropped below if no device is left
                continue
            try:
                results[label][index] = future.result()
            except Exception as error:  # one search's failure: the others' stand
                results[label][index] = f"{item}: {type(error).__name__}: {error}"
        known = {worker.address for found in queue.holders.values() for worker, _ in found}
        for address in known - live:
            for label, index, item in queue.drop(address):
                results[label][index] = f"{item}: no live worker holds {label} any more"
    return results
