"""What a device handle offers the code around an execution: its memory and its clock.

``execution.Device`` (CUDA's and OpenCL's handles) is one; the stamps of the device clock
(``stamps.py``) ask no more of it than this, so that neither module needs the other's
types.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

Array = np.ndarray[Any, Any]
Queued = Callable[[], Any]  # queues one step; returns its event, if the device has them


class Timer(Protocol):
    """The clock of one execution: queues the steps ``launches`` times back to back,
    waits, and gives the seconds from the first step's start to the last one's end."""

    # "globaltimer" (stamps.py), "cuda-events", "opencl-profiling", "opencl-markers", "host"
    clock: str
    gave_up: bool  # the last call could not hold the device until its work was queued

    def __call__(self, steps: Sequence[Queued], launches: int = 1) -> float: ...


class Memory(Protocol):
    """A device's buffers: made, filled from the host, read back, given back."""

    def allocate(self, nbytes: int, access: str) -> Any: ...

    def free(self, buffer: Any) -> None: ...

    def upload(self, copies: Sequence[tuple[Any, Array]]) -> None: ...

    def download(self, target: Array, buffer: Any, offset: int = 0) -> None: ...
