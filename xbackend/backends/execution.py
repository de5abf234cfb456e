"""One runner of products for the compiled backends, and the device handle it runs on.

A ``LaunchExecution`` allocates a product's buffers, uploads its inputs, poisons its
output and workspaces, queues its steps in order, times them and downloads the
output. What differs between CUDA and OpenCL (allocating, copying, setting
arguments, queueing, the clock) is the ``Device`` handle each backend hands it.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from xbackend.backends.interface import Execution
from xbackend.errors import UnsupportedParameter, XBackendError
from xbackend.launches.launch import OUTPUT, LibraryCall, Product, Step
from xbackend.launches.operands import FINITE_POISON_WORD, finite_poison, poison_value
from xbackend.measuring.handles import Queued, Timer
from xbackend.measuring.launched import Launched
from xbackend.measuring.stamps import StampSlots, StampTimer

Array = np.ndarray[Any, Any]


class Device(abc.ABC):
    """What an execution needs of its device: memory, copies, steps and a clock."""

    @abc.abstractmethod
    def allocate(self, nbytes: int, access: str) -> Any:
        """A buffer of ``nbytes``; ``access`` is how kernels use it: "read" (an input),
        "write" (the output) or "read_write" (a workspace)."""

    @abc.abstractmethod
    def free(self, buffer: Any) -> None:
        """Give a buffer back."""

    @abc.abstractmethod
    def upload(self, copies: Sequence[tuple[Any, Array]]) -> None:
        """Copy each host array into its buffer, and wait for the copies."""

    @abc.abstractmethod
    def download(self, target: Array, buffer: Any, offset: int = 0) -> None:
        """Copy a buffer, from ``offset`` bytes in, into the host array ``target``, and
        wait for the copy."""

    @abc.abstractmethod
    def fill(self, targets: Sequence[tuple[Any, int]], dtype: np.dtype[Any]) -> None:
        """Poison the first ``nbytes`` of each buffer (see ``operands.poison_value``)."""

    @abc.abstractmethod
    def bind(
        self,
        step: Step,
        kernel: Any,
        buffers: Mapping[str, Any],
        dtype: np.dtype[Any],
        stamps: StampSlots | None = None,
    ) -> Queued:
        """A call that queues ``step`` (its compiled ``kernel``, None for a library call)
        on these buffers; a stamped kernel's also gets ``stamps``' buffer and next slot."""

    @abc.abstractmethod
    def timer(self, product: Product) -> Timer:
        """The clock of one execution of ``product``."""

    def flush_cache(self) -> None:
        """Evict the device's last-level cache (write a buffer larger than it) and wait."""
        raise UnsupportedParameter(f"{type(self).__name__} cannot flush its cache")

    def pinned(self, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Array:
        """A host array in page-locked memory, for ``--host-memory pinned``."""
        raise UnsupportedParameter(f"{type(self).__name__} has no page-locked host memory")

    def unpin(self, array: Array) -> None:  # noqa: B027 - nothing to give back by default
        """Give back an array made by ``pinned``."""

    def launched(self, work: Callable[[], object]) -> Launched | str:
        """The kernels ``work`` launched here, as the device's tracer saw them (CUDA:
        CUPTI, ``measuring/launched.py``), or why none could be recorded."""
        return "not recorded: no tracer of launched kernels on this device"


RED_ZONE_ENV = "XBACKEND_RED_ZONE"  # set (``check`` does): C gets a zone past its end


class WroteOutOfBounds(XBackendError):
    """A kernel wrote into the poisoned zone past the end of C (``RED_ZONE_ENV``)."""


def red_zone(elements: int) -> int:
    """The elements past C's end to poison and check: as many as C has (at least 4096),
    which holds every write of a kernel that skips its bounds guard (a launch rounds M
    and N up to a tile: it writes at most a tile of rows past the end); none unless
    ``RED_ZONE_ENV`` is set (to anything but 0)."""
    return max(4096, elements) if os.environ.get(RED_ZONE_ENV, "") not in ("", "0") else 0


def fill_word(dtype: np.dtype[Any], nan_word: int) -> int:
    """The 32-bit word a device that fills 32 bits at a time (cuMemsetD32) poisons an
    output of ``dtype`` with: ``nan_word`` for floats (the finite poison's word in
    ``check``'s second run: ``operands.finite_poison``), the most negative int else."""
    if dtype.kind != "f":
        return 0x80000000
    return FINITE_POISON_WORD if finite_poison() else nan_word


def clock_of(device: Device, product: Product) -> str:
    """The clock an execution of ``product`` on ``device`` is timed by: its kernels' stamps
    where it is stamped (``LaunchExecution`` then wraps the device's timer in a
    ``StampTimer``), else the device's timer."""
    return StampTimer.clock if product.stamped else device.timer(product).clock


class LaunchExecution(Execution):
    """A planned product on a device: its buffers, and its steps bound to them."""

    def __init__(self, device: Device, product: Product, kernels: Sequence[Any]):
        self._device = device
        self._inputs = product.inputs
        self._C = np.empty(product.output_shape, dtype=product.dtype)
        self._buffers: dict[str, Any] = {
            name: device.allocate(array.nbytes, "read") for name, array in self._inputs.items()
        }
        # Read-write, as a kernel declares C (``float *C``): one that reads it reads the
        # poison, not memory a sanitizer calls invalid. Past its end, where asked, a zone
        # poisoned too: an element written there is a write out of bounds.
        self._zone = red_zone(self._C.size)
        nbytes = self._C.nbytes + self._zone * self._C.itemsize
        self._buffers[OUTPUT] = device.allocate(nbytes, "read_write")
        self._poisoned = [(self._buffers[OUTPUT], nbytes)]
        for name, nbytes in product.workspaces.items():
            self._buffers[name] = device.allocate(nbytes, "read_write")
            self._poisoned.append((self._buffers[name], nbytes))
        # A stamped product's kernels time themselves (stamps.py), the API's clock beside.
        self._stamps = StampSlots(device) if product.stamped else None
        self._calls_library = any(isinstance(step, LibraryCall) for step in product.steps)
        self._queued = [
            device.bind(step, kernel, self._buffers, product.dtype, self._stamps)
            for step, kernel in zip(product.steps, kernels, strict=True)
        ]
        self._timer: Timer = device.timer(product)
        if self._stamps is not None:
            self._timer = StampTimer(self._timer, self._stamps)
        self._pinned: list[Array] = []
        self.tile, self.params = product.tile, product.params
        self.clock = self._timer.clock
        self._turned = product.output_turned

    def use_host_memory(self, kind: str) -> str:
        if kind == "pinned" and not self._pinned:
            inputs = {}
            for name, X in self._inputs.items():
                inputs[name] = self._device.pinned(X.shape, X.dtype)
                self._pinned.append(inputs[name])
                np.copyto(inputs[name], X)
            self._inputs = inputs
            self._C = self._device.pinned(self._C.shape, self._C.dtype)
            self._pinned.append(self._C)
        return "pinned" if self._pinned else super().use_host_memory(kind)

    def upload(self) -> None:
        self._device.upload([(self._buffers[name], X) for name, X in self._inputs.items()])

    def poison(self) -> None:
        self._device.fill(self._poisoned, self._C.dtype)

    def run(self) -> float:
        return self._timed(1)

    def run_batch(self, launches: int) -> float:
        return self._timed(launches)

    def _timed(self, launches: int) -> float:
        """Run the steps ``launches`` times; where the kernels stamp, keep what the API's
        clock and the gaps between launches said of the same run (``api_s``, ``gap_s``)."""
        seconds = self._timer(self._queued, launches)
        if isinstance(self._timer, StampTimer):
            self.api_s, self.gap_s = self._timer.api_s, self._timer.gap_s
        return seconds

    @property
    def run_mark(self) -> str:
        return "hold" if self._timer.gave_up else ""

    def flush_cache(self) -> None:
        self._device.flush_cache()

    def vendor_kernels(self) -> Launched | str | None:
        return self._device.launched(self.run) if self._calls_library else None

    def download(self) -> Array:
        self._device.download(self._C, self._buffers[OUTPUT])
        if self._zone:
            self._check_zone()
        return np.swapaxes(self._C, -1, -2) if self._turned else self._C

    def _check_zone(self) -> None:
        """Raise ``WroteOutOfBounds`` where the kernel wrote past the end of C."""
        zone = np.empty(self._zone, dtype=self._C.dtype)
        self._device.download(zone, self._buffers[OUTPUT], self._C.nbytes)
        poison = poison_value(self._C.dtype)
        kept = np.isnan(zone) if np.isnan(poison) else zone == poison
        written = np.flatnonzero(~kept)
        if written.size:
            raise WroteOutOfBounds(
                f"the kernel wrote {written.size} elements past the end of C (of "
                f"{self._C.size}), the first at C[{self._C.size + int(written[0])}]"
            )

    def release(self) -> None:
        for buffer in self._buffers.values():
            self._device.free(buffer)
        self._buffers = {}
        if self._stamps is not None:
            self._stamps.release()
        for array in self._pinned:
            self._device.unpin(array)
        self._pinned = []
