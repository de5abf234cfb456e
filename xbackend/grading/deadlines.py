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
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path


def run_to_deadline(
    command: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None,
    before: Callable[[], None] | None = None,
) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """``command`` run to its end, its output kept (``env``: its environment; ``before``:
    run in the child before the command, as ``preexec_fn``). Past ``timeout_s``, it and
    every process it started are killed and ``TimeoutExpired`` is raised with the output
    they wrote."""
    process = subprocess.Popen(
        list(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=None if env is None else dict(env), preexec_fn=before,
    )  # fmt: skip
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except BaseException as error:  # the deadline, or an interrupt: nothing may outlive it
        kill_tree(process.pid)
        stdout, stderr = process.communicate()
        if isinstance(error, subprocess.TimeoutExpired):
            raise subprocess.TimeoutExpired(command, timeout_s, stdout, stderr) from None
        raise
    return subprocess.CompletedProcess(list(command), process.returncode, stdout, stderr)


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
