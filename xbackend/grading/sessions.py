"""A tool run in a session of its own, so that its deadline ends everything it started.

nvcc runs its preprocessor and compilers as processes of their own, and a sanitizer runs
a check whose kernels run in yet another: killing the tool alone at its deadline would
leave them running, reparented to init (a preprocessor bomb eating memory and a core).
Each is started as the leader of a new session, and at its deadline (or an interrupt)
the whole process group is killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence


def run_in_session(
    command: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None,
    before: Callable[[], None] | None = None,
) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """``command`` run to its end, its output kept (``env``: its environment; ``before``:
    run in the child before the command, as ``preexec_fn``). Past ``timeout_s``, it and
    every process it started are killed and ``TimeoutExpired`` is raised with the output
    they wrote."""
    process = subprocess.Popen(
        list(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, env=None if env is None else dict(env), preexec_fn=before,
    )  # fmt: skip
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except BaseException as error:  # the deadline, or an interrupt: nothing may outlive it
        with contextlib.suppress(ProcessLookupError):  # already gone
            os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        if isinstance(error, subprocess.TimeoutExpired):
            raise subprocess.TimeoutExpired(command, timeout_s, stdout, stderr) from None
        raise
    return subprocess.CompletedProcess(list(command), process.returncode, stdout, stderr)
