"""The CPU backend: NumPy on the host, as the baseline the devices are measured against.

* ``naive``: the serial textbook loop; each output element is the dot product
  of one row of A and one column of B, one element after another.
* ``tiled``: the same product with cache blocking. C is computed one
  TILE×TILE block at a time, accumulating over TILE-wide slabs of K, so the
  three blocks in use stay in cache. Each block product is a NumPy broadcast
  multiply-and-sum (no BLAS), one thread.
* ``vendor``: NumPy's own ``matmul``, i.e. the BLAS NumPy was built with, on as
  many threads as the host leaves it (``host_load.cores_left``, held with threadpoolctl,
  recorded per point as ``host_load.blas_threads``): the vendor line on the figures
  (integers go through NumPy's own loops: BLAS has no integer products).

``bmm`` runs the same three on each product of the batch in turn. ``rmm`` has
the serial version, ``naive`` (each element from a pair-summed row and column),
and ``vendor``: the pairs summed first, then one half-size ``matmul``.

"Upload" and "download" are copies between the caller's arrays and the
backend's working arrays, so end-to-end times include the same kind of
data movement as on a device, only much cheaper.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import ClassVar

import numpy as np

from xbackend.backends.ceilings import (
    FLOAT_DTYPES,
    Ceilings,
    extended,
    host_compute_ceiling,
    host_copy_ceiling,
)
from xbackend.backends.interface import Backend, Execution
from xbackend.backends.numpy_blas import BlasThreads, blas_threads, numpy_blas_name
from xbackend.launches.operands import poison_value
from xbackend.launches.specs import DeviceInfo, VariantSpec, VariantTable
from xbackend.machine import cpu_name
from xbackend.measuring.host_load import cores_left
from xbackend.operations import operation


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


def _reduced_naive(A: np.ndarray, B: np.ndarray, C: np.ndarray) -> None:
    rows, columns = C.shape
    for row in range(rows):
        a_pair = A[2 * row] + A[2 * row + 1]
        for col in range(columns):
            C[row, col] = np.dot(a_pair, B[:, 2 * col] + B[:, 2 * col + 1])


def _reduced_blas(A: np.ndarray, B: np.ndarray, C: np.ndarray) -> None:
    np.matmul(A[0::2] + A[1::2], B[:, 0::2] + B[:, 1::2], out=C)


def _compute(variant: str, tile: int | None, A: np.ndarray, B: np.ndarray, C: np.ndarray) -> None:
    if variant == "naive":
        _naive(A, B, C)
    elif variant == "tiled":
        assert tile is not None
        _tiled(A, B, C, tile)
    else:
        np.matmul(A, B, out=C)


_FLUSH_FLOOR_BYTES = 64 * 2**20
_flush_buffer: list[np.ndarray] = []


def _flush_host_cache() -> None:
    """Write a buffer four times the last-level cache (at least 64 MiB), made once."""
    if not _flush_buffer:
        nbytes = max(4 * (last_level_cache_bytes() or 0), _FLUSH_FLOOR_BYTES)
        _flush_buffer.append(np.empty(nbytes // 8, np.float64))
    _flush_buffer[0].fill(1.0)


def last_level_cache_bytes() -> int | None:
    """The largest cache of CPU 0, as Linux describes it (None elsewhere)."""
    largest = 0
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            largest = max(largest, int(digits) * scale)
    return largest or None


def _clock() -> dict[str, float]:
    """The CPU's highest clock in MHz, where Linux says (for the peak, peaks.py)."""
    path = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    try:
        return {"clock_mhz": int(path.read_text()) / 1000}
    except (OSError, ValueError):
        return {}


