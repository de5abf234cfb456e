"""The CPU backend: NumPy on the host, as the baseline the devices are measured against.

* ``naive``: the serial textbook loop; each output element is the dot product
  of one row of A and one column of B, one element after another.
* ``tiled``: the same product with cache blocking. C is computed one
  TILE×TILE block at a time, accumulating over TILE-wide slabs of K, so the
  three blocks in use stay in cache. Each block product is a NumPy broadcast
  multiply-and-sum (no BLAS), one thread.
* ``blas``: NumPy's own ``matmul``, i.e. the BLAS NumPy was built with, on as
  many threads as it likes: the vendor line on the figures.

"Upload" and "download" are copies between the caller's arrays and the
backend's working arrays, so end-to-end times include the same kind of
data movement as on a device, only much cheaper.
"""

from __future__ import annotations

import os
import platform
import time
from typing import ClassVar

import numpy as np

from xbackend.backends.base import Backend, DeviceInfo, Execution, VariantSpec, VariantTable


def cpu_name() -> str:
    """The processor's model name, as the OS reports it."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _naive(A: np.ndarray, B: np.ndarray, C: np.ndarray) -> None:
    M, N = C.shape
    for row in range(M):
        a_row = A[row]
        for col in range(N):
            C[row, col] = np.dot(a_row, B[:, col])


def _tiled(A: np.ndarray, B: np.ndarray, C: np.ndarray, tile: int) -> None:
    M, K = A.shape
    N = B.shape[1]
    for i0 in range(0, M, tile):
        for j0 in range(0, N, tile):
            acc = np.zeros((min(tile, M - i0), min(tile, N - j0)), dtype=C.dtype)
            for k0 in range(0, K, tile):
                a_block = A[i0 : i0 + tile, k0 : k0 + tile]
                b_block = B[k0 : k0 + tile, j0 : j0 + tile]
                # (i, k, 1) * (1, k, j) summed over k: a block product without BLAS.
                acc += (a_block[:, :, None] * b_block[None, :, :]).sum(axis=1)
            C[i0 : i0 + tile, j0 : j0 + tile] = acc


class _HostExecution(Execution):
    def __init__(self, variant: str, tile: int | None, A: np.ndarray, B: np.ndarray):
        self._variant = variant
        self._tile = tile
        self._source = (A, B)
        self._A = np.empty_like(A)
        self._B = np.empty_like(B)
        self._C = np.empty((A.shape[0], B.shape[1]), dtype=A.dtype)

    def upload(self) -> None:
        np.copyto(self._A, self._source[0])
        np.copyto(self._B, self._source[1])

    def poison(self) -> None:
        self._C.fill(np.nan)

    def run(self) -> float:
        # Like a device kernel, and unlike NumPy, NaN and Inf pass through without warnings.
        with np.errstate(all="ignore"):
            start = time.perf_counter()
            if self._variant == "naive":
                _naive(self._A, self._B, self._C)
            elif self._variant == "tiled":
                assert self._tile is not None
                _tiled(self._A, self._B, self._C, self._tile)
            else:
                np.matmul(self._A, self._B, out=self._C)
            return time.perf_counter() - start

    def download(self) -> np.ndarray:
        return self._C.copy()


class CpuBackend(Backend):
    name = "cpu"
    description = "NumPy on the host: serial loop, cache-blocked tiles, and NumPy's BLAS"
    VARIANTS: ClassVar[VariantTable] = {
        "mm": {
            "naive": VariantSpec("naive", "serial loop, one dot product per output element"),
            "tiled": VariantSpec(
                "tiled",
                "cache blocking over TILE×TILE blocks, NumPy block products, one thread",
                tiles=(16, 32, 64, 128),
                default_tile=64,
            ),
            "blas": VariantSpec("blas", "numpy.matmul (NumPy's BLAS, multithreaded)"),
        }
    }

    def __init__(self, device: str | int | None = None):
        if device not in (None, 0, "0", "cpu"):
            raise ValueError(f"the cpu backend has one device, 0; got {device!r}")
        self._device = self.list_devices()[0]

    @classmethod
    def available(cls) -> tuple[bool, str]:
        return True, ""

    @classmethod
    def list_devices(cls) -> list[DeviceInfo]:
        return [
            DeviceInfo(
                name=cpu_name(),
                vendor=platform.machine(),
                kind="cpu",
                platform="NumPy",
                runtime_version=np.__version__,
                compute_units=os.cpu_count(),
                extra={"blas": _blas_name()},
            )
        ]

    @property
    def device(self) -> DeviceInfo:
        return self._device

    def _execution(self, variant: str, tile: int | None, A: np.ndarray, B: np.ndarray) -> Execution:
        return _HostExecution(variant, tile, A, B)


def _blas_name() -> str:
    """The BLAS library NumPy uses, as far as NumPy says."""
    try:
        config = np.show_config(mode="dicts")
        blas = config["Build Dependencies"]["blas"]
        return f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except Exception:
        return "unknown"
