"""The command line's exit statuses, and the two ways a command ends early: Ctrl-C before
anything was recorded, and a reader of its output that went away."""

from __future__ import annotations

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


def take_over_ctrl_c() -> None:
    """Ctrl-C from here on is a KeyboardInterrupt, which the command turns into its line:
    the handler that covered the imports before (``xbackend/__init__.py``) steps down."""
    import xbackend

    if signal.getsignal(signal.SIGINT) is xbackend._interrupted_while_starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def silence_stdout() -> None:
    """Point stdout at /dev/null, so that nothing more fails on a reader that went away."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
