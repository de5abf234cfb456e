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

# NumPy's OpenBLAS keeps each idle thread spinning for 2^28 cycles (about 0.1 s) after a
# call. The float64 references and the CPU's points left a core's worth of spinning
# threads per core while GPU points were timed: on two H200s (32 cores) NVIDIA OpenCL's
# end-to-end times grew from 0.7 to 2.3 ms (median over points) and the default compare
# took 21 s from the first point to the last instead of 9 (docs/notebook/measurement.md). Set here,
# before NumPy loads OpenBLAS, the threads sleep as soon as they are idle; a value already
# set is kept, and every run header records it (machine.settings).
# OpenBLAS reads the variable once, as it loads: where NumPy (and so OpenBLAS) was imported
# before xbackend, as API users often do, the value set here is not in force, and the run
# header says so rather than record it as in force (machine.settings).
_BLAS_LOADED_FIRST = "numpy" in _sys.modules and "OPENBLAS_THREAD_TIMEOUT" not in _os.environ
_os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

# E402: after the handler above, which must be in place before these imports start.
from xbackend.backends import registry  # noqa: E402
from xbackend.backends.interface import Backend  # noqa: E402
from xbackend.backends.registry import backend_names, backends  # noqa: E402
from xbackend.backends.specs import BackendInfo, DeviceInfo, Measurement  # noqa: E402
from xbackend.errors import (  # noqa: E402
    BackendUnavailable,
    DeviceOutOfMemory,
    KernelCompileError,
    UnsupportedParameter,
    XBackendError,
)
from xbackend.resources import kernels_path  # noqa: E402


def get_backend(name: str, device: str | int | None = None) -> Backend:
    """Open backend ``name`` on ``device`` (an index or a piece of its name; default the
    first), with the tune cache's choices for its tuned variants.

    Raises ``BackendUnavailable`` with the reason if it cannot run here.
    """
    from xbackend.tuning.cache import cached_choices

    return registry.open_backend(name, device, choices=cached_choices())


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
