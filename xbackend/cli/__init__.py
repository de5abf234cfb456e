"""The command line: ``xbackend COMMAND``, one module per command.

* ``devices``: every backend, available or why not, and a tiny product on each device
  (``devices.py``);
* ``compare``: run the comparison; write results, figures, the report and a summary
  (``compare.py``, ``summary.py``);
* ``plot`` and ``report``: figures or the report from results files, running nothing
  (``results_commands.py``);
* ``diff``: two runs compared point by point, a verdict for each (``diff.py``);
* ``tune``: search the tuned variants' parameters on one device and cache the best
  (``tune.py``);
* ``limits``: the largest product each backend runs, within memory and a time budget
  (``limits.py``);
* ``profile``: what the CUDA kernels load and move, counted by Nsight Compute
  (``profile.py``).

Each command's parser sets ``func``, the function that runs it; :func:`main` calls it
and turns the errors a user can meet into one line and an exit status.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from xbackend import __version__
from xbackend.cli import compare, devices, diff, limits, profile, results_commands, tune
from xbackend.cli.compare import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, silence_stdout
from xbackend.cli.summary import summary_table
from xbackend.errors import XBackendError
from xbackend.progress import equality_line

EXIT_USAGE = 2

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "build_parser",
    "equality_line",
    "main",
    "summary_table",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="xbackend",
        description="The same matrix products on CUDA, OpenCL and the CPU: naive and tiled "
        "kernels, checked against a float64 reference, timed and drawn side by side.",
    )
    parser.add_argument("--version", action="version", version=f"xbackend {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    devices.add_parser(commands)
    compare.add_parser(commands)
    results_commands.add_parsers(commands)
    diff.add_parser(commands)
    tune.add_parser(commands)
    limits.add_parser(commands)
    profile.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        code: int = args.func(args)
        return code
    except (XBackendError, ValueError) as error:
        print(f"xbackend: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as error:  # a full disk, a file size limit, a path that cannot be
        if isinstance(error, BrokenPipeError):
            silence_stdout()
            return EXIT_BROKEN_PIPE
        where = f"{error.filename}: " if error.filename else ""
        print(f"xbackend: error: {where}{error.strerror or error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("\nxbackend: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
