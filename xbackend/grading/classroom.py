"""Each submission checked in a process of its own, under a deadline.

``xbackend check --one`` runs one submission's kernels (``cli/check_submission.py``),
appending its records as it goes. Whatever happens to that process (a kernel that
corrupts the runtime's heap, a hang past every inner deadline, a signal) is that
submission's verdict, named with the signal or the deadline, and the next submission
runs. What it recorded before is kept.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

from xbackend.grading import records
from xbackend.grading.records import Records, Verdict
from xbackend.grading.submissions import Submission, shown
from xbackend.measuring import host_load
from xbackend.safeio import UnsafePath
from xbackend.sweep.isolation import child_environment

DEFAULT_TIMEOUT_S = 1800.0  # one submission's whole check; each kernel step has its own
# A submission's check.log keeps this much of its output's start and of its end (where a
# check cut short says why): a kernel that prints a line a work-item writes hundreds of MB.
LOG_HEAD_BYTES = 4 << 20
LOG_TAIL_BYTES = 1 << 20
LAST_WORDS_BYTES = 64 << 10  # what is read back of a log for a check's last words


@dataclasses.dataclass(frozen=True)
class Checked:
    """One submission's check: its records, and how its process ended."""

    submission: Submission
    records: Records
    exit: int | None  # the process's exit status; None where it was ended or died
    ended: str  # "" where it ended by itself; else why ("SIGSEGV", "past its 1800 s")
    seconds: float
    others_cores: float | None = None  # what other processes took of the host meanwhile


def check(
    submission: Submission, options: Sequence[str], folder: Path, timeout_s: float,
    quiet: bool,
) -> Checked:  # fmt: skip
    """Check ``submission`` in a child ``xbackend check --one`` with ``options``; its
    records in ``folder``/records.jsonl, its output there in check.log where ``quiet``
    (else on this process's own output)."""
    if submission.problem:
        verdict = Verdict("-", "-", None, None, submission.problem)
        return Checked(submission, Records([verdict], [], [], True), None, "", 0.0)
    folder.mkdir(parents=True, exist_ok=True)
    kept = folder / "records.jsonl"
    kept.unlink(missing_ok=True)
    if not quiet:  # its output goes to the terminal: no log of an earlier check stays
        (folder / "check.log").unlink(missing_ok=True)
    started, host = time.monotonic(), _host_now()
    with (
        _utf8(submission.folder) as source,
        _output(folder / "check.log" if quiet else None) as log,
    ):
        command = [sys.executable, "-m", "xbackend", "check", str(source), "--one",
                   "--records", str(kept), *options]  # fmt: skip
        piped = subprocess.PIPE if log else None
        child = subprocess.Popen(command, stdout=piped, stderr=subprocess.STDOUT if log else None,
                                 start_new_session=quiet, env=child_environment())  # fmt: skip
        if log is not None and child.stdout is not None:
            log.follow(child.stdout.fileno())
        with _LOCK:
            _LIVE.add(child)
        try:
            status = child.wait(timeout=timeout_s)
            ended = "" if status >= 0 else _signal_name(-status)
        except subprocess.TimeoutExpired:
            _end(child)
            status, ended = -1, f"past its {timeout_s:g} s"
        except BaseException:  # Ctrl-C, SIGTERM: the child goes with this process
            _end(child)
            raise
        finally:
            with _LOCK:
                _LIVE.discard(child)
    if child.stdout is not None:  # the log's copy has ended: its pipe is done with
        child.stdout.close()
    found = records.read(kept)
    seconds = time.monotonic() - started
    if ended or not found.done:
        found = _cut_short(
            found, ended or f"exit {status}", folder / "check.log" if quiet else None
        )
    return Checked(submission, found, status if status >= 0 else None, ended, seconds,
                   _others_cores(host, _host_now()))  # fmt: skip


def _host_now() -> tuple[host_load.Reading, float]:
    """The host's counters, and the CPU seconds this process's ended children took."""
    times = os.times()
    return host_load.read(), times.children_user + times.children_system


def _others_cores(
    begin: tuple[host_load.Reading, float], end: tuple[host_load.Reading, float]
) -> float | None:
    """The cores other processes took between ``begin`` and ``end``: the host's busy time
    less this process's and its ended children's (the submission's check, with what it
    started and waited for); None where the OS does not count it."""
    (first, children_first), (last, children_last) = begin, end
    window = last.wall_s - first.wall_s
    if first.busy_s is None or last.busy_s is None or window < host_load.COUNTED_WINDOW_S:
        return None
    ours = (last.own_s - first.own_s) + (children_last - children_first)
    return round(max(0.0, (last.busy_s - first.busy_s) - ours) / window, 2)


# The submissions' processes running now: ended all at once where this one is interrupted
# (a signal reaches the main thread, not those waiting on each process).
_LIVE: set[subprocess.Popen[bytes]] = set()
_LOCK = threading.Lock()


def check_all(
    found: Sequence[Submission], options: Sequence[str], folders: Sequence[Path],
    timeout_s: float, quiet: bool, jobs: int = 1,
) -> Iterator[Checked]:  # fmt: skip
    """Each submission checked (``check``), ``jobs`` at a time, yielded as each ends; on
    an interrupt every submission's process is ended with this one's."""
    with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as pool:
        running = [pool.submit(check, each, options, folder, timeout_s, quiet)
                   for each, folder in zip(found, folders, strict=True)]  # fmt: skip
        try:
            for done in concurrent.futures.as_completed(running):
                yield done.result()
        except BaseException:
            for future in running:
                future.cancel()
            with _LOCK:
                live = list(_LIVE)
            for child in live:
                _end(child)
            raise