class _HostExecution(Execution):
    def __init__(self, op: str, variant: str, tile: int | None, A: np.ndarray, B: np.ndarray):
        self._op = operation(op)
        self._variant = variant
        self._tile = tile
        self._source = (A, B)
        self._A = np.empty(A.shape, A.dtype)  # C order, whatever the caller's layout
        self._B = np.empty(B.shape, B.dtype)
        self._C = np.empty(self._op.output_shape(A, B), dtype=A.dtype)
        # The BLAS on the cores the host leaves it (issue 53): OpenBLAS's two threads beside
        # another job on two cores waited at each barrier for the core the job held, and the
        # vendor line stepped 1000× (9 µs at 80×70, 8 ms at 96×84). Recorded per point.
        self._blas = BlasThreads(cores_left()) if variant == "vendor" else None
        self.blas_threads = None if self._blas is None else self._blas.threads

    def upload(self) -> None:
        np.copyto(self._A, self._source[0])
        np.copyto(self._B, self._source[1])

    def poison(self) -> None:
        self._C.fill(poison_value(self._C.dtype))

    def run(self) -> float:
        # Like a device kernel, and unlike NumPy, NaN and Inf pass through without warnings.
        with np.errstate(all="ignore"):
            start = time.perf_counter()
            if self._op.batched:
                for A, B, C in zip(self._A, self._B, self._C, strict=True):
                    _compute(self._variant, self._tile, A, B, C)
            elif self._op.reduced:
                reduced = _reduced_naive if self._variant == "naive" else _reduced_blas
                reduced(self._A, self._B, self._C)
            else:
                _compute(self._variant, self._tile, self._A, self._B, self._C)
            return time.perf_counter() - start

    def download(self) -> np.ndarray:
        return self._C

    def flush_cache(self) -> None:
        _flush_host_cache()

    def use_host_memory(self, kind: str) -> str:
        return ""  # nothing crosses a bus: the "transfers" are copies in host memory

    def release(self) -> None:
        if self._blas is not None:
            self._blas.restore()


class CpuBackend(Backend):
    name = "cpu"
    description = "NumPy on the host: serial loop, cache-blocked tiles, and NumPy's BLAS"
    _MM: ClassVar[dict[str, VariantSpec]] = {
        "naive": VariantSpec("naive", "serial loop, one dot product per output element"),
        "tiled": VariantSpec(
            "tiled",
            "cache blocking over TILE×TILE blocks, NumPy block products, one thread",
            tiles=(16, 32, 64, 128),
            default_tile=64,
        ),
        "vendor": VariantSpec("vendor", "numpy.matmul: the BLAS NumPy is built with"),
    }
    VARIANTS: ClassVar[VariantTable] = {
        "mm": _MM,
        "bmm": _MM,
        "rmm": {
            "naive": VariantSpec("naive", "serial loop over pair-summed rows and columns"),
            "vendor": VariantSpec("vendor", "pairs summed, then one half-size numpy.matmul"),
        },
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
                cache_bytes=last_level_cache_bytes(),
                extra={"blas": numpy_blas_name(), **blas_threads(), **_clock()},
            )
        ]

    @property
    def device(self) -> DeviceInfo:
        return self._device

    _measured: Ceilings | None = None

    def ceilings(self, dtypes: Iterable[str] = ("float32",)) -> Ceilings:
        """The host's ceilings through NumPy (``ceilings.py``): its BLAS on a large
        product per float dtype, ``np.copyto`` for the bandwidth; measured once, kept."""
        self._measured = extended(
            self._measured,
            [dtype for dtype in dtypes if dtype in FLOAT_DTYPES],
            lambda dtype: host_compute_ceiling(self.device, dtype),
            lambda: host_copy_ceiling(self.device),
        )
        return self._measured

    def _uploaded_nbytes(self, X: np.ndarray, op: str) -> int:
        return X.nbytes  # every operand is copied into a compact working array

    def _execution(
        self,
        op: str,
        variant: str,
        tile: int | None,
        A: np.ndarray,
        B: np.ndarray,
        params: Mapping[str, int] | None = None,
    ) -> Execution:
        return _HostExecution(op, variant, tile, A, B)
