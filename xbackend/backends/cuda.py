"""The CUDA backend: kernels from ``kernels/cuda/`` through PyCUDA.

The backend owns an explicit context on the chosen GPU (``pycuda.autoinit`` is
never used): it is made current only while the backend works, and detached by
``close``. The GPU is chosen by index or by a piece of its name.

Kernel times come from CUDA events recorded around the launches, queued behind
kernels/cuda/hold.cu's ``hold`` so that they time the GPU's work and not the
host's launching of it (see ``_Gate``). Tile sizes reach nvcc as ``-DTILE=…``;
PyCUDA caches each compiled module by source and options.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import TracebackType
from typing import Any, ClassVar

import numpy as np

from xbackend.backends import warp
from xbackend.backends.base import (
    C_TYPES,
    Backend,
    DeviceInfo,
    Execution,
    Launch,
    VariantTable,
    compiled_variants,
    kernel_family,
    plan_launch,
    read_kernel,
    with_vendor,
)
from xbackend.errors import KernelCompileError, UnsupportedParameter, XBackendError

try:
    import pycuda
    import pycuda.driver as drv
except ImportError as error:
    drv = None  # type: ignore[assignment]
    _IMPORT_ERROR: ImportError | None = error
else:
    _IMPORT_ERROR = None

_MAX_GRID_Y = 65535
_PAIR_BLOCK = 256  # threads per block of rmm_pair_sums (fixed there)
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


class _CudaExecution(Execution):
    def __init__(self, gate: _Gate, function: Any, launch: Launch, sum_function: Any = None):
        self._inputs = launch.inputs
        self._C = np.empty(launch.output_shape, dtype=launch.inputs[0].dtype)
        self._buffers = [drv.mem_alloc(X.nbytes) for X in (*launch.inputs, self._C)]
        self._function = function
        self._grid = launch.groups
        self._block = launch.block
        self._sum = None
        target = self._buffers[2]
        self._outputs = [(target, self._C.nbytes)]  # what poison() fills
        if launch.slices > 1:
            # A split product: partial products into a workspace, then their sum into C.
            target = drv.mem_alloc(self._C.nbytes * launch.slices)
            self._buffers.append(target)
            self._outputs.append((target, self._C.nbytes * launch.slices))
            M, N = self._C.shape[-2:]
            blocks = -(-(M * N) // warp.SUM_BLOCK)
            self._sum = (
                sum_function,
                (blocks, 1, 1),
                (warp.SUM_BLOCK, 1, 1),
                (target, self._buffers[2], *map(np.int32, (M, N, N, launch.slices))),
            )
        self._args = (*self._buffers[:2], target, *(np.int32(value) for value in launch.scalars))
        self._start, self._end = drv.Event(), drv.Event()
        self._gate = gate
        self._warned = False
        self._runs = 0
        self.tile, self.params = launch.tile, launch.params

    def upload(self) -> None:
        drv.memcpy_htod(self._buffers[0], self._inputs[0])
        drv.memcpy_htod(self._buffers[1], self._inputs[1])

    def poison(self) -> None:
        # NaN for floats (0x7FC00000 in every 32-bit word is a NaN in float64
        # too), the most negative int for integers; the workspace of a split too.
        pattern = _NAN_BITS_F32 if self._C.dtype.kind == "f" else 0x80000000
        for buffer, nbytes in self._outputs:
            drv.memset_d32(buffer, pattern, nbytes // 4)
        drv.Context.synchronize()

    def run(self) -> float:
        with self._gate:
            self._start.record()
            self._launch()
            self._end.record()
        self._end.synchronize()
        self._runs += 1
        # The first run may load modules on first use (CUDA's lazy loading, cuBLAS):
        # it is never a timed sample, and may keep the GPU waiting.
        if self._gate.gave_up and self._runs > 1 and not self._warned:
            warnings.warn(
                "the GPU waited for the host over 17 ms: this kernel time may include the "
                "launch (normal under compute-sanitizer or Nsight Compute)",
                RuntimeWarning,
                stacklevel=2,
            )
            self._warned = True
        return self._start.time_till(self._end) * 1e-3

    def _launch(self) -> None:
        """Queue the product's kernels (no waiting)."""
        self._function.prepared_call(self._grid, self._block, *self._args)
        if self._sum is not None:
            function, grid, block, args = self._sum
            function.prepared_call(grid, block, *args)

    def download(self) -> np.ndarray:
        drv.memcpy_dtoh(self._C, self._buffers[2])
        return self._C.copy()

    def release(self) -> None:
        for buffer in self._buffers:
            buffer.free()
        self._buffers = []


