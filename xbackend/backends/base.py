"""The backend plugin interface, its error types and the registry of backends.

A backend turns NumPy operands into a product computed on some device. It is
split in two layers:

* ``Backend`` (this module) checks operands and parameters, and runs the one
  measurement loop that every backend shares (upload, kernel, download, timed
  with the device's own clock), so that numbers from different backends mean
  the same thing;
* each backend supplies an ``Execution``: buffers for one product on its
  device, with the primitive steps (upload, poison, run, download).

Backends are found through one registry, ``BUILTIN``, plus the entry-point
group ``xbackend.backends`` for third-party packages. A backend's module is
imported only when first asked for, and no driver starts at import time.
"""

from __future__ import annotations

import abc
import dataclasses
import importlib
import numbers
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from xbackend.backends import warp
from xbackend.errors import (
    BackendUnavailable,
    DeviceOutOfMemory,
    UnsupportedParameter,
    XBackendError,
)
from xbackend.problems import DTYPES, OPS
from xbackend.resources import kernel_file

# -- descriptions ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DeviceInfo:
    """What a results file needs to know about the device a number came from."""

    name: str
    vendor: str = ""
    kind: str = ""  # "gpu", "cpu", "accelerator"
    platform: str = ""
    driver_version: str = ""
    runtime_version: str = ""
    global_mem_bytes: int | None = None
    max_alloc_bytes: int | None = None  # largest single buffer, where the API says
    compute_units: int | None = None
    local_mem_bytes: int | None = None  # shared memory per block / local memory
    cache_bytes: int | None = None
    max_work_group_size: int | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class BackendInfo:
    """One line of ``xbackend.backends()``."""

    name: str
    available: bool
    reason: str
    devices: list[DeviceInfo]


@dataclasses.dataclass(frozen=True)
class VariantSpec:
    """One way of computing an operation on a backend."""

    name: str
    description: str
    kernel: str = ""  # kernel function name, for compiled backends
    tiles: tuple[int, ...] = ()  # tile sizes to consider; empty: takes no tile
    default_tile: int | None = None
    family: str = ""  # kernel file, where not the operation's own (mm, rmm)
    # Outputs per thread (TM rows, TN columns) for a tile; None: one output per thread.
    microtile: Callable[[int], tuple[int, int]] | None = None
    defines: tuple[str, ...] = ()  # extra -D macros that select the variant in its file
    # mm_warp only: "block" (the whole block is one group) or "warp" (warp tiles).
    layout: str = ""

    def per_thread(self, tile: int) -> tuple[int, int]:
        """(TM, TN): the patch of C each thread computes at this tile."""
        return self.microtile(tile) if self.microtile else (1, 1)

    @property
    def takes_tile(self) -> bool:
        return bool(self.tiles)

    @property
    def tuned(self) -> bool:
        """Whether the launch parameters follow the shape (and ``xbackend tune``):
        asked for no tile, the variant picks its own per product."""
        return self.family == warp.FAMILY


@dataclasses.dataclass
class Measurement:
    """What one measured product gives back to the runner."""

    result: np.ndarray  # output of the first run, into a NaN-poisoned buffer
    last_result: np.ndarray  # output of the last timed sample, poisoned likewise
    kernel_s: list[float]  # device-clock time of the kernel alone, one per sample
    end_to_end_s: list[float]  # host-clock time of upload + kernel + download
    tile: int | None
    params: dict[str, int] | None = None  # every launch parameter, for tuned variants


# operation -> variant name -> spec
VariantTable = dict[str, dict[str, VariantSpec]]

# -- the interface ------------------------------------------------------------------

SUPPORTED_DTYPES = tuple(DTYPES.values())
# Kernels index with 32-bit ints: every matrix must have fewer elements than this.
MAX_ELEMENTS = 2**31 - 1


class Execution(abc.ABC):
    """Device buffers for one product ``A (M×K) · B (K×N)`` and the steps to compute it."""

    # What the launch chose, where the variant chooses per product (tuned variants).
    tile: int | None = None
    params: dict[str, int] | None = None

    @abc.abstractmethod
    def upload(self) -> None:
        """Copy A and B from the host to the device and wait for the copies."""

    @abc.abstractmethod
    def poison(self) -> None:
        """Fill the output with NaN, so that an element the kernel misses fails the check."""

    @abc.abstractmethod
    def run(self) -> float:
        """Run the kernel once, wait for it, and return its duration in seconds.

        The duration comes from the device's own clock (CUDA events, OpenCL
        profiling events); on the host it is ``time.perf_counter``.
        """

    @abc.abstractmethod
    def download(self) -> np.ndarray:
        """Copy the output to a new host array and wait for the copy."""

    def release(self) -> None:  # noqa: B027 - optional hook, nothing to free by default
        """Free the device buffers."""


