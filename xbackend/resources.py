"""Where xbackend's files are: the kernel files (installed or in a source checkout) and
the user's cache folder."""

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


def user_cache_dir() -> Path:
    """xbackend's folder in the user's cache: ``$XDG_CACHE_HOME/xbackend``.

    An unset, empty or relative ``XDG_CACHE_HOME`` means ``~/.cache``, as the XDG
    base directory specification says (a relative path is to be ignored): an empty
    one must not put an ``xbackend`` folder into whatever the current directory is.
    """
    chosen = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(chosen) if chosen and os.path.isabs(chosen) else Path.home() / ".cache"
    return base / "xbackend"
