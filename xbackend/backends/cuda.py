"""The CUDA backend: kernels from ``kernels/cuda/`` through PyCUDA.

The backend owns an explicit context on the chosen GPU (``pycuda.autoinit`` is
never used): it is made current only while the backend works, and detached by
``close``. The GPU is chosen by index or by a piece of its name.

Kernel times come from CUDA events recorded around the launch. Tile sizes reach
nvcc as ``-DTILE=…``; PyCUDA caches each compiled module by source and options.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import numpy as np

from xbackend.backends.base import (
    Backend,
    DeviceInfo,
    Execution,
    KernelCompileError,
    Launch,
    UnsupportedParameter,
    VariantTable,
    XBackendError,
    build_options,
    compiled_variants,
    group_problem,
    kernel_family,
    plan_launch,
    read_kernel,
)

try:
    import pycuda
    import pycuda.driver as drv
except ImportError as error:
    drv = None  # type: ignore[assignment]
    _IMPORT_ERROR: ImportError | None = error
else:
    _IMPORT_ERROR = None

_MAX_GRID_Y = 65535
# The bit pattern of a float32 quiet NaN, for cuMemsetD32.
_NAN_BITS_F32 = 0x7FC00000


def _init() -> None:
    drv.init()  # idempotent; raises if there is no driver or no device


def _version(encoded: int) -> str:
    """CUDA's 12040-style version numbers as '12.4'."""
    return f"{encoded // 1000}.{encoded % 1000 // 10}"


def _kernel_driver() -> str:
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as file:
            first = file.readline()
    except OSError:
        return ""
    words = first.split()
    return next((w for w in words if w.count(".") >= 1 and w[0].isdigit()), "")


def _describe(index: int) -> DeviceInfo:
    device = drv.Device(index)
    attributes = drv.device_attribute
    major, minor = device.compute_capability()
    return DeviceInfo(
        name=device.name(),
        vendor="NVIDIA",
        kind="gpu",
        platform="CUDA",
        driver_version=_kernel_driver() or _version(drv.get_driver_version()),
        runtime_version=_version(drv.get_driver_version()),
        global_mem_bytes=device.total_memory(),
        compute_units=device.get_attribute(attributes.MULTIPROCESSOR_COUNT),
        local_mem_bytes=device.get_attribute(attributes.MAX_SHARED_MEMORY_PER_BLOCK),
        cache_bytes=device.get_attribute(attributes.L2_CACHE_SIZE),
        max_work_group_size=device.get_attribute(attributes.MAX_THREADS_PER_BLOCK),
        extra={
            "compute_capability": f"{major}.{minor}",
            "pycuda": pycuda.VERSION_TEXT,
            "pycuda_built_for_cuda": ".".join(map(str, drv.get_version())),
        },
    )


class _CudaExecution(Execution):
    def __init__(self, function: Any, launch: Launch):
        self._inputs = launch.inputs
        self._C = np.empty(launch.output_shape, dtype=launch.inputs[0].dtype)
        self._buffers = [drv.mem_alloc(X.nbytes) for X in (*launch.inputs, self._C)]
        self._function = function
        self._args = (*self._buffers, *(np.int32(value) for value in launch.scalars))
        self._grid = launch.groups
        self._block = launch.block
        self._start, self._end = drv.Event(), drv.Event()

    def upload(self) -> None:
        drv.memcpy_htod(self._buffers[0], self._inputs[0])
        drv.memcpy_htod(self._buffers[1], self._inputs[1])

    def poison(self) -> None:
        # NaN for floats (0x7FC00000 in every 32-bit word is a NaN in float64
        # too), the most negative int for integers.
        pattern = _NAN_BITS_F32 if self._C.dtype.kind == "f" else 0x80000000
        drv.memset_d32(self._buffers[2], pattern, self._C.nbytes // 4)
        drv.Context.synchronize()

    def run(self) -> float:
        self._start.record()
        self._function.prepared_call(self._grid, self._block, *self._args)
        self._end.record()
        self._end.synchronize()
        return self._start.time_till(self._end) * 1e-3

    def download(self) -> np.ndarray:
        drv.memcpy_dtoh(self._C, self._buffers[2])
        return self._C.copy()

    def release(self) -> None:
        for buffer in self._buffers:
            buffer.free()
        self._buffers = []


class CudaBackend(Backend):
    name = "cuda"
    description = "PyCUDA kernels from kernels/cuda on an NVIDIA GPU"
    VARIANTS: ClassVar[VariantTable] = compiled_variants("thread", "shared")

    def __init__(self, device: str | int | None = None):
        available, reason = self.available()
        if not available:
            raise XBackendError(reason)
        index = self._select(device)
        self._device = _describe(index)
        self._context = drv.Device(index).make_context()
        self._context.pop()  # current only inside _active()
        self._functions: dict[tuple[str, str, int, str], Any] = {}
        self._modules: list[Any] = []

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

    def tile_problem(
        self, variant: str, tile: int, itemsize: int = 4, op: str = "mm"
    ) -> str | None:
        return super().tile_problem(variant, tile, itemsize, op) or group_problem(
            self._device, self.variant_spec(variant, op), tile, itemsize, "threads", "shared"
        )

    @contextmanager
    def _active(self) -> Iterator[None]:
        self._context.push()
        try:
            yield
        finally:
            drv.Context.pop()

    def _function(self, op: str, variant: str, tile: int, dtype: np.dtype) -> Any:
        """The compiled kernel, built once per (family, variant, tile, dtype) and reused."""
        spec = self.variant_spec(variant, op)
        family = kernel_family(op, spec)
        key = (family, variant, tile, dtype.name)
        if key not in self._functions:
            from pycuda.compiler import SourceModule

            path, source = read_kernel(family, "cuda")
            options = build_options(tile, dtype, spec)
            try:
                module = SourceModule(source, options=options, no_extern_c=True)
            except drv.CompileError as error:
                raise KernelCompileError(
                    backend=self.name,
                    path=path,
                    source=source,
                    options=options,
                    device=self._device.name,
                    log=error.stderr or str(error),
                ) from error
            function = module.get_function(spec.kernel)
            # Three pointers, then the integer arguments of the family (see plan_launch).
            function.prepare("PPP" + "i" * (6 if family == "rmm" else 9))
            self._modules.append(module)
            self._functions[key] = function
        return self._functions[key]

    def _execution(
        self, op: str, variant: str, tile: int | None, A: np.ndarray, B: np.ndarray
    ) -> Execution:
        assert tile is not None
        per_thread = self.variant_spec(variant, op).per_thread(tile)
        launch = plan_launch(op, A, B, tile, per_thread)
        if launch.groups[1] > _MAX_GRID_Y or launch.groups[2] > _MAX_GRID_Y:
            raise UnsupportedParameter(
                f"cuda: {launch.output_shape} needs more than {_MAX_GRID_Y} blocks "
                f"along y or z with tile {tile}"
            )
        return _CudaExecution(self._function(op, variant, tile, A.dtype), launch)

    def _is_out_of_memory(self, error: BaseException) -> bool:
        return isinstance(error, drv.MemoryError) or super()._is_out_of_memory(error)

    def close(self) -> None:
        context = getattr(self, "_context", None)
        if context is not None:
            self._functions.clear()
            context.push()
            try:
                self._modules.clear()  # unloads the modules while their context is current
                drv.Context.synchronize()
            except drv.Error:
                pass  # a kernel fault left the context unusable: it is going anyway
            finally:
                drv.Context.pop()
            context.detach()
            self._context = None
        super().close()
