"""A user's kernels measured in a process of their own: a hang or a crash is that point's record.

A kernel of a user's family (``--kernels``) can loop for ever, bomb the preprocessor or
write far outside its buffers. Run in xbackend's process, the first hangs the run (Ctrl-C
cannot end a call into the driver) and the second kills it with no line naming the point,
at the same point on every ``--resume``. ``Isolation`` measures such points in a child
process (a fresh ``python``: it inherits no driver state and, unlike multiprocessing's
'spawn', never runs the caller's script again), which keeps its backends open and its
kernels built from one point to the next and measures with the same loop as the parent
(``Backend.measure``). Requests and answers are pickled over pipes of their own, so that
what a driver prints cannot mix with them; a request carries the parent's kernel-family
folders (``families.added_folders``), which the child adds before it opens a backend.

The parent waits on each step of a point with a deadline (``XBACKEND_KERNEL_TIMEOUT``,
``compare --kernel-timeout``): opening the device, then the build with the first run and
the warm-up runs, then each timed sample (the child writes a byte on a third pipe at each
step, from the samples' monitor: outside every timed window). A step over the deadline
ends the child (``KernelTimeout``); a child that dies is named with its signal
(``KernelCrashed``). Either is the point's error record, and the next point starts a fresh
child. Ctrl-C reaches the parent, which ends the child and the run. xbackend's own kernels
are measured in the parent, as before.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import math
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from xbackend import families
from xbackend.backends.registry import backend_class
from xbackend.errors import XBackendError
from xbackend.launches.operands import POISON_ENV
from xbackend.sweep.configs import Config
from xbackend.sweep.measure import Described, Measurer, describe_error
from xbackend.tuning.opening import get_backend

if TYPE_CHECKING:
    from xbackend.backends.interface import Backend
    from xbackend.launches.specs import Measurement
    from xbackend.measuring.sampler import Monitor

Array = np.ndarray[Any, Any]

TIMEOUT_ENV = "XBACKEND_KERNEL_TIMEOUT"
# Seconds a step of a user's point may take: a legitimate launch that long is a point
# --budget (20 s a point by default) skips once a smaller size predicted it.
DEFAULT_TIMEOUT_S = 120.0
# What the child has to start (import xbackend) before it answers: not a kernel's time.
START_S = 120.0


class ChildError(Described):
    """An error the child raised measuring a point (a build that failed, say), as the
    child described it: the point's error, and the child goes on."""


class KernelTimeout(Described):
    """A step of a user's point (its build, its first runs, or a sample) took longer than
    the deadline: its process was ended. ``building``: in its build (then every shape's
    would be), not in a run of the kernel."""

    building = False


