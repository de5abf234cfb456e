"""Where the kernel files are, installed or in a source checkout."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def kernels_path() -> Path:
    """The folder holding ``cuda/`` and ``opencl/`` kernel sources.

    An installed wheel carries them as the package ``xbackend.kernels``; a source
    checkout run with ``PYTHONPATH`` has them in ``kernels/`` at the top level.
    """
    spec = importlib.util.find_spec("xbackend.kernels")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(__file__).resolve().parent.parent / "kernels"
