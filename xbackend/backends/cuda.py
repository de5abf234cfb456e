"""The CUDA backend: the kernel families' .cu files through PyCUDA.

The backend owns an explicit context on the chosen GPU (``pycuda.autoinit`` is
never used): it is made current only while the backend works, and detached by
``close``. The GPU is chosen by index or by a piece of its name.

Kernel times come from CUDA events recorded around the launches, queued behind
kernels/cuda/hold.cu's ``hold`` so that they time the GPU's work and not the
host's launching of it (see ``_Gate``). Tile sizes reach nvcc as ``-DTILE=…``;
each compiled module is kept in xbackend's cache of cubins (``cubins.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from types import TracebackType
from typing import Any

import numpy as np

from xbackend.backends.compiled import CompiledBackend, index_environment
from xbackend.backends.cubins import entry, family_cubin
from xbackend.backends.cublas import cublas_math_environment, cublas_math_note
from xbackend.backends.execution import Device, fill_word
from xbackend.backends.machine_code import cuda_ptx
from xbackend.backends.vendor import check_library
from xbackend.errors import KernelCompileError, UnsupportedParameter, XBackendError
from xbackend.launches.kernels import STAMP, instances, read_kernel
from xbackend.launches.launch import (
    Buffer,
    KernelLaunch,
    LibraryCall,
    Product,
    Record,
    Step,
    packing,
)
from xbackend.launches.specs import DeviceInfo
from xbackend.machine import nvidia_kernel_driver
from xbackend.measuring.handles import Queued, Timer
from xbackend.measuring.launched import Launched, launched
from xbackend.measuring.stamps import StampSlots

try:
    import pycuda
    import pycuda.driver as drv
except ImportError as error:
    drv = None  # type: ignore[assignment, unused-ignore]
    _IMPORT_ERROR: ImportError | None = error
else:
    _IMPORT_ERROR = None

_MAX_GRID_Y = 65535
# The smallest cache flush: a GPU whose L2 attribute reads 0 still gets this many bytes.
FLUSH_FLOOR_BYTES = 64 * 2**20


# The poison of an output, for cuMemsetD32: a float32 quiet NaN, and a 32-bit pattern that
# is a NaN both as one float32 and, twice over, as one float64 (0x7FF87FF87FF87FF8: its
# exponent all ones). 0x7FC00000 twice over is 0x7FC000007FC00000, a float64 of 2.2e307.
_NAN_BITS_F32 = 0x7FC00000
_NAN_BITS_F64 = 0x7FF87FF8


def _init() -> None:
    drv.init()  # idempotent; raises if there is no driver or no device


def _version(encoded: int) -> str:
    """CUDA's 12040-style version numbers as '12.4'."""
    return f"{encoded // 1000}.{encoded % 1000 // 10}"


