"""Which BLAS NumPy itself is linked against, so that the CPU backend's ``vendor``
numbers can be labelled."""

from __future__ import annotations

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
