"""A user's kernels measured in a process of their own: a hang or a crash is that point's record.

A kernel of a user's family (``--kernels``) can loop for ever, bomb the preprocessor or
write far outside its buffers. Run in xbackend's process, the first hangs the run (Ctrl-C
cannot end a call into the driver) and the second kills it with no line naming the point,
at the same point on every ``--resume``. ``Isolation`` measures such points in a child
process started with multiprocessing's 'spawn' (it inherits no driver state), which keeps
its backends open and its kernels built from one point to the next and measures with the
same loop as the parent (``Backend.measure``).

The parent waits on each step of a point with a deadline (``XBACKEND_KERNEL_TIMEOUT``,
``compare --kernel-timeout``): opening the device, then the build with the first run and
the warm-up runs, then each timed sample (the child counts its steps in shared memory, as
the samples' monitor, outside every timed window). A step over the deadline ends the child
(``KernelTimeout``); a child that dies is named with its signal (``KernelCrashed``). Either
is the point's error record, and the next point starts a fresh child. Ctrl-C reaches the
parent, which ends the child and the run. xbackend's own kernels are measured in the
parent, as before.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import math
import multiprocessing
import os
import signal
import time
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

import numpy as np

from xbackend import families
from xbackend.backends.registry import backend_class, get_backend
from xbackend.configs import Config
from xbackend.errors import XBackendError
from xbackend.measure import Described, describe_error

if TYPE_CHECKING:
    from xbackend import Backend, Measurement
    from xbackend.backends.sampler import Monitor

Array = np.ndarray[Any, Any]

TIMEOUT_ENV = "XBACKEND_KERNEL_TIMEOUT"
# Seconds a step of a user's point may take: a legitimate launch that long is a point
# --budget (20 s a point by default) skips once a smaller size predicted it.
DEFAULT_TIMEOUT_S = 120.0
# What the child has to start (import xbackend) before it answers: not a kernel's time.
START_S = 120.0
_POLL_S = 0.05  # how often the parent looks at the child's steps while it waits


class ChildError(Described):
    """An error the child raised measuring a point (a build that failed, say), as the
    child described it: the point's error, and the child goes on."""


class KernelTimeout(Described):
    """A step of a user's point (its build and first runs, or a sample) took longer than
    the deadline: its process was ended."""


class KernelCrashed(Described):
    """The process measuring a user's point died (a signal: the kernel corrupted memory)."""


def kernel_timeout_s() -> float:
    """The deadline of a step of a user's point: ``XBACKEND_KERNEL_TIMEOUT``, else 120 s."""
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise XBackendError(f"{TIMEOUT_ENV}={text!r}: set it to a number of seconds above 0")
    return value


def isolated(config: Config) -> bool:
    """Whether ``config`` runs a user's kernel on a backend the child can open again."""
    if config.variant not in families.user_variants([config.op]):
        return False
    try:
        return type(config.backend) is backend_class(config.backend.name)
    except XBackendError:
        return False


@dataclasses.dataclass(frozen=True)
class _Request:
    """One product to measure, and the backend to measure it on (opened by the child)."""

    backend: str
    device: int | str | None
    index: str | None  # the compiled backends' index mode (``use_index``)
    variant: str
    tile: int | None
    op: str
    A: Array
    B: Array
    options: dict[str, Any]

    @classmethod
    def of(cls, config: Config, A: Array, B: Array, options: dict[str, Any]) -> _Request:
        backend = config.backend
        return cls(
            backend.name, _device_selector(backend), getattr(backend, "index_mode", None),
            config.variant, config.tile, config.op, A, B, options,
        )  # fmt: skip


def _device_selector(backend: Backend) -> int | str:
    """How the child opens the parent's device: its index among the backend's devices,
    else its name."""
    with contextlib.suppress(Exception):  # a driver's listing: any error, and only here
        for index, info in enumerate(type(backend).list_devices()):
            if info == backend.device:
                return index
    return backend.device.name


class Isolation:
    """Measures user kernels' points in a child process, each step under a deadline.

    ``measurer(config)`` is what ``measure.measure_point`` takes: ``measure`` for a user's
    kernel (``isolated``), None (the parent's backend) for the rest. A context manager:
    leaving it ends the child.
    """

    def __init__(self, timeout_s: float | None = None):
        self.timeout_s = kernel_timeout_s() if timeout_s is None else timeout_s
        self._child: _Child | None = None

    def measurer(self, config: Config) -> Any:
        return self.measure if isolated(config) else None

    def measure(self, config: Config, A: Array, B: Array, **options: Any) -> Measurement:
        """``config``'s product measured in the child (started where none runs); a child
        that times out or dies is ended, and the error says which."""
        request = _Request.of(config, A, B, options)
        if self._child is None:
            self._child = _Child()
        try:
            return self._child.measure(request, self.timeout_s)
        except ChildError:
            raise
        except BaseException:  # a timeout, a crash, Ctrl-C: the child may be anywhere
            self._end(graceful=False)
            raise

    def _end(self, graceful: bool) -> None:
        child, self._child = self._child, None
        if child is not None:
            child.end(graceful)

    def close(self) -> None:
        self._end(graceful=True)

    def __enter__(self) -> Isolation:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        self._end(graceful=kind is None)


