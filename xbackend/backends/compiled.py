"""What the two compiled backends (CUDA, OpenCL) share: plan, compile, run.

A product is planned as launches (``plans.py``), each launch's kernel is compiled
once per file and options and reused, and the product runs on the backend's
device handle (``execution.py``). A tuned variant's configuration comes from the
call's parameters, else from the backend's ``choices``, else from the default.

The kernels' element offsets are 32-bit ints unless a product needs 64-bit ones
(``plans.py`` decides, from its sizes); ``XBACKEND_INDEX=wide`` or ``use_index("wide")``
gives every product the wide build, for the tests at small sizes and for measuring
what it costs (scripts/index_cost.py).
"""

from __future__ import annotations

import abc
import contextlib
import os
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from xbackend import families
from xbackend.backends import machine_code
from xbackend.backends.ceilings import (
    FLOAT_DTYPES,
    Ceilings,
    Timed,
    copy_ceiling,
    extended,
    fma_ceiling,
    stream_dtype,
    stream_rates,
)
from xbackend.backends.execution import Device, LaunchExecution, clock_of
from xbackend.backends.interface import Backend, Execution
from xbackend.backends.machine_code import MachineCode
from xbackend.errors import UnsupportedParameter, XBackendError
from xbackend.launches import element, warp
from xbackend.launches.choices import ChoiceRequest
from xbackend.launches.geometries import geometry_of
from xbackend.launches.kernels import SUM_BLOCK, WIDE_INDEX, has_stamps, source_digest
from xbackend.launches.launch import KernelLaunch, Product
from xbackend.launches.operands import check_operands, dimension_problem
from xbackend.launches.plans import plan_vendor
from xbackend.launches.specs import VariantSpec, VariantTable
from xbackend.measuring.monitor import DeviceMonitor, monitor_for
from xbackend.operations import Shape, operation

Array = np.ndarray[Any, Any]
# "wide": every product's kernels get 64-bit offsets; "auto" (or unset): only those of a
# product that needs them.
INDEX_ENV = "XBACKEND_INDEX"
INDEX_MODES = ("auto", "wide")
PREBUILD_THREADS = 8  # builds at once in prebuild (each nvcc is a process of its own)
# "auto" (or unset): kernels time themselves by the device's clock where it has one
# that both languages read (stamps.py); "api": by the API's clock everywhere (CUDA
# events, OpenCL profiling), as before the stamps, for comparing the two.
CLOCK_ENV = "XBACKEND_CLOCK"
CLOCK_MODES = ("auto", "api")


def index_environment() -> dict[str, str]:
    """``XBACKEND_INDEX`` and ``XBACKEND_CLOCK`` where they are set, for the device's
    record: results measured with every product wide, or by the API's clock where the
    device has its own, must say so."""
    found = {"index": os.environ.get(INDEX_ENV, "").strip()}
    found["clock"] = os.environ.get(CLOCK_ENV, "").strip()
    return {name: mode for name, mode in found.items() if mode}


def clock_mode() -> str:
    """``XBACKEND_CLOCK``'s mode: "auto" (the default) or "api"."""
    mode = os.environ.get(CLOCK_ENV, "").strip() or "auto"
    if mode not in CLOCK_MODES:
        raise XBackendError(f"{CLOCK_ENV}={mode!r}: set it to one of {', '.join(CLOCK_MODES)}")
    return mode


