"""Where the kernel files are, installed or in a source checkout."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

# A folder with cuda/ and opencl/ kernel files to use instead of the shipped ones
# (each file it lacks comes from the shipped ones): for trying an edited kernel
# without reinstalling, and for the tests' broken kernels.
KERNELS_ENV = "XBACKEND_KERNELS"


def kernels_path() -> Path:
    """The folder holding ``cuda/`` and ``opencl/`` kernel sources.

    An installed wheel carries them as the package ``xbackend.kernels``; a source
    checkout run with ``PYTHONPATH`` has them in ``kernels/`` at the top level.
    ``XBACKEND_KERNELS`` overrides both.
    """
    override = os.environ.get(KERNELS_ENV)
    if override:
        return Path(override)
    return shipped_kernels_path()


def kernel_file(language: str, name: str) -> Path:
    """The source of one kernel file, e.g. ``kernel_file("cuda", "mm.cu")``: from the
    ``XBACKEND_KERNELS`` folder where it has that file, else the shipped one."""
    chosen = kernels_path() / language / name
    return chosen if chosen.exists() else shipped_kernels_path() / language / name


def shipped_kernels_path() -> Path:
    """The kernel folder of the installed package or source checkout."""
    spec = importlib.util.find_spec("xbackend.kernels")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(__file__).resolve().parent.parent / "kernels"