# What the child is doing, as it tells the parent (``_Child.progress[1]``).
_STARTING, _OPENING, _BUILDING, _SAMPLING = range(4)
_DOING = {
    _STARTING: "starting its process",
    _OPENING: "opening the device",
    _BUILDING: "its build or its first runs",
    _SAMPLING: "a timed sample",
}


class _Child:
    """The child process, the pipe to it, and what it is doing: ``progress`` holds the
    count of its steps and the phase of the point it measures (``_DOING``)."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self.progress = context.RawArray("Q", 2)
        self.conn, theirs = context.Pipe()
        self.process = context.Process(
            target=_serve, args=(theirs, self.progress, os.getpid()), name="xbackend-kernels",
            daemon=True,
        )  # fmt: skip
        with _sigint_ignored():  # inherited: Ctrl-C is the parent's to handle
            self.process.start()
        theirs.close()
        try:
            self._wait(START_S)  # its "ready": the imports are not the kernel's time
        except BaseException:
            self.end(graceful=False)
            raise

    def measure(self, request: _Request, timeout_s: float) -> Measurement:
        self.conn.send(request)
        kind, answer = self._wait(timeout_s)
        if kind == "error":
            raise ChildError(answer)
        return answer  # type: ignore[no-any-return]

    def _wait(self, timeout_s: float) -> tuple[str, Any]:
        """The child's answer, waiting at most ``timeout_s`` for each of its steps."""
        seen, since = self.progress[0], time.monotonic()
        while not self.conn.poll(_POLL_S):
            if self.progress[0] != seen:
                seen, since = self.progress[0], time.monotonic()
            elif time.monotonic() - since > timeout_s:
                raise KernelTimeout(_timed_out(timeout_s, _DOING[self.progress[1]]))
        try:
            return self.conn.recv()  # type: ignore[no-any-return]
        except (EOFError, OSError):
            raise KernelCrashed(self._death(_DOING[self.progress[1]])) from None

    def _death(self, doing: str) -> str:
        """How the child died, in a sentence."""
        self.process.join(5)
        code = self.process.exitcode
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            how = f"died of {name} ({signal.strsignal(-code) or 'a signal'})"
        else:
            how = f"ended with exit status {code}"
        return f"the kernel's process {how} during {doing}: the run went on without it"

    def end(self, graceful: bool) -> None:
        """Stop the child: asked to where it is idle, killed where not (or where it
        does not stop within seconds)."""
        if graceful and self.process.is_alive():
            with contextlib.suppress(OSError):
                self.conn.send(None)
            self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)
        self.conn.close()


def _timed_out(timeout_s: float, doing: str) -> str:
    return (
        f"timed out after {timeout_s:g} s: the kernel did not return ({doing} took longer "
        f"than a user's kernel is given: --kernel-timeout, {TIMEOUT_ENV}); its process "
        "was ended"
    )


@contextlib.contextmanager
def _sigint_ignored() -> Any:
    """SIGINT ignored while a child starts (where this is the main thread)."""
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: signals are not ours to change
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


# -- the child's side -------------------------------------------------------------------


def _serve(conn: Connection, progress: Any, parent: int) -> None:
    """The child's loop: measure each request, answer it; stop at None or a closed pipe."""
    _die_with(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    opened: dict[tuple[str, int | str | None, str | None], Backend] = {}
    conn.send(("ready", os.getpid()))
    try:
        while True:
            try:
                request = conn.recv()
            except EOFError:
                return
            if request is None:
                return
            conn.send(_answer(request, opened, progress))
    finally:
        for backend in opened.values():
            backend.close()


def _answer(request: _Request, opened: dict[Any, Backend], progress: Any) -> tuple[str, Any]:
    try:
        key = (request.backend, request.device, request.index)
        if key not in opened:
            progress[1] = _OPENING
            opened[key] = _open(request, progress)
            progress[0] += 1
        progress[1] = _BUILDING
        measured = opened[key].measure(
            request.A, request.B, request.variant, request.tile, op=request.op,
            **request.options,
        )  # fmt: skip
    except Exception as error:  # the parent records it as the point's error
        return "error", describe_error(error)
    return "measured", measured


def _open(request: _Request, progress: Any) -> Backend:
    """The request's backend, its samples' monitor counting the steps for the parent."""
    backend = get_backend(request.backend, request.device)
    if request.index is not None and hasattr(backend, "use_index"):
        backend.use_index(request.index)
    monitor = backend.monitor
    backend.monitor = lambda: _Counting(monitor(), progress)  # type: ignore[method-assign]
    return backend


class _Counting:
    """A backend's monitor that also counts the sampling loop's steps (after the warm-up,
    after each sample: outside every timed window) where the parent sees them."""

    def __init__(self, inner: Monitor, progress: Any):
        self.inner, self.progress = inner, progress

    def header(self) -> dict[str, Any]:
        return self.inner.header()

    def start(self) -> None:
        self.progress[1] = _SAMPLING
        self.progress[0] += 1
        self.inner.start()

    def sample(self) -> Any:
        state = self.inner.sample()
        self.progress[0] += 1
        return state

    def finish(self) -> dict[str, Any] | None:
        return self.inner.finish()


def _die_with(parent: int) -> None:
    """Have the kernel (Linux) kill this child when its parent dies, hung or not: a
    killed run leaves no kernel spinning."""
    with contextlib.suppress(Exception):  # not Linux, or no libc to ask: the pipe's end
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)