class Backend(abc.ABC):
    """A way of running matrix products: one per programming model.

    Subclasses set ``name`` and ``VARIANTS`` and implement ``available``,
    ``list_devices``, ``device`` and ``_execution``. Constructing a backend
    starts its driver on the chosen device; ``close`` (or a ``with`` block)
    gives it back.
    """

    name: ClassVar[str]
    description: ClassVar[str] = ""
    VARIANTS: ClassVar[VariantTable]
    # Backends that launch groups of workers: their words for the workers and for the
    # memory the group stages tiles in; tile_problem then checks a group against the
    # device's limits (see group_problem).
    GROUP_WORDS: ClassVar[tuple[str, str] | None] = None

    @abc.abstractmethod
    def __init__(self, device: str | int | None = None) -> None:
        """Open the backend on ``device`` (an index or a piece of its name; None: default)."""

    # -- what can run -----------------------------------------------------------------

    @classmethod
    @abc.abstractmethod
    def available(cls) -> tuple[bool, str]:
        """Whether this backend can run here, and if not, what to do about it.

        Never raises: a missing package, a missing driver and a machine with no
        device each come back as ``(False, reason)``.
        """

    @classmethod
    @abc.abstractmethod
    def list_devices(cls) -> list[DeviceInfo]:
        """The devices this backend could run on (an empty list if unavailable)."""

    @property
    @abc.abstractmethod
    def device(self) -> DeviceInfo:
        """The device this instance runs on."""

    def variants(self, op: str = "mm") -> list[str]:
        """Names of the variants of ``op`` this backend has."""
        return list(self._specs(op))

    def runnable_variants(self, op: str = "mm", dtype: Any = np.float32) -> list[str]:
        """The variants of ``op`` that can run here: those without a ``variant_problem``
        (such as a vendor library that is not installed)."""
        dtype = np.dtype(dtype)
        return [v for v in self.variants(op) if self.variant_problem(v, dtype, op) is None]

    def variant_spec(self, variant: str, op: str = "mm") -> VariantSpec:
        specs = self._specs(op)
        if variant not in specs:
            raise UnsupportedParameter(
                f"{self.name} has no variant '{variant}' for {op}; it has: {', '.join(specs)}"
            )
        return specs[variant]

    def tiles(self, variant: str, op: str = "mm", itemsize: int = 4) -> tuple[int, ...]:
        """The tile sizes of ``variant`` that this device can run (empty: takes no tile)."""
        spec = self.variant_spec(variant, op)
        return tuple(t for t in spec.tiles if self.tile_problem(variant, t, itemsize, op) is None)

    def tile_problem(
        self,
        variant: str,
        tile: int,
        itemsize: int = 4,
        op: str = "mm",
        config: warp.WarpConfig | None = None,
    ) -> str | None:
        """Why ``tile`` (or, for tuned variants, ``config``) cannot run on this device."""
        if tile < 1:
            return f"tile must be a positive integer, not {tile}"
        if self.GROUP_WORDS is None:
            return None
        workers, memory = self.GROUP_WORDS
        spec = self.variant_spec(variant, op)
        return group_problem(self.device, spec, tile, itemsize, workers, memory, config)

    def dtype_problem(self, dtype: np.dtype) -> str | None:
        """Why this device cannot compute in ``dtype``, or None if it can."""
        return None

    def variant_problem(self, variant: str, dtype: np.dtype, op: str = "mm") -> str | None:
        """Why ``variant`` cannot run here at all (a missing vendor library), or None."""
        return None

    def resolve_tile(
        self, variant: str, tile: int | None, op: str = "mm", itemsize: int = 4
    ) -> int | None:
        """The tile to use: the one asked for if the device can run it, else an error."""
        spec = self.variant_spec(variant, op)
        if not spec.takes_tile:
            if tile is not None:
                raise UnsupportedParameter(f"{self.name} {variant} takes no tile size")
            return None
        if tile is not None:
            # Only integers: 16.0 would reach the compiler as -DTILE=16.0, True as 1.
            if isinstance(tile, bool | np.bool_) or not isinstance(tile, numbers.Integral):
                runnable = ", ".join(map(str, self.tiles(variant, op, itemsize))) or "none"
                raise UnsupportedParameter(
                    f"{self.name} {variant}: the tile must be an integer, not {tile!r} "
                    f"(tiles this device can run: {runnable})"
                )
            tile = int(tile)
        if tile is None:
            if spec.tuned:
                return None  # chosen per product: see _warp_config
            tile = spec.default_tile or spec.tiles[0]
        problem = self.tile_problem(variant, tile, itemsize, op)
        if problem is not None:
            runnable = ", ".join(map(str, self.tiles(variant, op, itemsize))) or "none"
            raise UnsupportedParameter(
                f"{self.name} {variant}: tile {tile} cannot run on {self.device.name}: "
                f"{problem} (tiles this device can run: {runnable})"
            )
        return tile

    def _specs(self, op: str) -> dict[str, VariantSpec]:
        if op not in self.VARIANTS:
            raise UnsupportedParameter(
                f"{self.name} has no operation '{op}'; it has: {', '.join(self.VARIANTS)}"
            )
        return self.VARIANTS[op]

    # -- computing ------------------------------------------------------------------------

    def matmul(
        self, A: np.ndarray, B: np.ndarray, variant: str = "tiled", tile: int | None = None
    ) -> np.ndarray:
        """``A @ B`` computed by ``variant``: NumPy in, NumPy out, any M×K · K×N.

        Strided views (sub-matrices of larger arrays) go to the device as they are,
        with their row stride as the kernels' leading dimension, unless that would
        move more than twice their size or pass 32-bit indices: then a compact copy
        goes (see ``row_major_span``). Masked arrays are refused: fill them first.
        """
        return self.measure(A, B, variant, tile, op="mm", warmup=0, samples=0).result

    def bmm(
        self, A: np.ndarray, B: np.ndarray, variant: str = "tiled", tile: int | None = None
    ) -> np.ndarray:
        """A batch of products: b×M×K · b×K×N -> b×M×N, the batch on the launch's z axis."""
        return self.measure(A, B, variant, tile, op="bmm", warmup=0, samples=0).result

    def rmm(
        self, A: np.ndarray, B: np.ndarray, variant: str = "tiled", tile: int | None = None
    ) -> np.ndarray:
        """The reduced product of ``problems``: M×K · K×N -> (M/2)×(N/2), M and N even."""
        return self.measure(A, B, variant, tile, op="rmm", warmup=0, samples=0).result

    def measure(
        self,
        A: np.ndarray,
        B: np.ndarray,
        variant: str = "tiled",
        tile: int | None = None,
        *,
        op: str = "mm",
        params: Mapping[str, int] | None = None,
        warmup: int = 1,
        samples: int = 10,
        min_samples: int = 3,
        max_sample_time_s: float = 1.0,
    ) -> Measurement:
        """Compute ``op`` of A and B (``A @ B`` by default) and time it.

        The first run (which also absorbs compilation and first-touch costs)
        gives ``result``; then ``warmup`` untimed runs; then timed samples, each
        one upload + kernel + download. Sampling stops after ``samples`` runs,
        or earlier once ``min_samples`` runs together took ``max_sample_time_s``.
        ``params`` sets every launch parameter of a tuned variant (see
        ``backends/warp.py``); without it the variant chooses them per product.
        Before every run the output is poisoned (NaN; for integers the most
        negative value), so an element the kernel misses fails the check.

        A product with a zero dimension is what NumPy gives (an empty matrix, or
        zeros when K is 0) and runs nothing, so it has no samples.
        """
        if self._closed:
            raise XBackendError(f"the {self.name} backend is closed")
        A, B = check_operands(A, B, op)
        spec = self.variant_spec(variant, op)
        if params is not None and not spec.tuned:
            raise UnsupportedParameter(f"{self.name} {variant} takes no launch parameters")
        problem = self.dtype_problem(A.dtype)
        if problem:
            raise UnsupportedParameter(f"{self.name} cannot compute in {A.dtype}: {problem}")
        problem = self.variant_problem(variant, A.dtype, op)
        if problem:
            raise UnsupportedParameter(f"{self.name} {variant} cannot run here: {problem}")
        tile = self.resolve_tile(variant, tile, op, A.itemsize)
        shape = output_shape(op, A, B)
        if 0 in A.shape or 0 in B.shape or 0 in shape:
            empty = np.zeros(shape, dtype=A.dtype)
            return Measurement(empty, empty, [], [], tile)
        self._check_memory(A, B, shape, op)
        kernel_s: list[float] = []
        end_to_end_s: list[float] = []
        with self._active(), self._out_of_memory_named(A, B, shape, op):
            execution = self._execution(op, variant, tile, A, B, params)
            if execution.tile is not None:
                tile = execution.tile
            try:
                execution.poison()
                execution.upload()
                execution.run()
                result = execution.download()
                last_result = result
                for _ in range(warmup):
                    execution.upload()
                    execution.run()
                    execution.download()
                spent_s = 0.0
                while len(kernel_s) < samples and not (
                    len(kernel_s) >= min_samples and spent_s >= max_sample_time_s
                ):
                    execution.poison()
                    start = time.perf_counter()
                    execution.upload()
                    kernel_s.append(execution.run())
                    last_result = execution.download()
                    end_to_end_s.append(time.perf_counter() - start)
                    spent_s += end_to_end_s[-1]
            finally:
                execution.release()
        return Measurement(result, last_result, kernel_s, end_to_end_s, tile, execution.params)

    @contextmanager
    def _out_of_memory_named(
        self, A: np.ndarray, B: np.ndarray, shape: tuple[int, ...], op: str = "mm"
    ) -> Iterator[None]:
        """Turn a driver's out-of-memory error into one that names sizes and memory."""
        try:
            yield
        except Exception as error:
            if self._is_out_of_memory(error):
                raise DeviceOutOfMemory(self._memory_message(A, B, shape, op, error)) from error
            raise

    def _uploaded_nbytes(self, X: np.ndarray, op: str) -> int:
        """Device memory the operand ``X`` takes: its span where a view goes as it is."""
        return uploaded_nbytes(X, op)

    def _check_memory(
        self, A: np.ndarray, B: np.ndarray, shape: tuple[int, ...], op: str = "mm"
    ) -> None:
        """Refuse, before allocating, a product that cannot fit the device."""
        device = self.device
        a_bytes, b_bytes = self._uploaded_nbytes(A, op), self._uploaded_nbytes(B, op)
        output_bytes = int(np.prod(shape)) * A.itemsize
        largest = max(a_bytes, b_bytes, output_bytes)
        limit = device.max_alloc_bytes
        if limit and largest > limit:
            detail = f"one buffer may hold at most {_gib(limit)}"
            raise DeviceOutOfMemory(self._memory_message(A, B, shape, op, detail))
        total = a_bytes + b_bytes + output_bytes
        if device.global_mem_bytes and total > device.global_mem_bytes:
            raise DeviceOutOfMemory(self._memory_message(A, B, shape, op))

    def _memory_message(
        self,
        A: np.ndarray,
        B: np.ndarray,
        C: tuple[int, ...],
        op: str = "mm",
        detail: object = None,
    ) -> str:
        def dims(shape: tuple[int, ...]) -> str:
            return "×".join(map(str, shape))

        uploaded = self._uploaded_nbytes(A, op) + self._uploaded_nbytes(B, op)
        need = uploaded + int(np.prod(C)) * A.itemsize
        memory = self.device.global_mem_bytes
        has = f"{_gib(memory)} in all" if memory else "an unknown amount of memory"
        gaps = " with the gaps between a view's rows" if uploaded > A.nbytes + B.nbytes else ""
        text = (
            f"out of memory on {self.device.name}: A {dims(A.shape)}, B {dims(B.shape)} "
            f"and C {dims(C)} ({A.dtype}) need {_gib(need)}{gaps}; the device has {has}"
        )
        return f"{text} ({detail})" if detail else text

    def _is_out_of_memory(self, error: BaseException) -> bool:
        """Whether a driver's error means it ran out of memory (host MemoryError here)."""
        return isinstance(error, MemoryError)

    @abc.abstractmethod
    def _execution(
        self,
        op: str,
        variant: str,
        tile: int | None,
        A: np.ndarray,
        B: np.ndarray,
        params: Mapping[str, int] | None = None,
    ) -> Execution:
        """Compile what is needed and allocate the buffers for one product of ``op``."""

    def _plan(
        self,
        op: str,
        variant: str,
        tile: int | None,
        A: np.ndarray,
        B: np.ndarray,
        params: Mapping[str, int] | None = None,
    ) -> Launch:
        """The launch of one product on a compiled backend: kernel, options, geometry."""
        spec = self.variant_spec(variant, op)
        if not spec.tuned:
            assert tile is not None
            launch = plan_launch(op, A, B, tile, spec.per_thread(tile))
            options = tuple(build_options(tile, A.dtype, spec))
            return dataclasses.replace(launch, kernel=spec.kernel, options=options)
        config = self._warp_config(op, spec, tile, A, B, params)
        problem = config.problem() or self.tile_problem(variant, config.BM, A.itemsize, op, config)
        if problem:
            raise UnsupportedParameter(f"{self.name} {variant}: {problem}")
        return plan_warp(op, spec, config, A, B)

    def _warp_config(
        self,
        op: str,
        spec: VariantSpec,
        tile: int | None,
        A: np.ndarray,
        B: np.ndarray,
        params: Mapping[str, int] | None,
    ) -> warp.WarpConfig:
        """Explicit parameters, else the tuned ones, else the size-aware default."""
        if params is not None:
            try:
                return warp.WarpConfig.from_dict(
                    {**warp.default_config(spec.layout, 128).to_dict(), **params}
                )
            except ValueError as error:
                raise UnsupportedParameter(str(error)) from error
        M, N = output_shape(op, A, B)[-2:]
        K = A.shape[-1]
        units = self.device.compute_units or 0
        if op != "bmm":
            from xbackend.tuning import lookup

            def device_problem(config: warp.WarpConfig) -> str | None:
                return self.tile_problem(spec.name, config.BM, A.itemsize, op, config)

            shape_class = warp.shape_class(M, N, units)
            tuned = lookup(
                self, spec.name, A.dtype, shape_class, op, size=(M, N, K), check=device_problem
            )
            if tuned is not None and tile in (None, tuned.BM):
                return tuned
        config = warp.default_config(spec.layout, tile or 128)
        if op != "bmm":
            config = config.with_slices(warp.auto_slices(config, M, N, K, units))
        return config

    def _active(self) -> AbstractContextManager[None]:
        """Make this backend's device current for the calling thread (CUDA needs it)."""
        return nullcontext()

    # -- lifetime ---------------------------------------------------------------------------

    _closed = False

    def close(self) -> None:
        """Release the context and everything it holds. Safe to call twice.

        Subclasses release their own resources, then call this.
        """
        self._closed = True

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} on {self.device.name}>"


