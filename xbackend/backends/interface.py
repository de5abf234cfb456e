"""The backend plugin interface: ``Backend`` and ``Execution``.

A backend turns NumPy operands into a product computed on some device. It is
split in two layers:

* ``Backend`` checks operands and parameters, and runs the one measurement loop
  that every backend shares (upload, kernel, download, timed with the device's
  own clock), so that numbers from different backends mean the same thing;
* each backend supplies an ``Execution``: buffers for one product on its
  device, with the primitive steps (upload, poison, run, download).

The compiled backends share more (``compiled.CompiledBackend``); ``registry.py`` lists them.
"""

from __future__ import annotations

import abc
import dataclasses
import math
import numbers
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, ClassVar

import numpy as np

from xbackend.backends.ceilings import Ceilings
from xbackend.errors import DeviceOutOfMemory, UnsupportedParameter, XBackendError
from xbackend.launches.choices import Choices
from xbackend.launches.geometries import per_product
from xbackend.launches.operands import check_operands, format_bytes, out_of_memory, uploaded_nbytes
from xbackend.launches.specs import DeviceInfo, Measurement, VariantSpec, VariantTable
from xbackend.measuring.launched import Launched
from xbackend.measuring.sampler import NO_MONITOR, Monitor, sample
from xbackend.measuring.timing import Sampling
from xbackend.measuring.verified import Verify
from xbackend.operations import Shape, operation

Array = np.ndarray[Any, Any]


