"""One runner of products for the compiled backends, and the device handle it runs on.

A ``LaunchExecution`` allocates a product's buffers, uploads its inputs, poisons its
output and workspaces, queues its steps in order, times them and downloads the
output. What differs between CUDA and OpenCL (allocating, copying, setting
arguments, queueing, the clock) is the ``Device`` handle each backend hands it.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from xbackend.backends.interface import Execution
from xbackend.backends.launch import OUTPUT, Product, Step

Array = np.ndarray[Any, Any]
Queued = Callable[[], Any]  # queues one step; returns its event, if the device has them
Timer = Callable[[Sequence[Queued]], float]  # queues the steps, waits, gives their seconds


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
    def download(self, target: Array, buffer: Any) -> None:
        """Copy a buffer into the host array ``target``, and wait for the copy."""

    @abc.abstractmethod
    def fill(self, targets: Sequence[tuple[Any, int]], dtype: np.dtype[Any]) -> None:
        """Poison the first ``nbytes`` of each buffer (see ``operands.poison_value``)."""

    @abc.abstractmethod
    def bind(
        self, step: Step, kernel: Any, buffers: Mapping[str, Any], dtype: np.dtype[Any]
    ) -> Queued:
        """A call that queues ``step`` (its compiled ``kernel``, None for a library call)
        on these buffers."""

    @abc.abstractmethod
    def timer(self, product: Product) -> Timer:
        """The clock of one execution of ``product``."""


class LaunchExecution(Execution):
    """A planned product on a device: its buffers, and its steps bound to them."""

    def __init__(self, device: Device, product: Product, kernels: Sequence[Any]):
        self._device = device
        self._inputs = product.inputs
        self._C = np.empty(product.output_shape, dtype=product.dtype)
        self._buffers: dict[str, Any] = {
            name: device.allocate(array.nbytes, "read") for name, array in self._inputs.items()
        }
        self._buffers[OUTPUT] = device.allocate(self._C.nbytes, "write")
        self._poisoned = [(self._buffers[OUTPUT], self._C.nbytes)]
        for name, nbytes in product.workspaces.items():
            self._buffers[name] = device.allocate(nbytes, "read_write")
            self._poisoned.append((self._buffers[name], nbytes))
        self._queued = [
            device.bind(step, kernel, self._buffers, product.dtype)
            for step, kernel in zip(product.steps, kernels, strict=True)
        ]
        self._timer = device.timer(product)
        self.tile, self.params = product.tile, product.params

    def upload(self) -> None:
        self._device.upload([(self._buffers[name], X) for name, X in self._inputs.items()])

    def poison(self) -> None:
        self._device.fill(self._poisoned, self._C.dtype)

    def run(self) -> float:
        return self._timer(self._queued)

    def download(self) -> Array:
        self._device.download(self._C, self._buffers[OUTPUT])
        return self._C.copy()

    def release(self) -> None:
        for buffer in self._buffers.values():
            self._device.free(buffer)
        self._buffers = {}
