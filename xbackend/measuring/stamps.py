"""The device's own clock, read inside the kernels: spans, the API's time beside them,
and the gap between launches.

A kernel built with ``STAMP`` (kernels/*/stamp.h) has each group's first worker stamp
the GPU's ``%globaltimer`` as the group starts and as it ends, into a slot of a stamps
buffer: the slot's earliest entry and latest exit. A launch's span, exit less entry,
is its kernel time on the device with no launch cost in it: neither the runtime's
work before the first group starts nor the profiling that OpenCL's events add
(NVIDIA's: about 7 µs a launch on an H100, against 1 µs kernels).

The API's clock (CUDA events behind the hold, OpenCL profiling events) still times the
same launches: their difference is the launch overhead, a number of its own. In a
batch, each launch (and each step of a product of several kernels) has a slot of its
own, so a batch gives every launch's span and the gap between one launch's last exit
and the next one's first entry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from xbackend.errors import XBackendError
from xbackend.measuring.handles import Memory, Timer

CLOCK = "globaltimer"  # the clock name records give a stamped point's kernel time
_EMPTY_ENTRY = np.iinfo(np.uint64).max  # a slot before any group stamped it


class StampSlots:
    """The stamps buffer of one execution, and the slot its next launch writes."""

    def __init__(self, device: Memory):
        self._device = device
        self.buffer: Any = None
        self._capacity = 0
        self._next = 0

    def take(self) -> np.int32:
        """The slot of the launch being queued; the next launch gets the next one."""
        if self._next >= self._capacity:
            raise XBackendError(f"stamped launch {self._next + 1} has no slot: reset first")
        slot = self._next
        self._next += 1
        return np.int32(slot)

    def reset(self, slots: int) -> None:
        """Room for ``slots`` launches, each slot set to (max, 0); the next launch gets 0."""
        if slots > self._capacity:
            self.release()
            self.buffer = self._device.allocate(16 * slots, "read_write")
            self._capacity = slots
        empty = np.zeros((slots, 2), np.uint64)
        empty[:, 0] = _EMPTY_ENTRY
        self._device.upload([(self.buffer, empty)])
        self._next = 0

    def read(self, slots: int) -> np.ndarray[Any, Any]:
        """The first ``slots`` slots, as (entry, exit) nanoseconds."""
        stamps = np.empty((slots, 2), np.uint64)
        self._device.download(stamps, self.buffer)
        return stamps

    def release(self) -> None:
        if self.buffer is not None:
            self._device.free(self.buffer)
            self.buffer, self._capacity = None, 0


def spans(stamps: np.ndarray[Any, Any], launches: int) -> tuple[float, float | None]:
    """(the summed spans of every launch, the mean gap between launches) in seconds,
    from (entry, exit) slots in launch order, ``launches`` launches of equal steps.

    A launch of several kernels (a split's sums, rmm's pair sums) spans the sum of its
    kernels' spans: the gaps between them are launch costs too. A slot no group
    stamped, or one that ends before it starts, is an error: its kernel was not built
    to stamp, or the clock is broken.
    """
    entry, exit_ = stamps[:, 0], stamps[:, 1]
    if np.any(entry == _EMPTY_ENTRY) or np.any(exit_ == 0) or np.any(exit_ < entry):
        raise XBackendError(
            "a stamped kernel left its slot unstamped or ending before it starts: "
            f"entries {entry.tolist()[:4]}, exits {exit_.tolist()[:4]}"
        )
    per_step = (exit_ - entry).astype(np.int64).reshape(launches, -1)
    total = float(per_step.sum()) * 1e-9
    if launches < 2:
        return total, None
    firsts = entry.astype(np.int64).reshape(launches, -1)[1:, 0]
    lasts = exit_.astype(np.int64).reshape(launches, -1)[:-1, -1]
    return total, float(np.mean(firsts - lasts)) * 1e-9


class StampTimer:
    """Times launches by their stamps, with the API's clock (``api``) around them.

    After each call, ``api_s`` is the API's seconds per launch and ``gap_s`` the mean
    gap between launches on the device (None for a single launch).
    """

    clock = CLOCK

    def __init__(self, api: Timer, slots: StampSlots):
        self._api, self._slots = api, slots
        self.gave_up = False
        self.api_s: float | None = None
        self.gap_s: float | None = None

    def __call__(self, steps: Sequence[Callable[[], Any]], launches: int = 1) -> float:
        count = launches * len(steps)
        self._slots.reset(count)
        self.api_s = self._api(steps, launches) / launches
        self.gave_up = self._api.gave_up
        total, self.gap_s = spans(self._slots.read(count), launches)
        return total