class _CublasExecution(_CudaExecution):
    """The vendor line: cuBLAS on buffers laid out as for the kernels, timed alike.

    For rmm, kernels/cuda/rmm.cu first writes the pair sums into matrices of their
    own, and cuBLAS multiplies those: the time covers both steps.
    """

    def __init__(self, backend: CudaBackend, op: str, launch: Launch):
        super().__init__(backend._gate(), None, launch)
        self._cublas = backend._cublas
        M, N, K, lda, ldb = launch.scalars[:5]
        A, B, C = self._buffers[:3]
        self._steps: list[tuple[Any, tuple[int, int, int], tuple[Any, ...]]] = []
        if op != "rmm":
            self._gemm = (M, N, K, A, lda, B, ldb, C, launch.scalars[5])
            return
        rows, columns = M // 2, N // 2
        item = self._C.itemsize
        summed_rows = drv.mem_alloc(rows * K * item)
        summed_columns = drv.mem_alloc(K * columns * item)
        self._buffers += [summed_rows, summed_columns]
        self._outputs += [(summed_rows, rows * K * item), (summed_columns, K * columns * item)]
        pair_sums = backend._pair_sums(self._C.dtype)
        steps = (  # (source, target, rows, columns, row step, column step, partner)
            (A, summed_rows, rows, K, 2 * lda, 1, lda),
            (B, summed_columns, K, columns, ldb, 2, 1),
        )
        for source, target, height, width, *steps_and_partner in steps:
            grid = (-(-(height * width) // _PAIR_BLOCK), 1, 1)
            args = (source, target, *map(np.int32, (height, width, *steps_and_partner)))
            self._steps.append((pair_sums, grid, args))
        self._gemm = (rows, columns, K, summed_rows, K, summed_columns, columns, C, columns)

    def _launch(self) -> None:
        for function, grid, args in self._steps:
            function.prepared_call(grid, (_PAIR_BLOCK, 1, 1), *args)
        M, N, K, A, lda, B, ldb, C, ldc = self._gemm
        self._cublas.gemm(self._C.dtype, M, N, K, int(A), lda, int(B), ldb, int(C), ldc)


class CudaBackend(Backend):
    name = "cuda"
    description = "PyCUDA kernels from kernels/cuda on an NVIDIA GPU"
    VARIANTS: ClassVar[VariantTable] = with_vendor(
        compiled_variants("thread", "shared"),
        "cuBLAS (S/DGEMM, no TF32) on the same device buffers, through its C library",
        "the pair sums by a kernel, then cuBLAS on the half-size product",
    )
    GROUP_WORDS = ("threads", "shared")

    def __init__(self, device: str | int | None = None):
        available, reason = self.available()
        if not available:
            raise XBackendError(reason)
        index = self._select(device)
        self._device = _describe(index)
        self._context = drv.Device(index).make_context()
        self._context.pop()  # current only inside _active()
        self._cublas: Any = None  # made on first use of the vendor variant
        self._cublas_problem: str | None = None
        self._modules: dict[tuple[str, tuple[str, ...]], Any] = {}  # (family, options)
        self._functions: dict[tuple[str, tuple[str, ...], str], Any] = {}
        self._held: _Gate | None = None  # made on first use: see _gate

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

    def _function(self, family: str, options: tuple[str, ...], kernel: str, args: str) -> Any:
        """A kernel of a family's file built with ``options``: compiled once, reused.

        ``args`` is PyCUDA's signature of its arguments ("P" a pointer, "i" an int).
        """
        key = (family, options, kernel)
        if key not in self._functions:
            if (family, options) not in self._modules:
                from pycuda.compiler import SourceModule

                path, source = read_kernel(family, "cuda")
                try:
                    module = SourceModule(source, options=list(options), no_extern_c=True)
                except drv.CompileError as error:
                    raise KernelCompileError(
                        backend=self.name,
                        path=path,
                        source=source,
                        options=list(options),
                        device=self._device.name,
                        log=error.stderr or str(error),
                    ) from error
                self._modules[family, options] = module
            function = self._modules[family, options].get_function(kernel)
            function.prepare(args)
            self._functions[key] = function
        return self._functions[key]

    def _gate(self) -> _Gate:
        """The stream's gate for timed launches, made once per context."""
        if self._held is None:
            hold = self._function("hold", (), "hold", "Pq")
            self._held = _Gate(hold)
        return self._held

    def _pair_sums(self, dtype: np.dtype) -> Any:
        """rmm_pair_sums of kernels/cuda/rmm.cu, for ``dtype``."""
        return self._function("rmm", (f"-DREAL={C_TYPES[dtype.name]}",), "rmm_pair_sums", "PPiiiii")

    def variant_problem(self, variant: str, dtype: np.dtype, op: str = "mm") -> str | None:
        if variant != "vendor":
            return None
        from xbackend.vendor import Cublas, VendorUnavailable

        if self._cublas is None and self._cublas_problem is None:
            with self._active():
                try:
                    self._cublas = Cublas()
                except VendorUnavailable as error:
                    self._cublas_problem = str(error)
        return self._cublas_problem or Cublas.dtype_problem(dtype)

    def _execution(
        self,
        op: str,
        variant: str,
        tile: int | None,
        A: np.ndarray,
        B: np.ndarray,
        params: Mapping[str, int] | None = None,
    ) -> Execution:
        if variant == "vendor":
            return _CublasExecution(self, op, plan_launch(op, A, B, 1))
        launch = self._plan(op, variant, tile, A, B, params)
        if launch.groups[1] > _MAX_GRID_Y or launch.groups[2] > _MAX_GRID_Y:
            raise UnsupportedParameter(
                f"cuda: {launch.output_shape} needs more than {_MAX_GRID_Y} blocks "
                f"along y or z with tile {launch.tile or tile}"
            )
        family = kernel_family(op, self.variant_spec(variant, op))
        # Three pointers, then the integer arguments of the family (see plan_launch).
        function = self._function(
            family, launch.options, launch.kernel, "PPP" + "i" * len(launch.scalars)
        )
        summing = None
        if launch.slices > 1:
            summing = self._function(family, launch.options, warp.SUM_KERNEL, "PPiiii")
        return _CudaExecution(self._gate(), function, launch, summing)

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
                self._modules.clear()  # unloads the modules while their context is current
                drv.Context.synchronize()
            except drv.Error:
                pass  # a kernel fault left the context unusable: it is going anyway
            finally:
                drv.Context.pop()
            context.detach()
            self._context = None
        super().close()
