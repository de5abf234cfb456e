"""Building an OpenCL program and taking its kernels: through PyOpenCL's caches, and
without them where they fail.

PyOpenCL keeps two caches on disk: built binaries (``pyopencl/cache.py``) and the Python
code that sets a kernel's arguments (``pyopencl/invoker.py``, an SQLite file of pytools).
They are only caches (issue 54): where one cannot be written (a file size limit, a full
disk, a folder that cannot be made), pyopencl 2026.1 failed every build with
``KeyError: 'PYOPENCL_CACHE_FAILURE_FATAL'`` (its fallback reads that variable unset) and
every kernel with SQLite's "disk I/O error". Here such a build, or kernel, is done again
without the caches; where that succeeds, a cache was what failed: one
``ProgramCacheWarning`` says why, and the process goes on without them, as
``PYOPENCL_NO_CACHE=1`` would have. A kernel that does not compile fails the uncached
build too, with the compiler's error.
"""

from __future__ import annotations

import gc
import os
import re
import sys
import threading
import warnings
from typing import Any

try:
    import pyopencl as cl
except ImportError:  # pragma: no cover - pyopencl is a dependency; opencl.py says so
    cl = None  # type: ignore[assignment]


from xbackend.families.sources import HOOKS_PREFIX
from xbackend.resources import kernel_file


class ProgramCacheWarning(UserWarning):
    """PyOpenCL's caches failed; OpenCL programs are built without them."""


# Why PyOpenCL's caches failed in this process, or None while they work.
_cache_failure: str | None = None
_lock = threading.Lock()


def build(context: Any, source: str, options: list[str]) -> Any:
    """``source`` built for ``context`` with ``options``: through PyOpenCL's binary cache
    while it works, else without it. A compiler's error raises ``cl.Error``."""
    if _cache_failure is not None:
        return _uncached(context, source, options)
    try:
        return _cached(context, source, options)
    except cl.Error:
        raise  # the compiler's (or the driver's) own verdict
    except Exception as error:  # the cache's: a KeyError, an OSError, a torn file
        failure = error
    program = _uncached(context, source, options)  # a kernel that does not compile: here
    _caches_off(failure, "pyopencl")
    return program


def kernel(program: Any, name: str) -> Any:
    """The kernel ``name`` of ``program``; PyOpenCL's invoker cache (the first kernel
    creates it) is left off where it fails."""
    if _cache_failure is None:
        try:
            return cl.Kernel(program, name)
        except cl.Error:
            raise
        except Exception as error:  # SQLite's, or the disk's: the invoker cache
            _caches_off(error, "pytools")
            _drop_half_made(error)
    return cl.Kernel(program, name)


def _drop_half_made(error: BaseException) -> None:
    """Let go of the cache pytools failed to make (its frames hold it), where a failure
    to report is ignored: its ``__del__`` fails on what ``__init__`` never set, and
    Python would print that as an "Exception ignored" with a traceback."""
    hook = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: None
    try:
        seen: BaseException | None = error
        while seen is not None:
            seen.__traceback__, seen = None, seen.__cause__ or seen.__context__
        gc.collect()
    finally:
        sys.unraisablehook = hook


def _cached(context: Any, source: str, options: list[str]) -> Any:
    return cl.Program(context, source).build(options=options)


def _uncached(context: Any, source: str, options: list[str]) -> Any:
    # False: no binary cache (pyopencl/cache.py takes it; its hint says str).
    return cl.Program(context, source).build(options=options, cache_dir=False)  # type: ignore[arg-type]


def _caches_off(error: BaseException, folder: str) -> None:
    """Turn PyOpenCL's caches off for this process, and say why once: ``error``, raised
    from the cache in ``folder`` (of the user's cache folder) where it names no file."""
    global _cache_failure
    # The variable PYOPENCL_NO_CACHE as pyopencl read it at import: its builds and its
    # invoker read it at each call, so setting it turns both caches off from now on.
    if hasattr(cl, "_PYOPENCL_NO_CACHE"):
        cl._PYOPENCL_NO_CACHE = True
    with _lock:
        first, _cache_failure = _cache_failure is None, _why(error, folder)
    if first:
        warnings.warn(
            f"PyOpenCL's cache failed ({_cache_failure}); OpenCL programs are built without "
            "its caches in this process, each build taking the compiler's time "
            "(PYOPENCL_NO_CACHE=1 turns them off without this warning)",
            ProgramCacheWarning,
            stacklevel=3,
        )


def _why(error: BaseException, folder: str) -> str:
    """What failed in a cache: the error pyopencl's fallback raised its ``KeyError``
    over, with the path it names, or else the cache's folder."""
    seen: BaseException = error
    while isinstance(seen, KeyError) and (seen.__cause__ or seen.__context__) is not None:
        seen = seen.__cause__ or seen.__context__  # type: ignore[assignment]
    where = getattr(seen, "filename", None) or _folder(folder)
    if isinstance(seen, KeyError):  # pyopencl's own, over nothing: say what it means
        return f"{where}: its write failed"
    said = seen.strerror if isinstance(seen, OSError) and seen.strerror else str(seen)
    return f"{where}: {said or 'its write failed'}"


def _folder(name: str) -> str:
    """The folder PyOpenCL (``pyopencl``) or pytools keeps its cache in, as they find it."""
    home = os.environ.get("XDG_CACHE_HOME")
    if home and os.path.isabs(home):
        return os.path.join(home, name)
    return os.path.join(os.path.expanduser("~"), ".cache", name)


# Whether each device's compiler honours ``#line`` (kernels/opencl/line_probe.h), once asked.
_numbers_by_line: dict[Any, bool] = {}
_PROBED_LINE = 1000  # the line line_probe.h's error is on where #line is honoured
# A line a compiler's log names: "<kernel>:13:15: error: ..." (NVIDIA's), "1:13:15: error".
_LOG_LINE = re.compile(r"(?<=:)(\d+)(?=:\d+: (?:fatal )?(?:error|warning|note))")


def file_lines(context: Any, source: str, log: str) -> str:
    """A failed build's ``log`` with its lines numbered as the kernel file's: where
    ``source`` opens with a stamped build's own lines (``HOOKS_PREFIX``) and the
    device's compiler numbers the lines it was given rather than as ``#line`` says."""
    if not source.startswith(HOOKS_PREFIX) or _honours_line(context):
        return log
    added = HOOKS_PREFIX.count("\n")
    return _LOG_LINE.sub(lambda m: str(max(int(m.group(1)) - added, 1)), log)


def _honours_line(context: Any) -> bool:
    device = context.devices[0]
    key = (device.platform.name, device.name, device.driver_version)
    if key not in _numbers_by_line:
        probe = kernel_file("opencl", "line_probe.h").read_text(encoding="utf-8")
        try:
            _uncached(context, probe, [])
            log = ""
        except cl.Error as error:
            log = str(error)
        _numbers_by_line[key] = f":{_PROBED_LINE}:" in log or not log
    return _numbers_by_line[key]
