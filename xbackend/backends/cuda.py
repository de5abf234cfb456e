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
    UnsupportedParameter,
    VariantSpec,
    VariantTable,
    XBackendError,
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
    def __init__(self, function: Any, tile: int, A: np.ndarray, B: np.ndarray):
        self._A, self._B = A, B
        M, K = A.shape
        N = B.shape[1]
        self._C = np.empty((M, N), dtype=A.dtype)
        self._buffers = [drv.mem_alloc(X.nbytes) for X in (A, B, self._C)]
        self._function = function
        self._args = (*self._buffers, np.int32(M), np.int32(N), np.int32(K))
        # One thread per element of C, rounded up to whole blocks.
        self._grid = (-(-N // tile), -(-M // tile), 1)
        self._block = (tile, tile, 1)
        self._start, self._end = drv.Event(), drv.Event()

    def upload(self) -> None:
        drv.memcpy_htod(self._buffers[0], self._A)
        drv.memcpy_htod(self._buffers[1], self._B)

    def poison(self) -> None:
        drv.memset_d32(self._buffers[2], _NAN_BITS_F32, self._C.size)
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
    VARIANTS: ClassVar[VariantTable] = {
        "mm": {
            "naive": VariantSpec(
                "naive",
                "one thread per element, operands from global memory",
                kernel="mm_naive",
                tiles=(8, 16, 32),
                default_tile=16,
            ),
            "tiled": VariantSpec(
                "tiled",
                "TILE×TILE tiles of A and B staged in shared memory",
                kernel="mm_tiled",
                tiles=(8, 16, 32),
                default_tile=16,
            ),
        }
    }

    def __init__(self, device: str | int | None = None):
        available, reason = self.available()
        if not available:
            raise XBackendError(reason)
        index = self._select(device)
        self._device = _describe(index)
        self._context = drv.Device(index).make_context()
        self._context.pop()  # current only inside _active()
        self._functions: dict[tuple[str, int], Any] = {}
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

    def tile_problem(self, variant: str, tile: int) -> str | None:
        problem = super().tile_problem(variant, tile)
        if problem:
            return problem
        limit = self._device.max_work_group_size or 0
        if tile * tile > limit:
            return f"{tile}×{tile} threads exceed the block limit of {limit}"
        shared = self._device.local_mem_bytes or 0
        if variant == "tiled" and 2 * tile * tile * 4 > shared:
            return f"two {tile}×{tile} tiles exceed {shared} bytes of shared memory"
        return None

    @contextmanager
    def _active(self) -> Iterator[None]:
        self._context.push()
        try:
            yield
        finally:
            drv.Context.pop()

    def _function(self, variant: str, tile: int) -> Any:
        """The compiled kernel, built once per (variant, tile) and reused."""
        key = (variant, tile)
        if key not in self._functions:
            from pycuda.compiler import SourceModule

            path, source = read_kernel("mm", "cuda")
            options = [f"-DTILE={tile}"]
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
            function = module.get_function(self.variant_spec(variant).kernel)
            function.prepare("PPPiii")
            self._modules.append(module)
            self._functions[key] = function
        return self._functions[key]

    def _execution(self, variant: str, tile: int | None, A: np.ndarray, B: np.ndarray) -> Execution:
        assert tile is not None
        if -(-A.shape[0] // tile) > _MAX_GRID_Y:
            raise UnsupportedParameter(
                f"cuda: {A.shape[0]} rows need more than {_MAX_GRID_Y} blocks of {tile} rows"
            )
        return _CudaExecution(self._function(variant, tile), tile, A, B)

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
            finally:
                drv.Context.pop()
            context.detach()
            self._context = None
        super().close()
