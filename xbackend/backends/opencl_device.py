"""The OpenCL device handle of executions: a context and its profiling queue.

Kernel times come from the queue's profiling events: from the start of a batch's
first launch to the end of its last (an in-order queue runs them back to back).
A library call (CLBlast) may run helper kernels whose events it does not return, so
markers bracket the call on the queue and time it with the device's clock.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from xbackend.backends.execution import Device
from xbackend.errors import UnsupportedParameter
from xbackend.launches.launch import Buffer, LibraryCall, Product, Step
from xbackend.launches.operands import poison_value
from xbackend.measuring.handles import Queued, Timer
from xbackend.measuring.stamps import StampSlots

try:
    import pyopencl as cl
except ImportError:  # pragma: no cover - pyopencl is a dependency
    cl = None  # type: ignore[assignment]

# NVIDIA's OpenCL reports a 4 MiB global_mem_cache_size for GPUs with a 50 MB L2: a
# flush is never smaller than this.
FLUSH_FLOOR_BYTES = 256 * 2**20


class ClDevice(Device):
    """An OpenCL context and its profiling queue, as executions need them."""

    _ACCESS: ClassVar[dict[str, str]] = {
        "read": "READ_ONLY",
        "write": "WRITE_ONLY",
        "read_write": "READ_WRITE",
    }

    def __init__(self, context: Any, queue: Any, cache_bytes: int = 0):
        self._context, self._queue = context, queue
        self._flush_bytes = max(4 * cache_bytes, FLUSH_FLOOR_BYTES)
        self._flusher: Any = None  # made on first use
        self._maps: dict[int, Any] = {}  # id(array) -> (buffer, its mapping)
        self._clblast: Any = None  # made on first use of the vendor variant
        # Which step last set each kernel's arguments: a kernel bound by two steps (or
        # two executions) gets its own arguments again before each launch.
        self._arguments_of: dict[int, object] = {}

    def allocate(self, nbytes: int, access: str) -> Any:
        return cl.Buffer(self._context, getattr(cl.mem_flags, self._ACCESS[access]), nbytes)

    def free(self, buffer: Any) -> None:
        buffer.release()

    def upload(self, copies: Sequence[tuple[Any, np.ndarray[Any, Any]]]) -> None:
        for number, (buffer, array) in enumerate(copies, 1):
            last = number == len(copies)  # the in-order queue: waiting for the last waits all
            cl.enqueue_copy(self._queue, buffer, array, is_blocking=last)

    def download(self, target: np.ndarray[Any, Any], buffer: Any, offset: int = 0) -> None:
        cl.enqueue_copy(self._queue, target, buffer, src_offset=offset, is_blocking=True)

    def fill(self, targets: Sequence[tuple[Any, int]], dtype: np.dtype[Any]) -> None:
        pattern = np.array(poison_value(dtype), dtype=dtype)
        # oclgrind (21.10) takes a buffer poisoned by a fill, then written whole by one
        # kernel, as uninitialized when the next reads it (a workspace: myGEMM-style
        # transposes); poisoned by a copy from the host, it does not.
        copied = "oclgrind" in self._queue.device.platform.name.lower()
        for buffer, nbytes in targets:
            if copied:
                poison = np.full(nbytes // dtype.itemsize, pattern, dtype=dtype)
                cl.enqueue_copy(self._queue, buffer, poison, is_blocking=True)
            else:
                cl.enqueue_fill_buffer(self._queue, buffer, pattern, 0, nbytes).wait()

    def bind(
        self,
        step: Step,
        kernel: Any,
        buffers: Mapping[str, Any],
        dtype: np.dtype[Any],
        stamps: StampSlots | None = None,
    ) -> Queued:
        if isinstance(step, LibraryCall):
            args = {
                name: buffers[value.name] if isinstance(value, Buffer) else value
                for name, value in step.args.items()
            }
            if self._clblast is None:
                from xbackend.backends.clblast import Clblast

                self._clblast = Clblast()
            return lambda: self._gemm(args, dtype)
        if step.shared_bytes:
            raise UnsupportedParameter(
                f"{step.kernel} asks for {step.shared_bytes} bytes of local memory at launch: "
                "an OpenCL kernel declares all of its own"
            )
        values = [
            buffers[value.name] if isinstance(value, Buffer) else value for value in step.values()
        ]
        sizes = step.global_size, step.local_size
        if stamps is not None:  # a new slot each launch: its arguments are set each time
            return lambda: self._launch(kernel, [*values, stamps.buffer, stamps.take()], *sizes)
        return lambda: self._launch(kernel, values, *sizes)

    def _gemm(self, args: Mapping[str, Any], dtype: np.dtype[Any]) -> None:
        self._clblast.gemm(
            self._queue, args["A"], args["B"], args["C"], args["M"], args["N"], args["K"],
            args["lda"], args["ldb"], args["ldc"], dtype,
        )  # fmt: skip

    def _launch(
        self, kernel: Any, values: list[Any], size: tuple[int, ...], local: tuple[int, ...]
    ) -> Any:
        if self._arguments_of.get(id(kernel)) is not values:
            kernel.set_args(*values)
            self._arguments_of[id(kernel)] = values
        try:
            return cl.enqueue_nd_range_kernel(self._queue, kernel, size, local)
        except cl.LogicError as error:
            if error.code == cl.status_code.INVALID_WORK_GROUP_SIZE:
                groups = "×".join(map(str, local[:2]))
                raise UnsupportedParameter(
                    f"the device refused work-groups of {groups} for this kernel: {error}"
                ) from error
            raise

    def timer(self, product: Product) -> Timer:
        if product.calls_library:
            return _MarkerTimer(self._context, self._queue)
        return _EventTimer(self._context, self._queue)

    def flush_cache(self) -> None:
        if self._flusher is None:
            self._flusher = cl.Buffer(self._context, cl.mem_flags.READ_WRITE, self._flush_bytes)
        ones = np.ones(1, np.float32)
        cl.enqueue_fill_buffer(self._queue, self._flusher, ones, 0, self._flush_bytes).wait()

    def pinned(self, shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
        """Host memory the driver allocates (CL_MEM_ALLOC_HOST_PTR), mapped: page-locked
        on the GPU drivers, the way OpenCL spells pinned memory."""
        nbytes = max(int(np.prod(shape)) * np.dtype(dtype).itemsize, 1)
        flags = cl.mem_flags.READ_WRITE | cl.mem_flags.ALLOC_HOST_PTR
        buffer = cl.Buffer(self._context, flags, nbytes)
        access: Any = cl.map_flags.READ | cl.map_flags.WRITE
        array, _ = cl.enqueue_map_buffer(
            self._queue, buffer, access, 0, shape, dtype, is_blocking=True
        )
        self._maps[id(array)] = buffer
        return array  # type: ignore[no-any-return]

    def unpin(self, array: np.ndarray[Any, Any]) -> None:
        buffer = self._maps.pop(id(array), None)
        mapping: Any = array.base  # PyOpenCL's MemoryMap
        mapping.release(self._queue)  # the mapping, then the buffer
        self._queue.finish()
        if buffer is not None:
            buffer.release()

    def release(self) -> None:
        """Give back the flush buffer."""
        if self._flusher is not None:
            self._flusher.release()
            self._flusher = None


class _EventTimer:
    """Profiling events: from the first launch's start to the last one's end.

    The launches are queued behind a barrier that waits for a user event, set only
    once all of them are queued: OpenCL's twin of CUDA's hold (kernels/cuda/hold.cu).
    Without it the device would start the first launch while the host still queues
    the others, and the time would include the host's queueing between them: on an
    H100 with NVIDIA's OpenCL, 13-17 µs a launch for kernels of 3 µs, and 5-30% more
    in one run than in the next (2026-11-22).
    """

    clock = "opencl-profiling"
    gave_up = False

    def __init__(self, context: Any, queue: Any):
        self._context, self._queue = context, queue

    def __call__(self, steps: Sequence[Queued], launches: int = 1) -> float:
        gate = cl.UserEvent(self._context)
        try:
            cl.enqueue_barrier(self._queue, wait_for=[gate])
            events = [queue() for _ in range(launches) for queue in steps]
        finally:
            gate.set_status(cl.command_execution_status.COMPLETE)  # also after a failure
        events[-1].wait()
        # An in-order queue: each launch starts after the one before ends.
        return float(events[-1].profile.end - events[0].profile.start) * 1e-9


class _MarkerTimer:
    """A library call (CLBlast) may run helper kernels whose events it does not return:
    markers on the in-order queue bracket the whole call, so the device's clock times it,
    every kernel it enqueues and the gaps between them, from the end of the first
    marker to the end of the last one.

    The calls are queued behind the gate of ``_EventTimer``, so the host's queueing is not
    in the time. Should a library wait for its own work while the gate still holds the
    queue, a watchdog opens the gate after ``GIVE_UP_S`` and the sample is marked, as
    CUDA's hold that gives up is.
    """

    clock = "opencl-markers"
    GIVE_UP_S = 5.0

    def __init__(self, context: Any, queue: Any):
        self._context, self._queue = context, queue
        self._opening = threading.Lock()  # the watchdog's thread and this one
        self.gave_up = False

    def __call__(self, steps: Sequence[Queued], launches: int = 1) -> float:
        gate = cl.UserEvent(self._context)
        watchdog = threading.Timer(self.GIVE_UP_S, self._open, (gate,))
        watchdog.start()
        try:
            cl.enqueue_barrier(self._queue, wait_for=[gate])
            first = cl.enqueue_marker(self._queue)
            for _ in range(launches):
                for queue in steps:
                    queue()
            last = cl.enqueue_marker(self._queue)
        finally:
            watchdog.cancel()
            self.gave_up = not self._open(gate)  # also after a failure
        last.wait()
        return float(last.profile.end - first.profile.end) * 1e-9

    def _open(self, gate: Any) -> bool:
        """Let the queue run; False where the watchdog had opened it already."""
        with self._opening:
            if gate.command_execution_status == cl.command_execution_status.COMPLETE:
                return False
            gate.set_status(cl.command_execution_status.COMPLETE)
            return True