def _describe(index: int) -> DeviceInfo:
    device = drv.Device(index)
    attributes = drv.device_attribute
    major, minor = device.compute_capability()
    extra: dict[str, Any] = {
        "compute_capability": f"{major}.{minor}",
        "pycuda": pycuda.VERSION_TEXT,
        "pycuda_built_for_cuda": ".".join(map(str, drv.get_version())),
    }
    extra.update(_clocks(device))
    extra.update(index_environment())
    # The variables that override the vendor line's arithmetic (NVIDIA_TF32_OVERRIDE=1
    # makes cuBLAS's float32 GEMMs use TF32), recorded with every result where set.
    environment = cublas_math_environment()
    if environment:
        extra["cublas_math_environment"] = environment
        extra["cublas_math_note"] = cublas_math_note(environment)
    return DeviceInfo(
        name=device.name(),
        vendor="NVIDIA",
        kind="gpu",
        platform="CUDA",
        driver_version=nvidia_kernel_driver() or _version(drv.get_driver_version()),
        runtime_version=_version(drv.get_driver_version()),
        global_mem_bytes=device.total_memory(),
        compute_units=device.get_attribute(attributes.MULTIPROCESSOR_COUNT),
        local_mem_bytes=device.get_attribute(attributes.MAX_SHARED_MEMORY_PER_BLOCK),
        local_mem_opt_in_bytes=device.get_attribute(attributes.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
        cache_bytes=device.get_attribute(attributes.L2_CACHE_SIZE),
        max_work_group_size=device.get_attribute(attributes.MAX_THREADS_PER_BLOCK),
        registers=device.get_attribute(attributes.MAX_REGISTERS_PER_MULTIPROCESSOR),
        extra=extra,
    )


def _clocks(device: Any) -> dict[str, Any]:
    """The facts the peaks and the device monitor need, where this CUDA still says them
    (CUDA 13 deprecates the clock attributes): clocks in MHz, bus width, PCI address."""
    found: dict[str, Any] = {}
    names = {
        "clock_mhz": "CLOCK_RATE",  # kHz
        "memory_clock_mhz": "MEMORY_CLOCK_RATE",  # kHz
        "memory_bus_bits": "GLOBAL_MEMORY_BUS_WIDTH",
    }
    for key, name in names.items():
        attribute = getattr(drv.device_attribute, name, None)
        try:
            value = device.get_attribute(attribute) if attribute is not None else 0
        except drv.Error:
            value = 0
        if value:
            found[key] = value / 1000 if key.endswith("_mhz") else value
    with suppress(drv.Error):
        found["pci_bus_id"] = device.pci_bus_id()
    return found


class _Gate:
    """Holds the default stream while a timed launch is queued (kernels/cuda/hold.cu).

    ``with gate:`` queues ``hold``, which spins until the block ends and the host
    sets the release word, in page-locked host memory mapped into the device.
    Everything queued inside the block then runs back to back once it ends.
    ``gave_up`` says whether the last hold stopped waiting first (the host was
    late, or a tool ran the launch to completion before going on).
    """

    _GIVE_UP_CYCLES = 2**25  # 17-20 ms at the clocks of current GPUs

    def __init__(self, hold: Any):
        self._hold = hold
        self._words = drv.pagelocked_zeros((2,), np.int32, mem_flags=drv.host_alloc_flags.DEVICEMAP)
        self._pointer = np.intp(self._words.base.get_device_pointer())

    @property
    def gave_up(self) -> bool:
        """Read after the held work is finished."""
        return bool(self._words[1])

    def __enter__(self) -> None:
        self._words[:] = 0
        self._hold.prepared_call((1, 1, 1), (1, 1, 1), self._pointer, self._GIVE_UP_CYCLES)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._words[0] = 1  # also after a failed launch: the stream must not stay held

    def free(self) -> None:
        """Give back the page-locked word; its context must be current."""
        self._words.base.free()


class _CudaDevice(Device):
    """A CUDA context's default stream, as executions need it: memory, copies, the
    timing gate, the cache flush, and the cuBLAS handle where the vendor line runs."""

    def __init__(self, gate: _Gate, cublas: Any = None, flush: Any = None):
        self._gate, self._cublas, self._flush = gate, cublas, flush

    def flush_cache(self) -> None:
        buffer, nbytes = self._flush()
        drv.memset_d32(buffer, 0x3F800000, nbytes // 4)  # writes go through the L2
        drv.Context.synchronize()

    def pinned(self, shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
        return np.asarray(drv.pagelocked_empty(shape, dtype))  # the same array, typed

    def launched(self, work: Callable[[], object]) -> Launched | str:
        return launched(work, own=("hold",))  # CUPTI's records, but the stream's hold

    def unpin(self, array: np.ndarray[Any, Any]) -> None:
        allocation: Any = array.base  # PyCUDA's HostAllocation
        allocation.free()

    def allocate(self, nbytes: int, access: str) -> Any:
        return drv.mem_alloc(nbytes)

    def free(self, buffer: Any) -> None:
        buffer.free()

    def upload(self, copies: Sequence[tuple[Any, np.ndarray[Any, Any]]]) -> None:
        for buffer, array in copies:
            drv.memcpy_htod(buffer, array)

    def download(self, target: np.ndarray[Any, Any], buffer: Any, offset: int = 0) -> None:
        drv.memcpy_dtoh(target, int(buffer) + offset)

    def fill(self, targets: Sequence[tuple[Any, int]], dtype: np.dtype[Any]) -> None:
        # NaN for floats, the most negative int for integers; the workspaces too.
        pattern = fill_word(dtype, _NAN_BITS_F64 if dtype.itemsize == 8 else _NAN_BITS_F32)
        for buffer, nbytes in targets:
            drv.memset_d32(buffer, pattern, nbytes // 4)
        drv.Context.synchronize()

    def bind(
        self,
        step: Step,
        kernel: Any,
        buffers: Mapping[str, Any],
        dtype: np.dtype[Any],
        stamps: StampSlots | None = None,
    ) -> Queued:
        if isinstance(step, LibraryCall):
            # cuBLAS takes raw device pointers, in the order of GEMM_PARAMETERS.
            values = [
                int(buffers[value.name]) if isinstance(value, Buffer) else value
                for value in step.args.values()
            ]
            cublas = self._cublas
            return lambda: cublas.gemm(dtype, *values)
        args = [
            buffers[value.name]
            if isinstance(value, Buffer)
            else value.pack(lambda buffer: int(buffers[buffer.name]))
            if isinstance(value, Record)
            else value
            for value in step.values()
        ]
        grid, block, shared = step.grid, step.block, step.shared_bytes
        if shared:  # past the 48 KB a kernel may declare: its function must opt in
            kernel.set_attribute(drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, shared)
        if stamps is None:
            return lambda: kernel.prepared_call(grid, block, *args, shared_size=shared)
        return lambda: kernel.prepared_call(
            grid, block, *args, stamps.buffer, stamps.take(), shared_size=shared
        )

    def timer(self, product: Product) -> Timer:
        return _EventTimer(self._gate)


class _EventTimer:
    """CUDA events around one execution's steps, queued behind the gate (see _Gate)."""

    clock = "cuda-events"

    def __init__(self, gate: _Gate):
        self._gate = gate
        self._start, self._end = drv.Event(), drv.Event()
        self._runs = 0
        self.gave_up = False

    def __call__(self, steps: Sequence[Queued], launches: int = 1) -> float:
        with self._gate:
            self._start.record()
            for _ in range(launches):
                for queue in steps:
                    queue()
            self._end.record()
        self._end.synchronize()
        self._runs += 1
        # The first run may load modules on first use (CUDA's lazy loading, cuBLAS) and
        # keep the GPU waiting: it is never a timed sample. Later, a hold that gave up
        # marks its sample, which the statistics then leave out (sampler.py).
        self.gave_up = self._gate.gave_up and self._runs > 1
        return float(self._start.time_till(self._end)) * 1e-3


class CudaBackend(CompiledBackend):
    name = "cuda"
    description = "the kernel families' CUDA files through PyCUDA, on an NVIDIA GPU"
    VENDOR_LINES = (
        "cuBLAS (S/DGEMM, no TF32) on the same device buffers, through its C library",
        "the pair sums by a kernel, then cuBLAS on the half-size product",
    )
    GROUP_WORDS = ("threads", "shared")
    LANGUAGE = "cuda"

    def __init__(self, device: str | int | None = None):
        available, reason = self.available()
        if not available:
            raise XBackendError(reason)
        index = self._select(device)
        self._device = _describe(index)
        # What the kernels are compiled for (see _cubin).
        self._arch = "sm_{}{}".format(*drv.Device(index).compute_capability())
        self._context = drv.Device(index).make_context()
        self._context.pop()  # current only inside _active()
        self._cublas: Any = None  # made on first use of the vendor variant
        self._cublas_problem: str | None = None
        # (family, options, template instances) -> (module, its cubin)
        self._modules: dict[tuple[str, tuple[str, ...], tuple[str, ...]], Any] = {}
        self._functions: dict[tuple[str, tuple[str, ...], str], Any] = {}
        self._held: _Gate | None = None  # made on first use: see _gate
        self._flusher: tuple[Any, int] | None = None  # made on first use: see _flush_buffer

    @staticmethod
    def _select(selector: str | int | None) -> int:
        count = drv.Device.count()
        if selector is None:
            return 0
        text = str(selector).strip()
        if text.isdigit() and int(text) < count:
            return int(text)
        for index in range(count):
            if not text.isdigit() and text.lower() in drv.Device(index).name().lower():
                return index
        names = "; ".join(f"{i}: {drv.Device(i).name()}" for i in range(count))
        raise UnsupportedParameter(f"no CUDA device matches {selector!r}; devices: {names}")

    @classmethod
    def available(cls) -> tuple[bool, str]:
        if drv is None:
            return False, (
                f"pycuda is not installed ({_IMPORT_ERROR}); it needs the CUDA toolkit "
                "and an NVIDIA driver: pip install 'xbackend[cuda]'"
            )
        try:
            _init()
            count = drv.Device.count()
        except Exception as error:
            return False, f"the CUDA driver did not start: {error}"
        if count == 0:
            return False, "the CUDA driver found no GPU"
        return True, ""

    @classmethod
    def list_devices(cls) -> list[DeviceInfo]:
        if not cls.available()[0]:
            return []
        return [_describe(index) for index in range(drv.Device.count())]

    @property
    def device(self) -> DeviceInfo:
        return self._device

    @contextmanager
    def _active(self) -> Iterator[None]:
        self._context.push()
        try:
            yield
        finally:
            drv.Context.pop()

    def _function(
        self,
        family: str,
        options: tuple[str, ...],
        kernel: str,
        args: str,
        instanced: tuple[str, ...] = (),
    ) -> Any:
        """A kernel of a family's file built with ``options`` (and the template instances
        ``instanced``): compiled once, reused.

        ``args`` is PyCUDA's signature of its arguments ("P" a pointer, "i" an int).
        """
        key = (family, options, kernel)
        if key not in self._functions:
            module_key = (family, options, instanced)
            if module_key not in self._modules:
                self._modules[module_key] = self._module(family, options, instanced)
            module, built = self._modules[module_key]
            # A kernel is found by its name, or in a build without extern "C" around it,
            # by the symbol its name was mangled to (a template's instance, ``mm<float>``).
            function = module.get_function(entry(built, kernel))
            function.prepare(args)
            self._functions[key] = function
        return self._functions[key]

    def _module(
        self, family: str, options: tuple[str, ...], instanced: tuple[str, ...]
    ) -> tuple[Any, bytes]:
        """A family's file built and loaded in this context, with its cubin."""
        path, source = read_kernel(family, "cuda", STAMP in options)
        try:
            built = self._cubin(family, source, options, instanced=instanced)
        except drv.CompileError as error:
            raise KernelCompileError(
                backend=self.name,
                path=path,
                source=source,
                options=list(options),
                device=self._device.name,
                log=error.stderr or str(error),
            ) from error
        try:
            return drv.module_from_buffer(built), built  # in the current context
        except drv.Error:  # a cached cubin the driver refuses: built again
            built = self._cubin(family, source, options, True, instanced)
            return drv.module_from_buffer(built), built

    def _prebuild(self, family: str, options: tuple[str, ...], dtype: np.dtype[Any]) -> None:
        """Compile into the cache of cubins (``cubins.py``), as ``_function`` will."""
        instanced = instances(family, dtype.name)
        if (family, options, instanced) in self._modules:
            return
        _, source = read_kernel(family, "cuda", STAMP in options)
        self._cubin(family, source, options, instanced=instanced)

    def _cubin(
        self, family: str, source: str, options: tuple[str, ...], fresh: bool = False,
        instanced: tuple[str, ...] = (),
    ) -> bytes:  # fmt: skip
        """A kernel file's cubin for this device (``cubins.family_cubin``), for the
        architecture named, since a thread of ``prebuild`` has no current context."""
        return family_cubin(family, source, options, self._arch, instanced, fresh)

    def _gate(self) -> _Gate:
        """The stream's gate for timed launches, made once per context."""
        if self._held is None:
            hold = self._function("hold", (), "hold", "Pq")
            self._held = _Gate(hold)
        return self._held

    def variant_problem(self, variant: str, dtype: np.dtype[Any], op: str = "mm") -> str | None:
        if variant != "vendor":
            return super().variant_problem(variant, dtype, op)
        from xbackend.backends.cublas import Cublas
        from xbackend.backends.vendor import VendorUnavailable

        if self._cublas is None and self._cublas_problem is None:
            with self._active():
                try:
                    self._cublas = Cublas()
                except VendorUnavailable as error:
                    self._cublas_problem = str(error)
        return self._cublas_problem or Cublas.dtype_problem(dtype)

    def _compile(self, launch: KernelLaunch, dtype: np.dtype[Any]) -> Any:
        signature = packing(launch.values())  # PyCUDA's signature: Python's struct codes
        signature += "Pi" if launch.stamped else ""  # the stamps buffer and the slot
        instanced = instances(launch.family, dtype.name)
        return self._function(launch.family, launch.options, launch.kernel, signature, instanced)

    def _ptx(self, launch: KernelLaunch, dtype: np.dtype[Any]) -> tuple[str, str]:
        return cuda_ptx(launch, dtype, self._arch), self._arch

    def _device_clock(self) -> bool:
        return True  # every NVIDIA GPU has %globaltimer

    def _device_handle(self) -> Device:
        return _CudaDevice(self._gate(), self._cublas, self._flush_buffer)

    def _flush_buffer(self) -> tuple[Any, int]:
        """A buffer four times the L2 (CUDA's attribute), made on first use."""
        if self._flusher is None:
            l2 = self._device.cache_bytes or 0
            nbytes = max(4 * l2, FLUSH_FLOOR_BYTES)
            self._flusher = (drv.mem_alloc(nbytes), nbytes)
        return self._flusher

    def _check_product(self, product: Product) -> None:
        for step in product.steps:
            if isinstance(step, LibraryCall):
                check_library("cuBLAS", step.args, int32=True)
        for launch in product.launches:
            if launch.grid[1] > _MAX_GRID_Y or launch.grid[2] > _MAX_GRID_Y:
                raise UnsupportedParameter(
                    f"cuda: {product.output_shape} needs more than {_MAX_GRID_Y} blocks "
                    f"along y or z with tile {product.tile}"
                )

    def _is_out_of_memory(self, error: BaseException) -> bool:
        return isinstance(error, drv.MemoryError) or super()._is_out_of_memory(error)

    def close(self) -> None:
        context = getattr(self, "_context", None)
        if context is not None:
            self._functions.clear()
            context.push()
            try:
                if self._cublas is not None:
                    self._cublas.close()  # its handle belongs to this context
                if self._held is not None:
                    self._held.free()
                    self._held = None
                if self._flusher is not None:
                    self._flusher[0].free()
                    self._flusher = None
                self._modules.clear()  # unloads the modules while their context is current
                drv.Context.synchronize()
            except drv.Error:
                pass  # a kernel fault left the context unusable: it is going anyway
            finally:
                drv.Context.pop()
            context.detach()
            self._context = None
        super().close()