class KernelCrashed(Described):
    """The process measuring a user's point died (a signal: the kernel corrupted memory);
    ``building``: in its build, not in a run of the kernel."""

    building = False


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
    if os.name != "posix" or config.variant not in families.user_variants([config.op]):
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
    folders: tuple[Path, ...]  # the parent's kernel-family folders (``--kernels``)
    poison: str = ""  # the parent's POISON_ENV: check's second run poisons with a finite value

    @classmethod
    def of(cls, config: Config, A: Array, B: Array, options: dict[str, Any]) -> _Request:
        backend = config.backend
        return cls(
            backend.name, _device_selector(backend), getattr(backend, "index_mode", None),
            config.variant, config.tile, config.op, A, B, options, families.added_folders(),
            os.environ.get(POISON_ENV, ""),
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

    def measurer(self, config: Config) -> Measurer | None:
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
            # The child goes on no further: where the device reported the kernel's fault
            # (a GPU's illegal address: CUDA's 700, NVIDIA OpenCL's -9999) rather than
            # killing the process, its context is unusable; the next point gets a new one.
            self._end(graceful=True)
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


# What the child is doing, as it tells the parent (a byte on the progress pipe): its
# build, then its first runs once the backend has built the product (``_Built``).
_STARTING, _OPENING, _BUILDING, _SAMPLING, _RUNNING = range(5)
_DOING = {
    _STARTING: "starting its process",
    _OPENING: "opening the device",
    _BUILDING: "its build",
    _SAMPLING: "a timed sample",
    _RUNNING: "its first runs after its build",
}


class _Child:
    """The child process and its three pipes: requests to it, answers from it, and its
    progress (a byte a step, the byte what it is doing: ``_DOING``)."""

    def __init__(self) -> None:
        requests, self.requests = os.pipe()
        self.answers, answers = os.pipe()
        self.progress, progress = os.pipe()
        theirs = (requests, answers, progress)
        serve = f"from xbackend.sweep.isolation import serve; serve{(*theirs, os.getpid())}"
        try:
            with _sigint_ignored():  # inherited: Ctrl-C is the parent's to handle
                self.process = subprocess.Popen(
                    [sys.executable, "-c", serve], pass_fds=theirs, stdin=subprocess.DEVNULL,
                    env=child_environment(),
                )  # fmt: skip
        finally:
            for fd in theirs:
                os.close(fd)
        self.doing = _STARTING
        try:
            self._wait(START_S)  # its "ready": the imports are not the kernel's time
        except BaseException:
            self.end(graceful=False)
            raise

    def measure(self, request: _Request, timeout_s: float) -> Measurement:
        try:
            _write_frame(self.requests, request)
        except BrokenPipeError:  # it died since its last answer
            raise KernelCrashed(self._death()) from None
        kind, answer = self._wait(timeout_s)
        if kind == "error":
            raise ChildError(answer)
        return answer  # type: ignore[no-any-return]

    def _wait(self, timeout_s: float) -> tuple[str, Any]:
        """The child's answer, waiting at most ``timeout_s`` for each of its steps."""
        since = time.monotonic()
        watched = [self.answers, self.progress]
        while True:
            left = since + timeout_s - time.monotonic()
            if left <= 0:
                timeout = KernelTimeout(_timed_out(timeout_s, _DOING[self.doing]))
                timeout.building = self.doing == _BUILDING
                raise timeout
            ready, _, _ = select.select(watched, [], [], left)
            if self.progress in ready:
                steps = os.read(self.progress, 4096)
                if steps:
                    since, self.doing = time.monotonic(), steps[-1]
                else:
                    watched.remove(self.progress)  # it died: the answers' pipe says so
            if self.answers in ready:
                answer = _read_frame(self.answers)
                if answer is None:
                    crashed = KernelCrashed(self._death())
                    crashed.building = self.doing == _BUILDING
                    raise crashed
                return answer  # type: ignore[no-any-return]

    def _death(self) -> str:
        """How the child died, in a sentence."""
        try:
            code = self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            how = f"died of {name} ({signal.strsignal(-code) or 'a signal'})"
        else:
            how = f"ended with exit status {code}"
        doing = _DOING[self.doing]
        return f"the kernel's process {how} during {doing}: the run went on without it"

    def end(self, graceful: bool) -> None:
        """Stop the child: asked to where it is idle (its requests' pipe closed), killed
        where not, or where it does not stop within seconds."""
        for fd in (self.requests, self.answers, self.progress):
            with contextlib.suppress(OSError):
                os.close(fd)
        if graceful:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(5)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _timed_out(timeout_s: float, doing: str) -> str:
    what = "its build did not finish" if doing == _DOING[_BUILDING] else "the kernel did not return"
    return (
        f"timed out after {timeout_s:g} s: {what} ({doing} took longer than a user's kernel "
        f"is given: --kernel-timeout, {TIMEOUT_ENV}); its process was ended"
    )


def child_environment() -> dict[str, str]:
    """The parent's environment, with this xbackend first on the child's path (a source
    checkout that is not installed runs the same), and PyOpenCL's binary cache off: its one
    lock file is the whole machine's, held through each build, so a user's build under a
    deadline (or killed at it) made every other build wait a minute and fail ("does not
    build: timed out after 60 s" for a correct kernel, in a fresh-clone .ci/run)."""
    package_root = str(Path(__file__).resolve().parents[2])
    path = [package_root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(dict.fromkeys(path)),
        "PYOPENCL_NO_CACHE": "1",
    }


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


# -- the pipes' frames: a length, then a pickle ---------------------------------------------

_LENGTH = struct.Struct("<Q")


def _write_frame(fd: int, item: Any) -> None:
    data = pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_LENGTH.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def _read_frame(fd: int) -> Any:
    """The next item, or None where the pipe ended (its writer died or closed it)."""
    head = _read_exactly(fd, _LENGTH.size)
    if head is None:
        return None
    body = _read_exactly(fd, _LENGTH.unpack(head)[0])
    return None if body is None else pickle.loads(body)  # our own process wrote it


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, min(left, 1 << 24))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