@contextlib.contextmanager
def _utf8(folder: Path) -> Iterator[Path]:
    """The submission's folder as its check is given it: itself, or, where its path is not
    UTF-8 (a zip made on Windows unpacks ``caf\\xe9``), a copy under the name the gradebook
    shows, for the check's time: OpenCL's compiler takes its include folders in UTF-8."""
    try:
        str(folder).encode("utf-8")
    except UnicodeEncodeError:
        with tempfile.TemporaryDirectory(prefix="xbackend-utf8-") as scratch:
            copy = Path(scratch) / shown(folder.name)
            try:
                shutil.copytree(folder, copy, symlinks=True)
            except (OSError, shutil.Error):  # a full disk: its verdict says what failed
                copy = folder
            yield copy
        return
    yield folder


@contextlib.contextmanager
def _output(path: Path | None) -> Iterator[_Log | None]:
    """The child's output: a capped log file, or this process's own (None)."""
    if path is None:
        yield None
        return
    log = _Log(path)
    try:
        yield log
    finally:
        log.close()


class _Log:
    """A child's output copied into its log by a thread as it comes: the first
    ``LOG_HEAD_BYTES`` written, the last ``LOG_TAIL_BYTES`` kept in memory and written at
    the end after a line saying how much was left out between."""

    def __init__(self, path: Path):
        # Never through a link planted at the log's name: a symbolic one (O_NOFOLLOW: ELOOP,
        # said by name), nor a hard one, whose other name a truncation would empty: an old
        # log is unlinked, then a new file made (O_EXCL), as the gradebook's renames do.
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        try:
            if path.is_file() and not path.is_symlink():
                path.unlink()
            self._file: IO[bytes] = os.fdopen(os.open(path, flags, 0o644), "wb")
        except OSError as error:
            raise UnsafePath(f"{path}: cannot write the log: {error.strerror or error}") from None
        self._written = self._left_out = 0
        self._tail = bytearray()
        self._until: float | None = None  # when to stop waiting for the pipe's end
        self._thread: threading.Thread | None = None

    def follow(self, descriptor: int) -> None:
        self._thread = threading.Thread(target=self._copy, args=(descriptor,), daemon=True)
        self._thread.start()

    def _copy(self, descriptor: int) -> None:
        # select, not a blocking read: a process the child left behind may hold the pipe
        # open past the child's end, and the copy must then stop (``close``).
        try:
            while self._until is None or time.monotonic() < self._until:
                if not select.select([descriptor], [], [], 0.2)[0]:
                    continue
                chunk = os.read(descriptor, 1 << 16)
                if not chunk:
                    return
                self._keep(chunk)
        except OSError:  # the pipe gone: what came is kept
            return

    def _keep(self, chunk: bytes) -> None:
        room = max(0, LOG_HEAD_BYTES - self._written)
        if room:
            self._write(chunk[:room])
        self._tail += chunk[room:]
        if len(self._tail) > LOG_TAIL_BYTES:
            self._left_out += len(self._tail) - LOG_TAIL_BYTES
            del self._tail[: len(self._tail) - LOG_TAIL_BYTES]

    def _write(self, data: bytes) -> None:
        try:
            self._file.write(data)
            self._written += len(data)
        except OSError:  # a full disk: the output is drained still, so the child goes on
            self._written = LOG_HEAD_BYTES

    def close(self) -> None:
        self._until = time.monotonic() + 5.0
        if self._thread is not None:
            self._thread.join()
        if self._left_out:
            self._write(
                f"\n[xbackend: {self._left_out} bytes of this check's output left out here: "
                f"its log keeps its first {LOG_HEAD_BYTES >> 10} KiB and its last "
                f"{LOG_TAIL_BYTES >> 10} KiB]\n".encode()
            )
        self._write(bytes(self._tail))
        with contextlib.suppress(OSError):
            self._file.close()


def _end(child: subprocess.Popen[bytes]) -> None:
    """End the child and everything it started (its sanitizer, its kernels' process)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL) if _own_group(child) else child.kill()
    child.wait()


def _own_group(child: subprocess.Popen[bytes]) -> bool:
    try:
        return os.getpgid(child.pid) == child.pid
    except ProcessLookupError:
        return False


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _cut_short(found: Records, why: str, log: Path | None) -> Records:
    """A check that did not end by itself: a verdict that says so, after what it kept."""
    last = _last_lines(log)
    where = f"; its last words: {last}" if last else ""
    kept = f" after {len(found.verdicts)} verdicts" if found.verdicts else ""
    detail = f"the check of this submission ended ({why}){kept}{where}"
    return dataclasses.replace(
        found, verdicts=[*found.verdicts, Verdict("-", "-", None, None, detail)]
    )


def _last_lines(log: Path | None) -> str:
    """The log's last two lines, read from its last ``LAST_WORDS_BYTES`` only."""
    if log is None:
        return ""
    try:
        descriptor = os.open(log, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(descriptor, "rb") as stream:
            stream.seek(max(0, os.fstat(descriptor).st_size - LAST_WORDS_BYTES))
            text = stream.read(LAST_WORDS_BYTES).decode(errors="replace")
    except OSError:
        return ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " / ".join(lines[-2:])[:300]
