"""Which BLAS NumPy itself is linked against, so that the CPU backend's ``vendor``
numbers can be labelled."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np


def numpy_blas_name() -> str:
    """A short name for the BLAS NumPy was built against, e.g. 'scipy-openblas 0.3.27'."""
    fallback = "NumPy's BLAS"
    show_config: Callable[..., Any] = np.show_config
    try:
        # mode="dicts" (NumPy >= 1.25) returns the build configuration without printing.
        config = show_config(mode="dicts")
        blas = config["Build Dependencies"]["blas"]
    except Exception:  # older NumPy, or a build without this record: a label is all we need
        return fallback
    name = str(blas.get("name") or "").strip()
    if not name or blas.get("found") is False:
        return fallback
    version = str(blas.get("version") or "").strip()
    return f"{name} {version}" if version and version != "unknown" else name


class BlasThreads:
    """NumPy's BLAS held to ``threads`` threads (threadpoolctl) until :meth:`restore`; where
    threadpoolctl or a BLAS it knows is missing, nothing is held and ``threads`` is None."""

    def __init__(self, threads: int) -> None:
        self.threads: int | None = None
        self._limiter: Any = None
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            return
        controller = ThreadpoolController().select(user_api="blas")
        if controller.lib_controllers:
            self._limiter = controller.limit(limits=threads)
            self.threads = threads

    def restore(self) -> None:
        if self._limiter is not None:
            self._limiter.restore_original_limits()
            self._limiter = None


_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def blas_threads() -> dict[str, Any]:
    """How many threads NumPy's BLAS runs on (threadpoolctl, where installed) and the
    variables that set it, for the CPU backend's device record."""
    found: dict[str, Any] = {
        name: os.environ[name] for name in _THREAD_VARIABLES if name in os.environ
    }
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return found
    pools = [pool for pool in threadpool_info() if pool.get("user_api") == "blas"]
    if pools:
        found["blas_threads"] = int(pools[0].get("num_threads", 0))
        found["blas_library"] = f"{pools[0].get('internal_api', '')} {pools[0].get('version', '')}"
    return found
