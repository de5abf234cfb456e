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
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

from xbackend.grading import records
from xbackend.grading.records import Records, Verdict
from xbackend.grading.submissions import Submission
from xbackend.isolation import child_environment
from xbackend.safeio import UnsafePath

DEFAULT_TIMEOUT_S = 1800.0  # one submission's whole check; each kernel step has its own


@dataclasses.dataclass(frozen=True)
class Checked:
    """One submission's check: its records, and how its process ended."""

    submission: Submission
    records: Records
    exit: int | None  # the process's exit status; None where it was ended or died
    ended: str  # "" where it ended by itself; else why ("SIGSEGV", "past its 1800 s")
    seconds: float


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
    command = [sys.executable, "-m", "xbackend", "check", str(submission.folder), "--one",
               "--records", str(kept), *options]  # fmt: skip
    started = time.monotonic()
    with _output(folder / "check.log" if quiet else None) as out:
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT if quiet else None,
                                 start_new_session=quiet, env=child_environment())  # fmt: skip
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
    found = records.read(kept)
    seconds = time.monotonic() - started
    if ended or not found.done:
        found = _cut_short(
            found, ended or f"exit {status}", folder / "check.log" if quiet else None
        )
    return Checked(submission, found, status if status >= 0 else None, ended, seconds)


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
def _output(path: Path | None) -> Iterator[IO[str] | None]:
    """The child's output: a log file, or this process's own (None)."""
    if path is None:
        yield None
        return
    # Never through a link planted at the log's name (O_NOFOLLOW: ELOOP, said by name).
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    except OSError as error:
        raise UnsafePath(f"{path}: cannot write the log: {error.strerror or error}") from None
    with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
        yield stream


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
    if log is None:
        return ""
    try:
        lines = [
            line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()
        ]
    except OSError:
        return ""
    return " / ".join(lines[-2:])[:300]
