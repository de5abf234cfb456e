"""The machine and software a run happens on, for the results' run header: versions, the
commit, the host's load, the settings that change what a time measures, and the kernel
families' digests."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from xbackend.machine import BLAS_LOADED_FIRST, cpu_name
from xbackend.measuring import host_load
from xbackend.version import VERSION


def _git_commit() -> dict[str, Any]:
    """The commit of the source tree xbackend runs from, if it is a git checkout."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return {}
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"git_commit": commit, "git_dirty": bool(dirty)}


def _version_of(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def environment() -> dict[str, Any]:
    """The machine and software a run happened on."""
    packages = ("numpy", "pyopencl", "pycuda", "matplotlib", "intel-opencl-rt")
    return {
        "xbackend": VERSION,
        **_git_commit(),
        "host": platform.node(),
        "os": platform.platform(),
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "host_load": host_load.header(),
        "python": sys.version.split()[0],
        "packages": {name: _version_of(name) for name in packages if _version_of(name)},
        "command": _command(),
        "settings": settings(),
        "kernels": _kernels(),
    }


def _kernels() -> dict[str, dict[str, str]]:
    """The kernel families, with digests; a manifest that cannot be read is said."""
    from xbackend import families  # the manifests are read when a run starts, not before
    from xbackend.errors import XBackendError

    try:
        return families.provenance()
    except XBackendError as error:
        return {"error": {"folder": str(error), "digest": ""}}


# Variables outside xbackend's that change what a time measures: the BLAS's threads (how
# many, and how long an idle one spins; machine.py sets the spin).
MEASURING = (
    "OPENBLAS_THREAD_TIMEOUT",
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
)


def settings() -> dict[str, str]:
    """The ``XBACKEND_*`` environment variables set for this run, and those of
    ``MEASURING``: each can change what a run does (a tune cache, build options, required
    backends) or measures (the BLAS's threads), so the record keeps them."""
    found = {
        name: value
        for name, value in sorted(os.environ.items())
        if name.startswith("XBACKEND_") or name in MEASURING
    }
    if BLAS_LOADED_FIRST and "OPENBLAS_THREAD_TIMEOUT" in found:
        found["OPENBLAS_THREAD_TIMEOUT"] += (
            " (not in force: NumPy loaded OpenBLAS before xbackend set it)"
        )
    return found


def _command() -> str:
    """The command line as typed: ``python -m xbackend ...`` rather than a path to __main__."""
    argv = list(sys.argv)
    if argv and Path(argv[0]).name == "__main__.py" and Path(argv[0]).parent.name == "xbackend":
        argv[0] = "python -m xbackend"
    return " ".join(argv)
