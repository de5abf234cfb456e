"""A tool run to its deadline, at which everything it started is ended with it.

nvcc runs its preprocessor and compilers as processes of their own, and a sanitizer runs
a check whose kernels run in yet another: killing the tool alone at its deadline would
leave them running, reparented to init (a preprocessor bomb eating memory and a core).
At the deadline the tool and every process below it are stopped, found, then killed.
They stay in the caller's process group, so that a class's check, which ends a
submission by killing its group, ends them too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

# What of a tool's output is kept, from each of its two streams: its first bytes and its
# last, the middle counted (a kernel that printf's in a loop under oclgrind wrote 1 GB).
OUTPUT_HEAD_BYTES = 16 << 20
OUTPUT_TAIL_BYTES = 1 << 20
_JOIN_S = 5.0  # a reader's wait for its stream's end once the tool has ended


def run_to_deadline(
    command: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None,
    before: Callable[[], None] | None = None,
) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """``command`` run to its end, its output kept, up to ``OUTPUT_HEAD_BYTES`` and
    ``OUTPUT_TAIL_BYTES`` a stream (``env``: its environment; ``before``: run in the child
    before the command, as ``preexec_fn``). Past ``timeout_s``, it and every process it
    started are killed and ``TimeoutExpired`` is raised with the output they wrote."""
    process = subprocess.Popen(
        list(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=None if env is None else dict(env), preexec_fn=before,
    )  # fmt: skip
    assert process.stdout is not None and process.stderr is not None
    streams = _Capped(process.stdout), _Capped(process.stderr)
    try:
        process.wait(timeout=timeout_s)
    except BaseException as error:  # the deadline, or an interrupt: nothing may outlive it
        kill_tree(process.pid)
        process.wait()
        if isinstance(error, subprocess.TimeoutExpired):
            stdout, stderr = (stream.text() for stream in streams)
            raise subprocess.TimeoutExpired(command, timeout_s, stdout, stderr) from None
        raise
    stdout, stderr = (stream.text() for stream in streams)
    return subprocess.CompletedProcess(list(command), process.returncode, stdout, stderr)


class _Capped:
    """One of a tool's streams read by a thread as it comes: its first bytes and its last
    kept, the bytes between counted and said."""

    def __init__(self, stream: IO[bytes]):
        self._head, self._tail, self._left_out = bytearray(), bytearray(), 0
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[bytes]) -> None:
        with stream:
            while chunk := os.read(stream.fileno(), 1 << 16):
                room = OUTPUT_HEAD_BYTES - len(self._head)
                self._head += chunk[:room]
                self._tail += chunk[room:] if room > 0 else chunk
                if len(self._tail) > OUTPUT_TAIL_BYTES:
                    self._left_out += len(self._tail) - OUTPUT_TAIL_BYTES
                    del self._tail[:-OUTPUT_TAIL_BYTES]

    def text(self) -> str:
        self._thread.join(_JOIN_S)  # a process it started may hold the stream: not forever
        cut = f"\n[{self._left_out} bytes of output left out here]\n" if self._left_out else ""
        return self._head.decode(errors="replace") + cut + self._tail.decode(errors="replace")


def kill_tree(pid: int) -> None:
    """Kill ``pid`` and every process below it. Each is stopped as it is found, so that
    none starts another or is reparented (out of reach) before all are killed."""
    stopped: set[int] = set()
    while True:
        found = [p for p in (pid, *_below(pid)) if p not in stopped]
        if not found:
            break
        for each in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(each, signal.SIGSTOP)
        stopped.update(found)
    for each in stopped:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(each, signal.SIGKILL)


def _below(pid: int) -> list[int]:
    """The processes below ``pid``, from /proc (none where there is no /proc)."""
    children: dict[int, list[int]] = defaultdict(list)
    with contextlib.suppress(OSError):
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue  # gone meanwhile
            parent = int(stat.rsplit(")", 1)[1].split()[1])  # after the name, its state
            children[parent].append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
