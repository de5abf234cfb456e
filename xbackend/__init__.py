"""xbackend: the same matrix products on CUDA, OpenCL and the CPU, side by side.

    >>> import numpy as np, xbackend
    >>> [b.name for b in xbackend.backends() if b.available]      # doctest: +SKIP
    ['opencl', 'cpu']
    >>> with xbackend.get_backend("opencl") as be:                 # doctest: +SKIP
    ...     C = be.matmul(A, B, variant="tiled", tile=16)

Importing xbackend starts no driver; a backend's driver starts when
``get_backend`` builds it and stops at ``close()``.
"""

import os as _os
import signal as _signal
import sys as _sys

from xbackend.version import VERSION as __version__


def _interrupted_while_starting(signum: int, frame: object) -> None:
    """Ctrl-C while the command line starts: one line and exit 130, as everywhere after."""
    print("\nxbackend: interrupted: nothing was recorded yet", file=_sys.stderr)
    raise SystemExit(130)


def _started_as_command() -> bool:
    """Whether this process is ``python -m xbackend`` or the ``xbackend`` script (its
    own command line: a worker process a run spawns is neither)."""
    argv = getattr(_sys, "orig_argv", [])
    module = argv[argv.index("-m") + 1 :][:1] if "-m" in argv else []
    script = len(argv) > 1 and _os.path.basename(argv[1]) == "xbackend"
    return module == ["xbackend"] or script


# `python -m xbackend` and the `xbackend` script import this package (NumPy, the backends:
# 0.1-0.3 s) before any handler of theirs runs; Ctrl-C then was a traceback. Started as
# the command line, Ctrl-C is handled from here until `xbackend.cli.main` takes it over.
if _started_as_command() and _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
    _signal.signal(_signal.SIGINT, _interrupted_while_starting)

# The BLAS threads' spin is set before NumPy loads (machine.py says why).
from xbackend import machine as _machine  # noqa: E402, F401

# E402: after the handler above, which must be in place before these imports start.
from xbackend.backends.interface import Backend  # noqa: E402
from xbackend.backends.registry import backend_names, backends  # noqa: E402
from xbackend.errors import (  # noqa: E402
    BackendUnavailable,
    DeviceOutOfMemory,
    KernelCompileError,
    UnsupportedParameter,
    XBackendError,
)
from xbackend.launches.specs import BackendInfo, DeviceInfo, Measurement  # noqa: E402
from xbackend.resources import kernels_path  # noqa: E402


def get_backend(name: str, device: str | int | None = None) -> Backend:
    """Open backend ``name`` on ``device`` (an index or a piece of its name; default the
    first), with the tune cache's choices for its tuned variants.

    Raises ``BackendUnavailable`` with the reason if it cannot run here.
    """
    from xbackend.tuning.opening import get_backend as opened  # the tuner loads on use

    return opened(name, device)


__all__ = [
    "Backend",
    "BackendInfo",
    "BackendUnavailable",
    "DeviceInfo",
    "DeviceOutOfMemory",
    "KernelCompileError",
    "Measurement",
    "UnsupportedParameter",
    "XBackendError",
    "__version__",
    "backend_names",
    "backends",
    "get_backend",
    "kernels_path",
]