class CompiledBackend(Backend):
    """A backend that runs the kernel files of ``LANGUAGE`` ("cuda", "opencl")."""

    LANGUAGE: ClassVar[str]
    # Its words for the workers of a group and for the memory the group stages tiles
    # in; tile_problem checks a group against the device's limits (groups.py).
    GROUP_WORDS: ClassVar[tuple[str, str]]
    # The vendor library's lines: its GEMM, and the reduced product through it.
    VENDOR_LINES: ClassVar[tuple[str, str]]

    _tables: dict[tuple[Path, ...], VariantTable] | None = None

    def kernel_language(self) -> str:
        return self.LANGUAGE

    def variant_table(self) -> VariantTable:
        """The variants of every kernel family with a source in this backend's language
        (the shipped ones and the user's: ``xbackend.families``), and the vendor's lines;
        made once for each set of the user's folders."""
        folders = families.user_folders()
        if self._tables is None:
            self._tables = {}
        if folders not in self._tables:
            self._tables[folders] = self._made_table()
        return self._tables[folders]

    def _made_table(self) -> VariantTable:
        workers, memory = self.GROUP_WORDS
        table = families.variant_table(self.LANGUAGE, workers.removesuffix("s"), memory)
        gemm, reduced = self.VENDOR_LINES
        table.setdefault("mm", {})["vendor"] = VariantSpec("vendor", gemm)
        table.setdefault("rmm", {})["vendor"] = VariantSpec("vendor", reduced)
        return table

    def tile_problem(
        self,
        variant: str,
        tile: int | None,
        itemsize: int = 4,
        op: str = "mm",
        params: Mapping[str, int] | None = None,
    ) -> str | None:
        problem = super().tile_problem(variant, tile, itemsize, op, params)
        if problem is not None:
            return problem
        spec = self.variant_spec(variant, op)
        geometry = geometry_of(spec)
        if geometry is None:
            return None if not spec.kernel else f"its geometry '{spec.geometry}' is not known"
        return geometry.problem(self.device, spec, tile, itemsize, self.GROUP_WORDS, params)

    def variant_problem(self, variant: str, dtype: np.dtype[Any], op: str = "mm") -> str | None:
        """Why ``variant`` cannot compute in ``dtype``: its family says which types its
        kernels compute in (a kernel with ``float`` written into it)."""
        spec = self.variant_spec(variant, op)
        if spec.dtypes and np.dtype(dtype).name not in spec.dtypes:
            return f"its kernels compute in {', '.join(spec.dtypes)} only ({spec.source})"
        return None

    def shape_problem(
        self, variant: str, op: str, shape: Shape, batch: int = 1, tile: int | None = None
    ) -> str | None:
        spec = self.variant_spec(variant, op)
        if not spec.kernel or not spec.size_rules:
            return None
        output = operation(op).output_size(shape)
        sizes = element.size_names(shape.M, shape.N, shape.K, batch, output)
        names = {**spec.names_at(tile if tile is not None else spec.default_tile), **sizes}
        return element.shape_problem(spec, names)

    def preferred_tile(self, variant: str, op: str, dtype: np.dtype[Any]) -> int | None:
        """The tile ``xbackend tune`` chose for a fixed-tile variant on this device (the
        largest shape class it tuned), or None: its family's default is used."""
        spec = self.variant_spec(variant, op)
        if not spec.kernel:
            return None
        for shape_class in ("large", "medium", "small"):
            chosen = self.choice(variant, op, dtype, shape_class)
            if chosen is not None and set(chosen) == {"TILE"}:
                return chosen["TILE"]
        return None

    def choice(
        self,
        variant: str,
        op: str,
        dtype: np.dtype[Any],
        shape_class: str,
        size: tuple[int, int, int] | None = None,
    ) -> Mapping[str, int] | None:
        """The parameters this backend's ``choices`` (the tune cache, then the shipped
        database) hold for ``variant`` on this device, for the kernel as it is built now
        and runnable here (a tile, or block tiles); None without them."""
        if self.choices is None:
            return None

        def device_problem(params: Mapping[str, int]) -> str | None:
            tile = params.get("TILE", params.get("BM"))
            return self.tile_problem(variant, tile, dtype.itemsize, op, params)

        request = ChoiceRequest(
            self.name, self.device.name, variant, operation(op), dtype.name, shape_class,
            size, self.kernel_build(variant, op), device_problem,
        )  # fmt: skip
        return self.choices.choice(request)

    def chosen_parameters(
        self, spec: VariantSpec, op: str, tile: int | None, dtype: np.dtype[Any]
    ) -> dict[str, int] | None:
        """The parameters ``xbackend tune`` chose for a variant whose family declares them
        (the largest shape class it tuned), where they go with ``tile``; else None (the
        family's defaults)."""
        for shape_class in ("large", "medium", "small"):
            chosen = self.choice(spec.name, op, dtype, shape_class)
            if chosen is None or chosen.get("TILE", tile) != tile:
                continue
            try:
                spec.configured_tile(tile, chosen)  # parameters its manifest still declares
            except UnsupportedParameter:
                continue
            return {name: value for name, value in chosen.items() if name != "TILE"}
        return None

    _index: str | None = None  # use_index's mode; None: XBACKEND_INDEX's

    def use_index(self, mode: str | None) -> None:
        """Build every product's kernels with 64-bit offsets ("wide"), or only those of
        products that need them ("auto"); None: as ``XBACKEND_INDEX`` says."""
        if mode is not None and mode not in INDEX_MODES:
            raise UnsupportedParameter(f"index mode {mode!r}: one of {', '.join(INDEX_MODES)}")
        self._index = mode

    @property
    def index_mode(self) -> str:
        """The index mode in force: "wide" (every product 64-bit offsets) or "auto"."""
        mode = self._index or os.environ.get(INDEX_ENV, "").strip() or "auto"
        if mode not in INDEX_MODES:
            raise XBackendError(f"{INDEX_ENV}={mode!r}: set it to one of {', '.join(INDEX_MODES)}")
        return mode

    def index_bits(
        self, A: Array, B: Array, variant: str, tile: int | None = None, op: str = "mm"
    ) -> int:
        """How wide the element offsets of this product's kernels are: 32 (the default
        build) or 64 (the wide one); 0 where none runs (the vendor's GEMM alone). Plans
        the product, allocating nothing on the device."""
        A, B = check_operands(A, B, op)
        tile = self.resolve_tile(variant, tile, op, A.dtype)
        launches = self._plan(op, variant, tile, A, B).launches
        if not launches:
            return 0
        return 64 if any(launch.wide_index for launch in launches) else 32

    _monitor: DeviceMonitor | None = None

    def monitor(self) -> DeviceMonitor:
        """The device's clocks and throttling through NVML, where it is an NVIDIA GPU."""
        if self._monitor is None:
            self._monitor = monitor_for(self.device)
        return self._monitor

    _measured: Ceilings | None = None

    def ceilings(self, dtypes: Iterable[str] = ("float32",)) -> Ceilings:
        """This device's ceilings, measured by kernels/*/ceilings (``ceilings.py``) the
        first time each is asked for, then kept: float dtypes it cannot compute in are
        left out."""
        wanted = [d for d in dtypes if d in FLOAT_DTYPES]
        wanted = [d for d in wanted if self.dtype_problem(np.dtype(d)) is None]
        self._measured = extended(
            self._measured,
            wanted,
            lambda dtype: fma_ceiling(self.device, self.run_product, dtype),
            lambda: copy_ceiling(self.device, self.run_product),
            self._triad,
        )
        return self._measured

    def _triad(self) -> tuple[float, str]:
        """BabelStream's triad on this device, in its element type (``stream_dtype``)."""
        dtype = stream_dtype(self.dtype_problem)
        return stream_rates(self.device, self.run_product, dtype, ops=["triad"])["triad"]

    def run_product(self, product: Product, runs: int, keep_output: bool = False) -> Timed:
        """Run a planned product as a measurement does (compiled once, this device's
        clock, CUDA's hold, OpenCL's barrier): its inputs uploaded and its buffers
        poisoned, one untimed run, then ``runs`` timed ones; the output of the last
        where ``keep_output``."""
        with self._active():
            execution = self._launch_execution(product)
            try:
                execution.upload()
                execution.poison()
                execution.run()
                seconds = [execution.run() for _ in range(runs)]
                output = execution.download().copy() if keep_output else None
                return Timed(seconds, output, execution.clock)
            finally:
                execution.release()

    def close(self) -> None:
        if self._monitor is not None:
            self._monitor.close()
            self._monitor = None
        super().close()

    def prebuild(
        self,
        variant: str,
        op: str,
        A: Array,
        B: Array,
        configurations: Iterable[Mapping[str, int]],
    ) -> None:
        """Build each configuration's kernels in threads, PREBUILD_THREADS at once:
        compilers run as processes of their own (nvcc) or release the interpreter
        (an OpenCL driver's build), so a batch of builds takes about as long as its
        longest few instead of their sum."""
        builds: dict[tuple[str, tuple[str, ...]], np.dtype[Any]] = {}
        for config in configurations:
            try:
                product = self._plan(op, variant, None, A, B, config)
            except XBackendError:
                continue  # its run says why
            for launch in self._as_built(product).launches:  # as its run builds it
                builds.setdefault((launch.family, launch.options), product.dtype)
        threads = min(PREBUILD_THREADS, os.cpu_count() or 1, len(builds))
        if threads < 2:
            return
        with ThreadPoolExecutor(threads) as pool:
            for done in [pool.submit(self._prebuild, *key, dtype) for key, dtype in builds.items()]:
                # A build that failed fails again at its run, where its error is named.
                with contextlib.suppress(Exception):
                    done.result()

    def _prebuild(self, family: str, options: tuple[str, ...], dtype: np.dtype[Any]) -> None:
        """Build a kernel file with ``options`` so that its first run finds it built;
        called from a thread of ``prebuild``. Without this, kernels build at first run."""

    def kernel_build(self, variant: str, op: str = "mm") -> dict[str, str]:
        spec = self.variant_spec(variant, op)
        build = super().kernel_build(variant, op)
        if spec.family:
            fixed = (f"-DPAD={warp.PAD}", f"-DSUM_BLOCK={SUM_BLOCK}", *self._extra_options())
            # Tuned under XBACKEND_INDEX=wide, a choice is the wide build's.
            fixed += (WIDE_INDEX,) if self.index_mode == "wide" else ()
            build["kernel"] = source_digest(spec.family, self.LANGUAGE, fixed)
        return build

    # -- what each compiled backend supplies -------------------------------------------

    @abc.abstractmethod
    def _compile(self, launch: KernelLaunch, dtype: np.dtype[Any]) -> Any:
        """The launch's kernel, compiled once per file and options and then reused."""

    @abc.abstractmethod
    def _device_handle(self) -> Device:
        """What executions need of this backend's device (see execution.Device)."""

    def _extra_options(self) -> tuple[str, ...]:
        """Build options every kernel gets beyond those of its launch."""
        return ()

    def _check_product(self, product: Product) -> None:
        """Refuse a product this device cannot launch (CUDA's grid limits)."""

    def _device_clock(self) -> bool:
        """Whether this device has a clock its kernels can read in both languages
        (NVIDIA's ``%globaltimer``): then they time themselves (stamps.py)."""
        return False

    def stamps(self, product: Product) -> bool:
        """Whether ``product`` is timed by its kernels' stamps: on a device with its own
        clock, unless ``XBACKEND_CLOCK=api``, for products of kernels alone whose files
        take the hooks (a library call cannot stamp: it keeps the API's clock)."""
        return (
            clock_mode() == "auto"
            and not product.calls_library
            and bool(product.launches)
            and all(has_stamps(launch.family, self.LANGUAGE) for launch in product.launches)
            and self._device_clock()
        )

    def _as_built(self, product: Product) -> Product:
        """The product as it is built to run: its kernels stamped where ``stamps`` says."""
        return product.with_stamps() if self.stamps(product) else product

    # -- planning and running --------------------------------------------------------------

    def _execution(
        self,
        op: str,
        variant: str,
        tile: int | None,
        A: Array,
        B: Array,
        params: Mapping[str, int] | None = None,
    ) -> Execution:
        return self._launch_execution(self._plan(op, variant, tile, A, B, params))

    def planned(self, op: str, variant: str, tile: int | None, A: Array, B: Array) -> Product:
        """The product as it would run for A and B, planned only: nothing is allocated on
        the device (a variant that sizes its launch by its kernel's registers builds the
        kernel to read them); ``sweep/fairness.py`` compares two backends' plans."""
        A, B = check_operands(A, B, op)
        tile = self.resolve_tile(variant, tile, op, A.dtype)
        with self._active():
            return self._as_built(self._plan(op, variant, tile, A, B))

    def clock_of(self, product: Product) -> str:
        """Which clock would time ``product`` here (``Execution.clock``): the kernels'
        stamps where it is stamped, else the device's timer (``execution.clock_of``)."""
        with self._active():
            return clock_of(self._device_handle(), product)

    def machine_code(self, launch: KernelLaunch, dtype: np.dtype[Any]) -> MachineCode:
        """What the compiler made of a planned kernel (``machine_code.py``): its registers,
        spills and shared memory, and its hot loop's instructions where nvdisasm is
        installed; an ``XBackendError`` where its PTX cannot be had or read here."""
        built = self._ptx(launch, dtype)
        if built is None:
            raise XBackendError(f"{self.name} on {self.device.name} gives no PTX to read")
        ptx, arch = built
        return machine_code.read(ptx, launch.kernel, arch)

    def _ptx(self, launch: KernelLaunch, dtype: np.dtype[Any]) -> tuple[str, str] | None:
        """A kernel's PTX as this backend builds it, and the architecture it runs on; None
        where its build is not PTX (a CPU's OpenCL, another vendor's GPU)."""
        return None

    def _launch_execution(self, product: Product) -> LaunchExecution:
        """A planned product on this device: its kernels compiled, its buffers allocated."""
        self._check_product(product)
        product = self._as_built(product)
        kernels = [
            self._compile(step, product.dtype) if isinstance(step, KernelLaunch) else None
            for step in product.steps
        ]
        return LaunchExecution(self._device_handle(), product, kernels)

    def _plan(
        self,
        op: str,
        variant: str,
        tile: int | None,
        A: Array,
        B: Array,
        params: Mapping[str, int] | None = None,
    ) -> Product:
        """The launches of one product: kernels, options, geometry, buffers."""
        problem = dimension_problem(A, B)
        if problem:
            raise UnsupportedParameter(f"{self.name}: {problem}")
        spec = self.variant_spec(variant, op)
        wide = self.index_mode == "wide"
        if not spec.kernel:  # the vendor's library
            return plan_vendor(op, A, B, wide)
        geometry = geometry_of(spec)
        if geometry is None:
            raise UnsupportedParameter(f"{self.name} {variant}: its geometry '{spec.geometry}' "
                                       "is not known")  # fmt: skip
        return geometry.plan(self, op, spec, tile, A, B, params, wide)