def _gib(nbytes: int) -> str:
    """Bytes in the unit that reads best: GiB, MiB or bytes."""
    if nbytes >= 2**30:
        return f"{nbytes / 2**30:.3g} GiB"
    return f"{nbytes / 2**20:.3g} MiB" if nbytes >= 2**20 else f"{nbytes} bytes"


def output_shape(op: str, A: np.ndarray, B: np.ndarray) -> tuple[int, ...]:
    """The shape of ``op``'s result for checked operands."""
    if op == "rmm":
        return (A.shape[0] // 2, B.shape[1] // 2)
    return (*A.shape[:-1], B.shape[-1])


def check_operands(A: Any, B: Any, op: str = "mm") -> tuple[np.ndarray, np.ndarray]:
    """Check two operands of ``op``; return them as arrays (views are kept as they are).

    Raises ``UnsupportedParameter`` (a ``ValueError``) naming what is wrong.
    """
    if op not in OPS:
        raise UnsupportedParameter(f"unknown operation {op!r}; operations: {', '.join(OPS)}")
    for label, X in (("A", A), ("B", B)):
        if isinstance(X, np.ma.MaskedArray):
            # np.asarray would drop the mask and compute with whatever lies under it.
            raise UnsupportedParameter(
                f"{label} is a masked array, whose mask the kernels cannot honour; "
                f"fill it first, e.g. {label}.filled(0)"
            )
    A = np.asarray(A)
    B = np.asarray(B)
    ndim = 3 if op == "bmm" else 2
    kind = "a batch of matrices (3-D)" if ndim == 3 else "a 2-D matrix"
    for label, X in (("A", A), ("B", B)):
        if X.ndim != ndim:
            raise UnsupportedParameter(f"{op}: {label} must be {kind}, got shape {X.shape}")
        if X.dtype not in SUPPORTED_DTYPES:
            names = ", ".join(str(d) for d in SUPPORTED_DTYPES)
            raise UnsupportedParameter(
                f"{label} has dtype {X.dtype}; supported: {names} (convert with .astype)"
            )
        if X.size > MAX_ELEMENTS:
            raise UnsupportedParameter(
                f"{label} has {X.size} elements; the kernels index with 32-bit integers "
                f"and take at most {MAX_ELEMENTS}"
            )
    if A.dtype != B.dtype:
        raise UnsupportedParameter(f"A is {A.dtype} but B is {B.dtype}")
    if ndim == 3 and A.shape[0] != B.shape[0]:
        raise UnsupportedParameter(f"bmm: batch sizes differ: {A.shape[0]} and {B.shape[0]}")
    if A.shape[-1] != B.shape[-2]:
        raise UnsupportedParameter(
            f"inner dimensions differ: A is {A.shape[-2]}×{A.shape[-1]}, "
            f"B is {B.shape[-2]}×{B.shape[-1]}"
        )
    if op == "rmm" and (A.shape[0] % 2 or B.shape[1] % 2):
        raise UnsupportedParameter(
            f"rmm needs an even number of rows in A and columns in B: "
            f"A is {A.shape[0]}×{A.shape[1]}, B is {B.shape[0]}×{B.shape[1]}"
        )
    outputs = int(np.prod(output_shape(op, A, B)))
    if outputs > MAX_ELEMENTS:
        raise UnsupportedParameter(f"the product has {outputs} elements; at most {MAX_ELEMENTS}")
    return A, B


def poison_value(dtype: np.dtype) -> Any:
    """What an output is filled with before a kernel runs: NaN, or the most negative int.

    An element the kernel never writes keeps it and fails the check: NaN is never
    within a tolerance, and -2**31 is far from any product of the test inputs.
    """
    return np.iinfo(dtype).min if dtype.kind in "iu" else np.nan


# A view goes to the device as it is only while its span (first to last element) is at
# most this many times its own size: beyond, most of the upload would be the gaps between
# its rows (a 3×4 view of a 3×2**30 array spans 8 GiB), and a compact copy moves less.
MAX_SPAN_RATIO = 2


def passed_as_is(X: np.ndarray) -> int | None:
    """The leading dimension with which the matrix view ``X`` goes to the device as it
    is, or None where it is copied compactly first (see ``row_major_span``)."""
    rows, columns = X.shape
    item = X.itemsize
    row_stride = X.strides[0]
    if not (
        rows > 1
        and X.strides[1] == item
        and row_stride % item == 0
        and row_stride >= columns * item
    ):
        return None
    ld = row_stride // item
    span = (rows - 1) * ld + columns
    # The kernels index the span with 32-bit ints: lda itself and every offset must fit.
    if span > MAX_ELEMENTS or span > MAX_SPAN_RATIO * X.size:
        return None
    return ld


def row_major_span(X: np.ndarray) -> tuple[np.ndarray, int]:
    """A matrix as one contiguous run of memory and its leading dimension.

    A view whose rows are contiguous (``A[:, 5:37]``, ``A[3:20]``) is returned as
    the span of its base's memory from its first to its last element, without a
    copy, with its row stride as the leading dimension, where that span is at most
    ``MAX_SPAN_RATIO`` times the view's size and fits 32-bit indices. Other views
    (huge strides, Fortran order, column steps, reversed rows) are copied to compact
    C order first: only their elements are read, never the gaps between them.
    """
    ld = passed_as_is(X)
    if ld is not None:
        rows, columns = X.shape
        span = np.lib.stride_tricks.as_strided(
            X, shape=((rows - 1) * ld + columns,), strides=(X.itemsize,), writeable=False
        )
        return span, ld
    return np.ascontiguousarray(X).reshape(-1), X.shape[1]


def uploaded_nbytes(X: np.ndarray, op: str) -> int:
    """Bytes of the operand ``X`` that ``plan_launch`` puts on the device: a view's
    whole span where it goes as it is, gaps included."""
    ld = passed_as_is(X) if op != "bmm" else None
    if ld is None:
        return X.nbytes
    rows, columns = X.shape
    return ((rows - 1) * ld + columns) * X.itemsize


@dataclasses.dataclass(frozen=True)
class Launch:
    """What a compiled backend needs to run one of the kernel families.

    ``inputs`` are contiguous host arrays to upload; ``groups`` is the number of
    work-groups (blocks) along x, y and z, each computing a TILE×TILE tile of C
    with ``block`` threads; ``scalars`` are the kernel's integer arguments after
    the three buffers, in the kernels' order.
    """

    inputs: tuple[np.ndarray, np.ndarray]
    output_shape: tuple[int, ...]
    groups: tuple[int, int, int]
    block: tuple[int, int, int]  # threads (work-items) per group along x, y, z
    scalars: tuple[int, ...]
    kernel: str = ""  # the kernel function
    options: tuple[str, ...] = ()  # build options (-D...)
    # A split product: the kernel writes `slices` partial products into a workspace,
    # and warp.SUM_KERNEL adds them into the output.
    slices: int = 1
    tile: int | None = None  # for tuned variants: what they chose
    params: dict[str, int] | None = None


def plan_warp(
    op: str, spec: VariantSpec, config: warp.WarpConfig, A: np.ndarray, B: np.ndarray
) -> Launch:
    """Arguments and geometry of kernels/*/mm_warp for ``op``.

    For rmm the kernel is built with -DREDUCED: M and N are then those of the
    (M/2)×(N/2) output, and the kernel sums the pairs of rows of A and of columns
    of B as it loads its slabs.
    """
    # The operands and leading dimensions are those of the other families (plan_launch).
    common = plan_launch(op, A, B, 1)
    M, N = common.output_shape[-2:]
    K, lda, ldb = common.scalars[2:5]
    strides = list(common.scalars[6:9]) if op == "bmm" else [0, 0, 0]
    batch = common.groups[2]
    if op == "bmm":
        config = config.with_slices(1)
    else:
        strides[2] = M * N  # strideC: the partial products' slices of a split
    k_slice = warp.k_slice(config, K)
    slices = -(-K // k_slice)
    config = config.with_slices(slices)
    vec4 = warp.vec4_ok(A.itemsize, lda, ldb, N, *strides, k_slice)
    options = [*warp.defines(config, A.dtype, vec4, "DOUBLE_BUFFER" in spec.defines)]
    options.append(f"-DREAL={C_TYPES[A.dtype.name]}")
    if op == "rmm":
        options.append("-DREDUCED")
    groups = (-(-N // config.BN), -(-M // config.BM), batch * slices)
    return dataclasses.replace(
        common,
        groups=groups,
        block=(config.threads, 1, 1),
        scalars=(M, N, K, lda, ldb, N, *strides, k_slice),
        kernel=spec.kernel,
        options=tuple(options),
        slices=slices,
        tile=config.BM,
        params=config.to_dict(),
    )


def plan_launch(
    op: str, A: np.ndarray, B: np.ndarray, tile: int, per_thread: tuple[int, int] = (1, 1)
) -> Launch:
    """Arguments and launch geometry of ``op`` for kernels/*/mm, mm_reg and rmm."""
    shape = output_shape(op, A, B)
    rows, columns = shape[-2], shape[-1]
    groups_xy = (-(-columns // tile), -(-rows // tile))
    block = (tile // per_thread[1], tile // per_thread[0], 1)
    if op == "bmm":
        batch, M, K = A.shape
        N = B.shape[2]
        A, B = np.ascontiguousarray(A).reshape(-1), np.ascontiguousarray(B).reshape(-1)
        strides = (M, N, K, K, N, N, M * K, K * N, M * N)
        return Launch((A, B), shape, (*groups_xy, batch), block, strides)
    (a_span, lda), (b_span, ldb) = row_major_span(A), row_major_span(B)
    M, K = A.shape
    N = B.shape[1]
    if op == "rmm":
        scalars: tuple[int, ...] = (M, N, K, lda, ldb, N // 2)
    else:
        scalars = (M, N, K, lda, ldb, N, 0, 0, 0)
    return Launch((a_span, b_span), shape, (*groups_xy, 1), block, scalars)


# -- what the two compiled backends share ------------------------------------------------

# The C type each dtype becomes in the kernels (-DREAL=...).
C_TYPES = {"int32": "int", "float32": "float", "float64": "double"}


def _reg2d(name: str, description: str, *defines: str) -> VariantSpec:
    """A 2-D register-blocked variant of kernels/*/mm_reg: (TILE/16)² outputs per thread,
    the outputs' layout chosen by ``defines`` (see the kernel file)."""
    return VariantSpec(
        name,
        description,
        kernel="mm_reg",
        tiles=(64, 128),
        default_tile=128,
        family="mm_reg",
        microtile=lambda tile: (tile // 16, tile // 16),
        defines=defines,
    )


def _warp(name: str, description: str, layout: str, *defines: str) -> VariantSpec:
    """A variant of kernels/*/mm_warp; its tile is BM = BN of the untuned default."""
    return VariantSpec(
        name,
        description,
        kernel="mm_warp",
        tiles=(64, 128),
        default_tile=128,
        family=warp.FAMILY,
        defines=defines,
        layout=layout,
    )


def with_vendor(table: VariantTable, description: str, reduced: str | None = None) -> VariantTable:
    """``table`` with a ``vendor`` variant of mm: the vendor's BLAS on the same buffers;
    and of rmm, described by ``reduced``, where the backend has one."""
    table = {**table, "mm": {**table["mm"], "vendor": VariantSpec("vendor", description)}}
    if reduced:
        table["rmm"] = {**table["rmm"], "vendor": VariantSpec("vendor", reduced)}
    return table


def compiled_variants(worker: str, memory: str) -> VariantTable:
    """The variants of the kernel files, in one backend's words ("thread", "shared")."""
    tiles: dict[str, Any] = {"tiles": (8, 16, 32), "default_tile": 16}
    mm = {
        "naive": VariantSpec(
            "naive",
            f"one {worker} per element, operands from global memory",
            kernel="mm_naive",
            **tiles,
        ),
        "tiled": VariantSpec(
            "tiled",
            f"TILE×TILE tiles of A and B staged in {memory} memory",
            kernel="mm_tiled",
            **tiles,
        ),
        # The ladder above tiled (kernels/*/mm_reg): TILE is the block's tile of C.
        "reg1d": VariantSpec(
            "reg1d",
            f"1-D register blocking: each {worker} computes a column of TILE/8 results",
            kernel="mm_reg",
            tiles=(32, 64),
            default_tile=64,
            family="mm_reg",
            microtile=lambda tile: (tile // 8, 1),
        ),
        "reg2d": _reg2d(
            "reg2d", f"2-D register blocking: each {worker} computes a (TILE/16)² patch"
        ),
        "reg2d_cf": _reg2d(
            "reg2d_cf",
            f"reg2d with strided patches: conflict-free {memory}-memory reads",
            "STRIDED",
        ),
        "reg2d_g4": _reg2d(
            "reg2d_g4",
            f"reg2d with groups of 4 outputs strided across {worker}s: 16-byte, "
            "conflict-free reads",
            "GROUPS4",
        ),
        # The top of the ladder (kernels/*/mm_warp): parameters chosen per product.
        "vec4": _warp(
            "vec4",
            f"reg2d_g4 with 16-byte loads from global memory and padded {memory} slabs",
            "block",
        ),
        "vec4_db": _warp(
            "vec4_db",
            "vec4, double-buffered: the next slabs load during this one",
            "block",
            "DOUBLE_BUFFER",
        ),
        "warp": _warp("warp", "vec4 with warp tiles: each warp computes its own part", "warp"),
        "warp_db": _warp(
            "warp_db",
            "warp, double-buffered: the next slabs load during this one",
            "warp",
            "DOUBLE_BUFFER",
        ),
    }
    rmm = {
        # Its 4·K products are added one by one, as the definition reads: an infinity
        # times products of both signs (−inf·0.75 + −inf·(−0.25)) is NaN where NumPy,
        # summing the pairs first, gives ±inf. The chapter's kernel keeps its arithmetic.
        "naive4": VariantSpec(
            "naive4",
            "4·K multiplications per element, from the definition "
            "(an Inf can give NaN where NumPy gives ±Inf)",
            kernel="rmm_naive4",
            **tiles,
        ),
        "naive": VariantSpec(
            "naive",
            "K multiplications: the row and column pairs summed first",
            kernel="rmm_naive",
            **tiles,
        ),
        "tiled": VariantSpec(
            "tiled",
            f"pair sums made while loading {memory}-memory tiles",
            kernel="rmm_tiled",
            **tiles,
        ),
        # The top of the mm ladder, with the pair sums made in its slab loads.
        "vec4_db": _warp(
            "vec4_db",
            "mm's vec4_db, the pairs summed as its 16-byte loads bring them",
            "block",
            "DOUBLE_BUFFER",
        ),
        "warp_db": _warp(
            "warp_db",
            "mm's warp_db, the pairs summed as its 16-byte loads bring them",
            "warp",
            "DOUBLE_BUFFER",
        ),
    }
    return {"mm": mm, "bmm": mm, "rmm": rmm}


def group_problem(
    device: DeviceInfo,
    spec: VariantSpec,
    tile: int,
    itemsize: int,
    workers: str,
    memory: str,
    config: warp.WarpConfig | None = None,
) -> str | None:
    """Why a group of ``spec`` at ``tile`` (or in ``config``) cannot run on ``device``."""
    if spec.tuned:
        config = config or warp.default_config(spec.layout, tile)
        limit = device.max_work_group_size or 0
        staged = config.staged_bytes(itemsize, "DOUBLE_BUFFER" in spec.defines)
        problem = config.problem()
        if problem:
            return problem
        if config.threads > limit:
            return f"{config.threads} {workers} exceed the limit of {limit} per group"
        if staged > (device.local_mem_bytes or 0):
            available = device.local_mem_bytes
            return f"the slabs' {staged} bytes exceed {available} bytes of {memory} memory"
        return None
    rows, columns = spec.per_thread(tile)
    if rows < 1 or columns < 1 or tile % rows or tile % columns:
        return f"tile {tile} does not split into {rows}×{columns} patches per {workers[:-1]}"
    threads = (tile // rows) * (tile // columns)
    if "GROUPS4" in spec.defines and (rows % 4 or columns % 4):
        return f"groups of 4 need a patch of whole groups, not {rows}×{columns}"
    if spec.family == "mm_reg" and (threads % tile or threads % 8):
        # The slab loads hand each thread whole rows: see kernels/*/mm_reg.
        return f"{threads} {workers} are not a multiple of the tile {tile} and of 8"
    limit = device.max_work_group_size or 0
    if threads > limit:
        return f"{threads} {workers} exceed the limit of {limit} per group"
    local = device.local_mem_bytes or 0
    # Elements staged in local memory: two tiles for "tiled" (mm and rmm), two
    # BK×TILE slabs (BK = 8) for the register-blocked family, none for the naive ones.
    staged = 2 * tile * tile if spec.name == "tiled" else 0
    staged = 2 * 8 * tile if spec.family == "mm_reg" else staged
    if staged * itemsize > local:
        return (
            f"the tiles of {staged} {itemsize}-byte elements exceed "
            f"{local} bytes of {memory} memory"
        )
    return None


def kernel_family(op: str, spec: VariantSpec) -> str:
    """The kernel file a variant's kernel lives in: bmm is mm with a batch."""
    return spec.family or ("rmm" if op == "rmm" else "mm")


def build_options(tile: int, dtype: np.dtype, spec: VariantSpec) -> list[str]:
    rows, columns = spec.per_thread(tile)
    options = [f"-DTILE={tile}", f"-DTM={rows}", f"-DTN={columns}", f"-DREAL={C_TYPES[dtype.name]}"]
    return options + [f"-D{name}" for name in spec.defines]


def read_kernel(family: str, language: str) -> tuple[Path, str]:
    """The path and text of a kernel file, e.g. ``read_kernel("mm", "opencl")``.

    A file that is not UTF-8 text (a folder, a binary, NUL bytes) is an
    ``XBackendError`` naming it, never a driver's confusion.
    """
    suffix = {"cuda": ".cu", "opencl": ".cl"}[language]
    path = kernel_file(language, f"{family}{suffix}")
    try:
        if not path.is_file():
            what = "a folder" if path.is_dir() else "missing or not a regular file"
            raise XBackendError(f"the kernel file {path} is {what}")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise XBackendError(f"cannot read the kernel file {path} as UTF-8 text: {error}") from error
    if "\x00" in text:
        raise XBackendError(f"the kernel file {path} holds NUL bytes: it is not source text")
    return path, text


def user_cache_dir() -> Path:
    """xbackend's folder in the user's cache: ``$XDG_CACHE_HOME/xbackend``.

    An unset, empty or relative ``XDG_CACHE_HOME`` means ``~/.cache``, as the XDG
    base directory specification says (a relative path is to be ignored): an empty
    one must not put an ``xbackend`` folder into whatever the current directory is.
    """
    chosen = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(chosen) if chosen and os.path.isabs(chosen) else Path.home() / ".cache"
    return base / "xbackend"


# -- the registry -----------------------------------------------------------------------

# name -> "module:Class"; the single source of truth for the built-in backends.
BUILTIN: dict[str, str] = {
    "cuda": "xbackend.backends.cuda:CudaBackend",
    "opencl": "xbackend.backends.opencl:OpenCLBackend",
    "cpu": "xbackend.backends.cpu:CpuBackend",
}
ENTRY_POINT_GROUP = "xbackend.backends"

_classes: dict[str, type[Backend]] = {}


def _plugin_targets() -> dict[str, str]:
    return {
        entry.name: entry.value
        for entry in metadata.entry_points(group=ENTRY_POINT_GROUP)
        if entry.name not in BUILTIN
    }


def backend_names() -> list[str]:
    """Every backend name: the built-in ones, then installed plugins."""
    return [*BUILTIN, *_plugin_targets()]


def backend_class(name: str) -> type[Backend]:
    """The class registered under ``name``, imported on first use and cached."""
    if name in _classes:
        return _classes[name]
    target = BUILTIN.get(name) or _plugin_targets().get(name)
    if target is None:
        raise UnsupportedParameter(
            f"unknown backend '{name}'; known backends: {', '.join(backend_names())}"
        )
    module_name, _, class_name = target.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        raise XBackendError(f"backend '{name}' ({target}) is not an xbackend Backend")
    _classes[name] = cls
    return cls


def backends() -> list[BackendInfo]:
    """Every known backend: whether it can run here (or why not) and its devices."""
    infos = []
    for name in backend_names():
        try:
            cls = backend_class(name)
            available, reason = cls.available()
            devices = cls.list_devices() if available else []
        except Exception as error:  # a broken plugin must not hide the others
            available, reason, devices = False, f"{type(error).__name__}: {error}", []
        infos.append(BackendInfo(name, available, reason, devices))
    return infos


def get_backend(name: str, device: str | int | None = None) -> Backend:
    """A ready backend on ``device`` (its default device if None).

    Raises ``BackendUnavailable`` with the reason if it cannot run here.
    """
    cls = backend_class(name)
    available, reason = cls.available()
    if not available:
        raise BackendUnavailable(name, reason)
    return cls(device) if device is not None else cls()