# -- the child's side -------------------------------------------------------------------


def serve(requests: int, answers: int, progress: int, parent: int) -> None:
    """The child's loop: measure each request and answer it, until its pipe ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with(parent)
    opened: dict[tuple[str, int | str | None, str | None], Backend] = {}
    _write_frame(answers, ("ready", os.getpid()))
    try:
        while True:
            request = _read_frame(requests)
            if request is None:
                return
            _write_frame(answers, _answer(request, opened, progress))
    finally:
        for backend in opened.values():
            # A kernel that faulted on a GPU leaves its context unusable (NVIDIA's OpenCL:
            # CL_INVALID_COMMAND_QUEUE on release): the process ends anyway.
            with contextlib.suppress(Exception):
                backend.close()


def _answer(request: _Request, opened: dict[Any, Backend], progress: int) -> tuple[str, Any]:
    try:
        # The parent's folders as it has them now, the variant's family among them (one
        # the child cannot load is this point's error).
        families.use_folders(request.folders)
        os.environ[POISON_ENV] = request.poison  # this run's poison, as the parent's
        key = (request.backend, request.device, request.index)
        if key not in opened:
            os.write(progress, bytes([_OPENING]))
            opened[key] = _open(request, progress)
        os.write(progress, bytes([_BUILDING]))
        measured = opened[key].measure(
            request.A, request.B, request.variant, request.tile, op=request.op,
            **request.options,
        )  # fmt: skip
    except Exception as error:  # the parent records it as the point's error
        return "error", describe_error(error)
    return "measured", measured


def _open(request: _Request, progress: int) -> Backend:
    """The request's backend, its samples' monitor telling the parent each step."""
    # With the tune cache's choices, as the parent's (``xbackend.get_backend``): a variant
    # whose family declares parameters takes those ``tune`` chose.
    backend = get_backend(request.backend, request.device)
    if request.index is not None and hasattr(backend, "use_index"):
        backend.use_index(request.index)
    monitor = backend.monitor
    backend.monitor = lambda: _Counting(monitor(), progress)  # type: ignore[method-assign]
    execution = backend._execution

    def built(*args: Any, **kwargs: Any) -> Any:
        """The product built (compiled, allocated): what runs next is the kernel."""
        made = execution(*args, **kwargs)
        os.write(progress, bytes([_RUNNING]))
        return made

    backend._execution = built  # type: ignore[method-assign]
    return backend


class _Counting:
    """A backend's monitor that also tells the parent of the sampling loop's steps (after
    the warm-up, after each sample: outside every timed window)."""

    def __init__(self, inner: Monitor, progress: int):
        self.inner, self.progress = inner, progress

    def header(self) -> dict[str, Any]:
        return self.inner.header()

    def start(self) -> None:
        os.write(self.progress, bytes([_SAMPLING]))
        self.inner.start()

    def sample(self) -> Any:
        state = self.inner.sample()
        os.write(self.progress, bytes([_SAMPLING]))
        return state

    def finish(self) -> dict[str, Any] | None:
        return self.inner.finish()

    def energy_mj(self) -> float | None:
        counter = getattr(self.inner, "energy_mj", None)
        return counter() if counter is not None else None


def _die_with(parent: int) -> None:
    """Have the kernel (Linux) kill this child when its parent dies, hung or not: a
    killed run leaves no kernel spinning."""
    with contextlib.suppress(Exception):  # not Linux, or no libc to ask: the pipe's end
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)
