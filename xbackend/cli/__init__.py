"""The command line: ``xbackend COMMAND``, one module per command.

* ``devices``: every backend, available or why not, and a tiny product on each device
  (``devices.py``);
* ``compare``: run the comparison; write results, figures, the report and a summary
  (``compare.py``, ``summary.py``);
* ``plot`` and ``report``: figures or the report from results files, running nothing
  (``results_commands.py``);
* ``diff``: two runs compared point by point, a verdict for each (``analysis/diff.py``);
* ``tune``: search the tuned variants' parameters on one device and cache the best
  (``tune.py``);
* ``limits``: the largest product each backend runs, within memory and a time budget
  (``sweep/limits.py``);
* ``profile``: what the CUDA kernels load and move, counted by Nsight Compute
  (``profile.py``);
* ``check``: a submission, or a class of them, checked as a teacher would (``check.py``);
* ``ceilings``: each API's own ceilings on its device, side by side (``ceilings.py``).

Each command's parser sets ``func``, the function that runs it; :func:`main` calls it
and turns the errors a user can meet into one line and an exit status. The commands'
modules (and what they import: NumPy, rich, the backends) are imported inside
:func:`main`, so that Ctrl-C in the first moments is one line and exit 130 like any
other, never a traceback from an import.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from xbackend import __version__, families
from xbackend.cli.exits import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    Terminated,
    exit_status,
    interrupted_before_recording,
    silence_stdout,
    take_over_signals,
)
from xbackend.errors import XBackendError
from xbackend.grading.submissions import shown
from xbackend.safeio import printable

# The commands' modules, in the order ``--help`` lists them.
COMMANDS = (
    "devices",
    "compare",
    "results_commands",
    "diff",
    "tune",
    "limits",
    "profile",
    "check",
    "ceilings",
)

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "build_parser",
    "interrupted_before_recording",
    "main",
]


def __getattr__(name: str) -> ModuleType:
    """A command's module as an attribute (``xbackend.cli.compare``), imported when asked."""
    if name in COMMANDS:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="xbackend",
        description="The same matrix products on CUDA, OpenCL and the CPU: naive and tiled "
        "kernels, checked against a float64 reference, timed and drawn side by side.",
    )
    parser.add_argument("--version", action="version", version=f"xbackend {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"{__name__}.{name}")
        add = getattr(module, "add_parser", None) or module.add_parsers
        add(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` names; its exit status (an ending signal's: 128 + its
    number, after the command kept and released what it holds, as on Ctrl-C)."""
    return exit_status(_command(argv))


def _command(argv: Sequence[str] | None) -> int:
    try:  # the commands' modules are imported here, inside the handler
        take_over_signals()
        parser = build_parser()
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        return interrupted_before_recording()
    if args.command is None:
        parser.print_help()
        return 0
    try:
        if getattr(args, "kernels", None):  # checked here: a wrong manifest is one line
            _utf8_paths(args.kernels)
            families.add_folders(args.kernels)
        code: int = args.func(args)
        return code
    except KeyboardInterrupt as error:  # a command that said nothing more itself
        why = f" ({error})" if isinstance(error, Terminated) else ""
        print(f"\nxbackend: interrupted{why}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (XBackendError, ValueError) as error:
        print(f"xbackend: error: {printable(error, keep=_LINES)}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as error:  # a full disk, a file size limit, a path that cannot be
        if isinstance(error, BrokenPipeError):
            silence_stdout()
            return EXIT_BROKEN_PIPE
        where = f"{error.filename}: " if error.filename else ""
        print(
            f"xbackend: error: {printable(where, keep=_LINES)}{error.strerror or error}",
            file=sys.stderr,
        )
        return EXIT_USAGE


# An error's own line breaks, kept; every other control character a name quoted in it holds
# (a folder named ``esc\x1b[2J``) is shown as its escape, never obeyed by the terminal.
_LINES = "\n\t"


def _utf8_paths(folders: Sequence[str]) -> None:
    """A ``--kernels`` folder whose path is not UTF-8 (a zip made on Windows: ``caf\xe9``)
    refused by name: the OpenCL and CUDA compilers take their include paths as UTF-8
    text (``check`` copies such a submission under a name that is)."""
    for folder in folders:
        try:
            str(Path(folder).resolve()).encode("utf-8")
        except UnicodeEncodeError:
            raise XBackendError(
                f"--kernels {shown(folder)}: its path "
                "is not UTF-8 text, which the compilers take their include paths as: rename it "
                "(or check it with xbackend check, which copies it under a name that is)"
            ) from None
