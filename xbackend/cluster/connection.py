"""The cluster's connection: an existing scheduler's address tried within a bound, before
Dask's client is made (Dask's own first contact waits without a bound for an answer
that never comes); Ctrl-C held while a local cluster starts (Dask cannot stop one half
started); the scheduler's loss mid-run noticed; Dask quiet while a lost client closes,
and about workers that die under their tasks.

Each failure is one ``XBackendError`` naming ``--scheduler`` and the address, never a
traceback of Dask's internals.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from typing import Any

from xbackend.errors import XBackendError

# How long to wait for an existing scheduler's connection and its first answer (seconds):
# a scheduler answers in milliseconds, through an SSH tunnel in well under a second.
CONNECT_TIMEOUT_S = 5.0
# What a transport that this host cannot speak needs, where Dask's own error does not say.
_NEEDS = {
    "ucx": "Dask's UCX transport is the distributed-ucxx package (pip install "
    "distributed-ucxx-cu12), not installed here",
}
_TLS_SCHEMES = ("tls", "wss")


class SchedulerLost(XBackendError):
    """The client lost its scheduler mid-command (killed, its host gone)."""


def security(address: str) -> Any:
    """What Dask's client needs to reach ``address`` (a ``Security``: its TLS context,
    from Dask's configuration), or an error saying why this host cannot reach it."""
    from distributed.comm.addressing import parse_address
    from distributed.comm.registry import get_backend
    from distributed.security import Security

    scheme, _ = parse_address(address)
    try:
        get_backend(scheme).get_connector()
    except Exception as error:  # an unknown scheme, a transport removed or not installed
        said = str(error).splitlines()[0] if str(error) else ""
        why = _NEEDS.get(scheme) or f"Dask says {type(error).__name__}: {said}"
        raise XBackendError(
            f"--scheduler {address}: this host cannot use {scheme}://: {why}"
        ) from None
    settings = Security()
    try:
        args = settings.get_connection_args("client")
    except (OSError, ValueError) as error:  # a certificate file missing or unreadable
        raise XBackendError(f"--scheduler {address}: Dask's TLS settings: {error}") from None
    if scheme in _TLS_SCHEMES and args.get("ssl_context") is None:
        raise XBackendError(
            f"--scheduler {address}: a {scheme}:// address needs Dask's TLS settings "
            "(distributed.comm.tls.ca-file, .client.cert and .client.key in Dask's "
            "configuration, e.g. DASK_DISTRIBUTED__COMM__TLS__CA_FILE)"
        )
    return settings


def reach(address: str, timeout_s: float) -> Any:
    """Make sure a Dask scheduler answers at ``address`` within ``timeout_s``: connected,
    greeted and asked who it is, as Dask's client would, but bounded in time. The
    ``Security`` for the client; an ``XBackendError`` of one line otherwise."""
    settings = security(address)
    args = settings.get_connection_args("client")
    stage = ["connect"]
    try:
        asked = _identity(address, args, timeout_s, stage)
        identity = asyncio.run(asyncio.wait_for(asked, timeout_s))
    except TimeoutError:
        raise XBackendError(_unanswered(address, timeout_s, stage[0])) from None
    except OSError as error:
        raise XBackendError(_refused(address, error, stage[0])) from None
    except Exception:  # what a stranger's bytes make of Dask's protocol (a MemoryError)
        raise XBackendError(
            f"--scheduler {address}: the server there answered, but it is not a Dask "
            "scheduler (its bytes are not Dask's protocol)"
        ) from None
    kind = identity.get("type") if isinstance(identity, dict) else type(identity).__name__
    if kind != "Scheduler":
        raise XBackendError(f"--scheduler {address}: that is a Dask {kind}, not a scheduler")
    return settings


async def _identity(address: str, args: dict[str, Any], timeout_s: float, stage: list[str]) -> Any:
    """The scheduler's identity, asked over a connection of its own (``stage``: how far
    it got, for the message if it never ends). Dask retries a refused connection until
    its own timeout, set short of ours so that its error (the refusal) is the one seen."""
    from distributed.comm import connect

    comm = await connect(address, timeout=0.8 * timeout_s, deserialize=True, **args)
    try:
        stage[0] = "answer"
        await comm.write({"op": "identity", "reply": True})
        return await comm.read()
    finally:
        comm.abort()


def _unanswered(address: str, timeout_s: float, stage: str) -> str:
    if stage == "connect":  # connected, but no greeting; or no connection at all
        what = f"no answer within {timeout_s:g} s: is a Dask scheduler listening there?"
    else:
        what = f"connected, but no answer within {timeout_s:g} s: is it a Dask scheduler?"
    return f"--scheduler {address}: {what} (--connect-timeout sets the wait)"


