"""The command line's exit statuses, and the ways a command ends early: Ctrl-C before
anything was recorded, a signal that ends it (SIGTERM, what Slurm sends at a job's time
limit; SIGHUP, a terminal closed), and a reader of its output that went away."""

from __future__ import annotations

import contextlib
import os
import signal
import sys

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a reader that went away


def interrupted_before_recording() -> int:
    """Say in one line that Ctrl-C came before anything was recorded (so there is nothing
    to resume); the exit status for it."""
    print("\nxbackend: interrupted: nothing was recorded yet", file=sys.stderr)
    return EXIT_INTERRUPTED


# The signals that end a command as Ctrl-C does: every finished point kept, every
# resource released (a cluster's workers and shared memory), then the exit status a shell
# reports for the signal (128 + its number).
ENDING_SIGNALS = ("SIGTERM", "SIGHUP")


class Terminated(KeyboardInterrupt):
    """A signal that ends the command (``ENDING_SIGNALS``), raised as Ctrl-C is, so that
    every command's interrupt path (keep, release, say) runs for it too."""

    def __init__(self, signum: int):
        super().__init__(f"ended by {signal.Signals(signum).name}")
        self.signum = signum


_ended_by: list[int] = []  # the signal that ended this command, once raised


def _terminated(signum: int, frame: object) -> None:
    _ended_by.append(signum)
    raise Terminated(signum)


def end_on_signals() -> None:
    """``ENDING_SIGNALS`` raise :class:`Terminated` from here on, where they would kill the
    process (one ignored, as ``nohup`` ignores SIGHUP, stays ignored). Main thread only."""
    for name in ENDING_SIGNALS:
        number = getattr(signal, name, None)
        if number is not None and signal.getsignal(number) is signal.SIG_DFL:
            signal.signal(number, _terminated)


def exit_status(code: int) -> int:
    """``code``, or 128 + the signal's number where an ending signal stopped the command
    (it then ended as interrupted: 130)."""
    if _ended_by and code == EXIT_INTERRUPTED:
        return 128 + _ended_by[0]
    return code


def take_over_signals() -> None:
    """Ctrl-C from here on is a KeyboardInterrupt, which the command turns into its line:
    the handler that covered the imports before (``xbackend/__init__.py``) steps down; and
    in the command line's own process (not a program calling ``main``) the ending signals
    end it as Ctrl-C does (``end_on_signals``)."""
    import xbackend

    if signal.getsignal(signal.SIGINT) is xbackend._interrupted_while_starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if xbackend._started_as_command():
        with contextlib.suppress(ValueError):  # not the main thread: Python's own
            end_on_signals()


def silence_stdout() -> None:
    """Point stdout at /dev/null, so that nothing more fails on a reader that went away."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