class Execution(abc.ABC):
    """Device buffers for one product ``A (M×K) · B (K×N)`` and the steps to compute it."""

    # What the launch chose, where the variant chooses per product (tuned variants).
    tile: int | None = None
    params: dict[str, int] | None = None
    # What ``run`` times with: "cuda-events", "opencl-profiling", "host", or
    # "globaltimer" (the device's clock read by the kernels: stamps.py).
    clock: str = "host"
    # Where the kernels time themselves: the API's clock over the last run, per launch,
    # and the last batch's gap between launches on the device; None elsewhere.
    api_s: float | None = None
    gap_s: float | None = None

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
    def download(self) -> Array:
        """Copy the output to the host and wait for the copy; the host array it is in.

        The array may be the execution's own, overwritten by the next download: the
        measurement loop copies what it keeps outside the timed window, so that the
        end-to-end time is the transfer's and not a copy the harness makes for itself.
        """

    def run_batch(self, launches: int) -> float:
        """Run the kernel ``launches`` times back to back; the seconds of all of them.

        The compiled backends queue every launch before the first starts and time
        them with one pair of device events; this default sums single runs.
        """
        return math.fsum(self.run() for _ in range(launches))

    @property
    def run_mark(self) -> str:
        """Why the last run's time should be left out ("hold": the CUDA hold gave up), or ""."""
        return ""

    def flush_cache(self) -> None:
        """Evict the device's last-level cache and wait (``--cache cold``)."""
        raise UnsupportedParameter(f"{type(self).__name__} cannot flush its cache")

    def use_host_memory(self, kind: str) -> str:
        """Keep the host side of the transfers in ``kind`` memory ("pageable", "pinned"),
        before the first upload; the kind used, or "" where nothing is copied."""
        if kind != "pageable":
            raise UnsupportedParameter(f"{type(self).__name__} has no {kind} host memory")
        return kind

    def vendor_kernels(self) -> Launched | str | None:
        """The kernels a library call of the product launched (a vendor's GEMM), as the
        device's tracer saw one run of it, or why they were not recorded; None where the
        product calls no library (its kernels are its plan's)."""
        return None

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
    # The tuner's choices for the tuned variants (see choices.py); None: their defaults.
    choices: Choices | None = None

    @abc.abstractmethod
    def __init__(self, device: str | int | None = None) -> None:
        """Open the backend on ``device`` (an index or a piece of its name; None: default)."""

    def use_choices(self, choices: Choices | None) -> None:
        """Take the tuned variants' configurations from ``choices`` (None: the defaults)."""
        self.choices = choices

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

    def kernel_language(self) -> str | None:
        """The language of the kernel files it runs ("cuda", "opencl"; None: none), which
        ``check`` runs a submission's kernels on."""
        return None

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
        tile: int | None,
        itemsize: int = 4,
        op: str = "mm",
        params: Mapping[str, int] | None = None,
    ) -> str | None:
        """Why ``tile`` (or, for tuned variants, the configuration ``params``; for variants
        with parameters, ``tile`` with them) cannot run on this device."""
        if tile is not None and tile < 1:
            return f"tile must be a positive integer, not {tile}"
        return None

    def preferred_tile(self, variant: str, op: str, dtype: np.dtype[Any]) -> int | None:
        """A tile ``xbackend tune`` chose for ``variant`` here, or None (the default)."""
        return None

    def dtype_problem(self, dtype: np.dtype[Any]) -> str | None:
        """Why this device cannot compute in ``dtype``, or None if it can."""
        return None

    def variant_problem(self, variant: str, dtype: np.dtype[Any], op: str = "mm") -> str | None:
        """Why ``variant`` cannot run here at all (a missing vendor library), or None."""
        return None

    def shape_problem(
        self, variant: str, op: str, shape: Shape, batch: int = 1, tile: int | None = None
    ) -> str | None:
        """Why ``variant`` does not take a product of ``shape`` (its kernel's rules on the
        sizes: square only, K a multiple of its tile), or None."""
        return None

    def prebuild(
        self,
        variant: str,
        op: str,
        A: Array,
        B: Array,
        configurations: Iterable[Mapping[str, int]],
    ) -> None:
        """Build the kernels of ``variant`` in each configuration for A and B ahead of
        their first run, together (the tuner's batches; see ``CompiledBackend``). A
        configuration that cannot be built is left to fail at its run, with its error.
        By default nothing is built ahead: the kernels build at their first run."""
        return None

    def kernel_build(self, variant: str, op: str = "mm") -> dict[str, str]:
        """What ``variant``'s code is built from, as far as a tuned choice depends on it:
        the driver, and (compiled backends) a digest of the kernel file and its options."""
        return {"driver": self.device.driver_version}

    def default_tile(self, variant: str, op: str, dtype: np.dtype[Any]) -> int | None:
        """The tile ``variant`` runs at when none is asked for: the one ``xbackend tune``
        chose here, else its family's; None where it takes none or is configured per
        product (``block_tiles.configure``)."""
        spec = self.variant_spec(variant, op)
        if not spec.takes_tile or per_product(spec):
            return None
        return self.preferred_tile(variant, op, dtype) or spec.tile

    def configuration_problem(
        self, variant: str, op: str, dtype: np.dtype[Any], tile: int | None
    ) -> str | None:
        """Why ``variant`` at ``tile`` cannot compute in ``dtype`` on this device, or None:
        the one check behind a comparison's line (recorded) and a product's call (raised)."""
        problem = self.dtype_problem(dtype)
        if problem:
            return f"{self.name} cannot compute in {dtype}: {problem}"
        problem = self.variant_problem(variant, dtype, op)
        if problem:
            return f"{self.name} {variant} cannot run here: {problem}"
        spec = self.variant_spec(variant, op)
        if tile is None and not (spec.configurable and not per_product(spec)):
            return None
        problem = self.tile_problem(variant, tile, dtype.itemsize, op)
        if problem is None:
            return None
        what = f"tile {tile}" if tile is not None else "its default configuration"
        runnable = ", ".join(map(str, self.tiles(variant, op, dtype.itemsize))) or "none"
        return (
            f"{self.name} {variant}: {what} cannot run on {self.device.name}: {problem} "
            f"(tiles this device can run: {runnable})"
        )

    def resolve_tile(
        self, variant: str, tile: int | None, op: str, dtype: np.dtype[Any]
    ) -> int | None:
        """The tile to use: the one asked for (an integer), else the default one."""
        spec = self.variant_spec(variant, op)
        if not spec.takes_tile:
            if tile is not None:
                raise UnsupportedParameter(f"{self.name} {variant} takes no tile size")
            return None
        if tile is not None:
            # Only integers: 16.0 would reach the compiler as -DTILE=16.0, True as 1.
            if isinstance(tile, bool | np.bool_) or not isinstance(tile, numbers.Integral):
                runnable = ", ".join(map(str, self.tiles(variant, op, dtype.itemsize)))
                raise UnsupportedParameter(
                    f"{self.name} {variant}: the tile must be an integer, not {tile!r} "
                    f"(tiles this device can run: {runnable or 'none'})"
                )
            return int(tile)
        return self.default_tile(variant, op, dtype)

    def variant_table(self) -> VariantTable:
        """Every variant of this backend, per operation."""
        return self.VARIANTS

    def _specs(self, op: str) -> dict[str, VariantSpec]:
        table = self.variant_table()
        if op not in table:
            raise UnsupportedParameter(
                f"{self.name} has no operation '{op}'; it has: {', '.join(table)}"
            )
        return table[op]

    # -- computing ------------------------------------------------------------------------

    def matmul(self, A: Array, B: Array, variant: str = "tiled", tile: int | None = None) -> Array:
        """``A @ B`` computed by ``variant``: NumPy in, NumPy out, any M×K · K×N.

        Strided views (sub-matrices of larger arrays) go to the device as they are,
        with their row stride as the kernels' leading dimension, unless that would
        move more than twice their size: then a compact copy goes (see
        ``row_major_span``). Masked arrays are refused: fill them first.
        """
        return self.measure(A, B, variant, tile, op="mm", warmup=0, samples=0).result

    def bmm(self, A: Array, B: Array, variant: str = "tiled", tile: int | None = None) -> Array:
        """A batch of products: b×M×K · b×K×N -> b×M×N, the batch on the launch's z axis."""
        return self.measure(A, B, variant, tile, op="bmm", warmup=0, samples=0).result

    def rmm(self, A: Array, B: Array, variant: str = "tiled", tile: int | None = None) -> Array:
        """The reduced product of ``problems``: M×K · K×N -> (M/2)×(N/2), M and N even."""
        return self.measure(A, B, variant, tile, op="rmm", warmup=0, samples=0).result

    def measure(
        self,
        A: Array,
        B: Array,
        variant: str = "tiled",
        tile: int | None = None,
        *,
        op: str = "mm",
        params: Mapping[str, int] | None = None,
        sampling: Sampling | None = None,
        warmup: int | None = None,
        samples: int | None = None,
        min_samples: int | None = None,
        verify: Verify | None = None,
    ) -> Measurement:
        """Compute ``op`` of A and B (``A @ B`` by default) and time it.

        The first run (which also absorbs compilation and first-touch costs)
        gives ``result``; then the warm-up runs; then timed samples, taken and
        stopped as ``sampling`` says (see ``timing.Sampling`` and ``sampler.py``).
        ``warmup``, ``samples`` (the most) and ``min_samples`` override its fields.
        ``verify`` (``verified.Verifier``): every output after the first is verified with
        it, untimed; the first wrong one is the measurement's ``wrong`` (sampler.py).
        ``params`` sets every launch parameter of a tuned variant (see
        ``launches/warp.py``); without it the variant chooses them per product.
        Before every run the output is poisoned (NaN; for integers the most negative
        value), so an element the kernel misses fails the check. A product with a zero
        dimension is what NumPy gives (an empty matrix, or zeros when K is 0): no samples.
        """
        sampling = _overridden(sampling or Sampling(), warmup, samples, min_samples)
        A, B, tile = self._checked(A, B, variant, tile, op, params)
        shape = operation(op).output_shape(A, B)
        if 0 in A.shape or 0 in B.shape or 0 in shape:
            empty = np.zeros(shape, dtype=A.dtype)
            return Measurement(empty, empty, [], [], tile)
        self._check_memory(A, B, shape, op)
        with self._active(), self._out_of_memory_named(A, B, shape, op):
            execution = self._execution(op, variant, tile, A, B, params)
            try:
                host_memory = execution.use_host_memory(sampling.host_memory)
                on_cpu = self.device.kind == "cpu"
                sampled = sample(execution, sampling, self.monitor(), on_cpu, verify)
            finally:
                execution.release()
        chosen = execution.tile if execution.tile is not None else tile
        return Measurement(
            sampled.result, sampled.last_result, sampled.kernel_s, sampled.end_to_end_s, chosen,
            execution.params, launches=sampled.launches, stop=sampled.stop, marks=sampled.marks,
            clock=execution.clock, api_s=sampled.api_s, gap_s=sampled.gap_s, cpu_s=sampled.cpu_s,
            cache=sampling.cache, host_memory=host_memory, state=sampled.state,
            host_load=sampled.host_load, verified=sampled.verified, wrong=sampled.wrong,
        )  # fmt: skip

    def ceilings(self, dtypes: Iterable[str] = ("float32",)) -> Ceilings | None:
        """The device's measured ceilings (``ceilings.py``): FLOP/s for each float dtype of
        ``dtypes`` it computes in, and bytes per second; each measured the first time it
        is asked for, then kept. None: this backend does not measure them (the default,
        and a plugin's unless it says otherwise)."""
        return None

    def monitor(self) -> Monitor:
        """What watches this device's clocks while it is measured (nothing by default)."""
        return NO_MONITOR

    def _checked(
        self,
        A: Any,
        B: Any,
        variant: str,
        tile: int | None,
        op: str,
        params: Mapping[str, int] | None,
    ) -> tuple[Array, Array, int | None]:
        """The operands and the tile, once everything about them is known to be runnable."""
        if self._closed:
            raise XBackendError(f"the {self.name} backend is closed")
        A, B = check_operands(A, B, op)
        spec = self.variant_spec(variant, op)
        if params is not None and not per_product(spec):  # a tile, and the family's parameters
            tile = spec.configured_tile(tile, params, self.name)
        tile = self.resolve_tile(variant, tile, op, A.dtype)
        problem = self.configuration_problem(variant, op, A.dtype, tile)
        if problem:
            raise UnsupportedParameter(problem)
        return A, B, tile

    @contextmanager
    def _out_of_memory_named(
        self, A: Array, B: Array, shape: tuple[int, ...], op: str = "mm"
    ) -> Iterator[None]:
        """Turn a driver's out-of-memory error into one that names sizes and memory."""
        try:
            yield
        except Exception as error:
            if self._is_out_of_memory(error):
                raise DeviceOutOfMemory(self._memory_message(A, B, shape, op, error)) from error
            raise

    def _uploaded_nbytes(self, X: Array, op: str) -> int:
        """Device memory the operand ``X`` takes: its span where a view goes as it is."""
        return uploaded_nbytes(X, op)

    def _check_memory(self, A: Array, B: Array, shape: tuple[int, ...], op: str = "mm") -> None:
        """Refuse, before allocating, a product that cannot fit the device."""
        device = self.device
        a_bytes, b_bytes = self._uploaded_nbytes(A, op), self._uploaded_nbytes(B, op)
        output_bytes = int(np.prod(shape)) * A.itemsize
        largest = max(a_bytes, b_bytes, output_bytes)
        limit = device.max_alloc_bytes
        if limit and largest > limit:
            detail = f"one buffer may hold at most {format_bytes(limit)}"
            raise DeviceOutOfMemory(self._memory_message(A, B, shape, op, detail))
        total = a_bytes + b_bytes + output_bytes
        if device.global_mem_bytes and total > device.global_mem_bytes:
            raise DeviceOutOfMemory(self._memory_message(A, B, shape, op))

    def _memory_message(
        self, A: Array, B: Array, C: tuple[int, ...], op: str = "mm", detail: object = None
    ) -> str:
        uploaded = self._uploaded_nbytes(A, op) + self._uploaded_nbytes(B, op)
        return out_of_memory(self.device, A, B, C, uploaded, detail)

    def _is_out_of_memory(self, error: BaseException) -> bool:
        """Whether a driver's error means it ran out of memory (host MemoryError here)."""
        return isinstance(error, MemoryError)

    @abc.abstractmethod
    def _execution(
        self,
        op: str,
        variant: str,
        tile: int | None,
        A: Array,
        B: Array,
        params: Mapping[str, int] | None = None,
    ) -> Execution:
        """Compile what is needed and allocate the buffers for one product of ``op``."""

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


def _overridden(
    sampling: Sampling, warmup: int | None, samples: int | None, min_samples: int | None
) -> Sampling:
    """``sampling`` with the counts a caller gave by keyword."""
    given: dict[str, Any] = {"warmup": warmup, "max_samples": samples, "min_samples": min_samples}
    changes = {field: value for field, value in given.items() if value is not None}
    return dataclasses.replace(sampling, **changes) if changes else sampling
