"""An example third-party backend: NumPy's ``matmul`` behind xbackend's plugin interface.

A backend names its variants per operation, says whether it can run here, describes
its devices, and hands out one ``Execution`` per product: upload, poison, run,
download. xbackend checks operands, times, verifies and records.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from xbackend.backends.interface import Backend, Execution
from xbackend.backends.operands import poison_value
from xbackend.backends.specs import DeviceInfo, VariantSpec, VariantTable
from xbackend.operations import operation

Array = np.ndarray[Any, Any]


def reduced_matmul(A: Array, B: Array) -> Array:
    """rmm: rows of A and columns of B summed in pairs, then one product."""
    product: Array = np.matmul(A[..., 0::2, :] + A[..., 1::2, :], B[..., 0::2] + B[..., 1::2])
    return product


class NumpyExecution(Execution):
    """One product on host arrays: "upload" copies the operands into working arrays."""

    def __init__(self, op: str, A: Array, B: Array):
        self._reduced = operation(op).reduced
        self._source = (A, B)
        self._A, self._B = np.empty(A.shape, A.dtype), np.empty(B.shape, B.dtype)
        self._C = np.empty(operation(op).output_shape(A, B), A.dtype)

    def upload(self) -> None:
        np.copyto(self._A, self._source[0])
        np.copyto(self._B, self._source[1])

    def poison(self) -> None:
        self._C.fill(poison_value(self._C.dtype))

    def run(self) -> float:
        start = time.perf_counter()
        product = reduced_matmul if self._reduced else np.matmul
        self._C[...] = product(self._A, self._B)
        return time.perf_counter() - start

    def download(self) -> Array:
        return self._C.copy()


class NumpyBackend(Backend):
    name = "numpy"
    description = "an example plugin: numpy.matmul"
    _ONE: ClassVar[dict[str, VariantSpec]] = {"blas": VariantSpec("blas", "numpy.matmul")}
    VARIANTS: ClassVar[VariantTable] = {"mm": _ONE, "bmm": _ONE, "rmm": _ONE}

    def __init__(self, device: str | int | None = None):
        if device not in (None, 0, "0"):
            raise ValueError(f"the numpy backend has one device, 0; got {device!r}")

    @classmethod
    def available(cls) -> tuple[bool, str]:
        return True, ""

    @classmethod
    def list_devices(cls) -> list[DeviceInfo]:
        return [DeviceInfo(name="host", vendor="", kind="cpu", platform="NumPy")]

    @property
    def device(self) -> DeviceInfo:
        return self.list_devices()[0]

    def _execution(
        self,
        op: str,
        variant: str,
        tile: int | None,
        A: Array,
        B: Array,
        params: Mapping[str, int] | None = None,
    ) -> Execution:
        return NumpyExecution(op, A, B)