def _refused(address: str, error: OSError, stage: str) -> str:
    cause = error.__cause__ or error
    reason = str(cause).rpartition(": ")[2] if "Errno" in str(cause) else str(cause)
    if stage == "answer":
        return f"--scheduler {address}: the server there closed the connection ({reason})"
    return f"--scheduler {address}: could not connect ({reason or type(cause).__name__})"


def lost(client: Any) -> bool:
    """Whether ``client`` has lost its scheduler (it then reconnects, or has closed)."""
    return getattr(client, "status", "running") not in ("running", "newly-created")


@contextlib.contextmanager
def quiet_dask() -> Iterator[None]:
    """Dask's log silenced for the block: a client closing after its scheduler was lost
    logs the reconnection it cancels, a traceback the user can do nothing with."""
    before = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(before)


# What Dask logs, in this process, when workers die under their tasks: a task's result
# that can no longer be fetched from a killed worker ("Couldn't gather keys", a
# CommClosedError, an AllExit in a task nobody awaits). The driver sees each worker go
# and measures its points again; these say nothing the command does not (issue 38).
_LOST_WORKER_ERRORS = frozenset({"CommClosedError", "StreamClosedError", "AllExit"})
_LOST_WORKER_TEXT = ("Couldn't gather keys", "CommClosedError", "StreamClosedError")


def _not_a_lost_worker(record: logging.LogRecord) -> bool:
    """A log filter: False for what Dask says of a worker gone (``_LOST_WORKER_*``)."""
    error = record.exc_info[1] if record.exc_info else None
    if error is not None and {kind.__name__ for kind in type(error).__mro__} & _LOST_WORKER_ERRORS:
        return False
    try:
        text = record.getMessage()
    except Exception:  # a record whose arguments do not fit its message: kept as it is
        return True
    return not any(said in text for said in _LOST_WORKER_TEXT)


def quiet_lost_workers() -> None:
    """Leave out what Dask logs of workers gone (``_not_a_lost_worker``), from now until
    the process ends: its asyncio tasks are collected, and say it, as late as its exit.
    Only those records: every other warning and error of Dask's is shown as before."""
    for name in ("distributed", "distributed.client"):  # the loggers Dask gives a handler
        for handler in logging.getLogger(name).handlers:
            handler.addFilter(_not_a_lost_worker)  # for every record of their children
    for name in ("asyncio", "distributed", "distributed.client", "tornado.application"):
        logging.getLogger(name).addFilter(_not_a_lost_worker)


# The signals that end a command besides Ctrl-C (SIGTERM: a batch system's time limit;
# SIGHUP: a terminal closed): held as Ctrl-C is while a local cluster starts.
_ENDING = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


@contextlib.contextmanager
def held_interrupts() -> Iterator[list[int]]:
    """Ctrl-C, SIGTERM and SIGHUP held back for the block, and said afterwards (the list
    holds the numbers of the signals that came; :func:`deliver` raises them).

    A local cluster stopped half started cannot be closed (Dask's exit handler then
    prints a traceback of its own and leaves worker processes behind), so its start is
    not interrupted: the block's caller closes what it started, then delivers. SIGINT is
    blocked in this thread, so the threads and the worker processes started in the block
    inherit the block: a terminal's Ctrl-C, sent to every process of the command, reaches
    only this one, which stops the workers itself. SIGTERM and SIGHUP are only caught
    (a worker process that inherited them blocked could not be stopped by its nanny).
    Outside the main thread, a no-op.

    Python's resource tracker is started first: started later, from one of Dask's
    threads, it would unblock SIGINT in that thread (``resource_tracker.ensure_running``
    blocks it only while it spawns itself), and the workers spawned from there with it.
    """
    pressed: list[int] = []
    if threading.current_thread() is not threading.main_thread() or not hasattr(
        signal, "pthread_sigmask"
    ):
        yield pressed
        return
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()

    def hold(signum: int, frame: Any) -> None:  # a thread that does not block it
        pressed.append(signum)

    handler = signal.signal(signal.SIGINT, hold)
    ending = {number: signal.getsignal(number) for number in _ENDING}
    for number, before in ending.items():
        if before is not signal.SIG_IGN:  # nohup's SIGHUP stays ignored
            signal.signal(number, hold)
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield pressed
    finally:
        if signal.SIGINT in signal.sigpending():
            signal.sigwait({signal.SIGINT})  # taken here, not delivered as an exception
            pressed.append(signal.SIGINT)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        signal.signal(signal.SIGINT, handler)
        for number, before in ending.items():
            if before is not signal.SIG_IGN and before is not None:
                signal.signal(number, before)


def deliver(pressed: list[int]) -> None:
    """The signals :func:`held_interrupts` held, delivered now (the first of them): Ctrl-C
    as a KeyboardInterrupt, another to its own handler (the command line's raises its
    ``Terminated``; without one, it ends the process as it would have)."""
    if not pressed:
        return
    if pressed[0] != signal.SIGINT:
        signal.raise_signal(pressed[0])
    raise KeyboardInterrupt
