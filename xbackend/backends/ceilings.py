"""A device's ceilings, measured: the most it computes and copies per second.

``peaks.py`` bounds what a device could do from what it says of itself; a ceiling is what
it did, timed on code that does nothing else:

* a compiled backend (CUDA, OpenCL) runs the kernels of ``kernels/*/ceilings``:
  ``fma_loop`` (independent fused multiply-add chains in registers, per float dtype) and
  ``copy`` (a large buffer; a float4 a thread on a GPU, a float16 on a CPU). Each is
  planned as a ``Product`` of one ``KernelLaunch`` and run like any product
  (``CompiledBackend.run_product``): compiled once, timed by the device's clock behind
  CUDA's hold or OpenCL's barrier;
* the CPU backend times NumPy: its BLAS on a large square product for the compute ceiling
  (a GEMM runs close to the FMA peak), ``np.copyto`` of a large array for the bandwidth.

Each ceiling is the **best** of ``SAMPLES`` timed runs after one untimed run (on the host,
of as many as fit in ``HOST_SECONDS``): a ceiling is what the device can reach, and a
slower run was slowed by something else (clocks still rising, a neighbour). Sizes
saturate a GPU (2^27 floats copied; 32 blocks of 256 threads per compute unit in the FMA
loop) and are scaled down on a CPU device, so that measuring stays quick: at most a
second or two per device. The run header keeps them per device
(``sweep/runner.py``); the tables' roof shares and the roofline figure are drawn from them.
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

import numpy as np

from xbackend.errors import XBackendError
from xbackend.launches.kernels import C_TYPES
from xbackend.launches.launch import OUTPUT, Buffer, KernelLaunch, Product
from xbackend.launches.specs import DeviceInfo

Array = np.ndarray[Any, Any]

FAMILY = "ceilings"  # kernels/cuda/ceilings.cu, kernels/opencl/ceilings.cl
BLOCK = 256  # threads (work-items) of a block of both kernels: -DCEILING_BLOCK
ACCUMULATORS = 8  # independent chains per thread of fma_loop: -DACCUMULATORS
SAMPLES = 5  # timed runs after one untimed run (at least, on the host); the best is kept
HOST_SECONDS = 0.3  # the host runs on until this long, at most HOST_RUNS times: a shared
HOST_RUNS = 50  # machine's BLAS varies 2x from one run to the next (two Zen 5 cores)
FLOAT_DTYPES = ("float32", "float64")  # the dtypes with a compute ceiling
COPY_FLOATS = {"gpu": 2**27, "cpu": 2**25}  # floats copied (other kinds: as a GPU)
FMA_SIZE = {"gpu": (32, 2048), "cpu": (16, 8192)}  # blocks per compute unit, iterations
# Floats the copy moves per thread: a float4 on a GPU; a float16, a cache line, on a CPU
# (see kernels/opencl/ceilings.cl: float4s come out 8× slower through Intel's compiler).
COPY_VECTOR = {"gpu": 4, "cpu": 16}
# The CPU's square product, by cores: up to 8, 64, then more. Sizes that fit the last-level
# cache are kept at BLAS speed; 2048 ran at 100 against 240 GFLOP/s on two Zen 5 cores.
HOST_PRODUCT_N = ((8, 1024), (64, 2048), (2**31, 4096))

Measured = tuple[float, str]  # a rate per second, and how it was measured


@dataclasses.dataclass(frozen=True)
class Ceilings:
    """A device's measured ceilings: FLOP/s per float dtype, and bytes per second."""

    flops_per_s: dict[str, float]  # dtype -> the best rate of fma_loop (or the BLAS)
    bytes_per_s: float | None  # the best rate of the copy: bytes read plus bytes written
    how: dict[str, str]  # dtype, or "bandwidth" -> what measured it, at which size
    date: str  # when, ISO 8601 in UTC
    statistic: str = "best"  # of the runs ``how`` counts
    # BabelStream's triad (``stream_rates``): bytes read and written per second, where
    # the backend runs kernels (``how["triad"]``); None on the CPU backend's NumPy.
    triad_bytes_per_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Timed:
    """Timed runs of one product: each run's seconds, the output where asked, the clock."""

    seconds: list[float]
    output: Array | None
    clock: str


class ProductRunner(Protocol):
    """Runs a planned product on a device as products are run: once untimed, then
    ``runs`` times (``CompiledBackend.run_product``)."""

    def __call__(self, product: Product, runs: int, keep_output: bool = False) -> Timed: ...


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def extended(
    known: Ceilings | None,
    dtypes: Iterable[str],
    compute: Callable[[str], Measured],
    bandwidth: Callable[[], Measured],
    triad: Callable[[], Measured] | None = None,
) -> Ceilings:
    """``known`` with what it lacks measured: the compute ceiling of each float dtype of
    ``dtypes``, the bandwidth and, where given, the triad. A backend keeps the result:
    each is measured once."""
    flops = dict(known.flops_per_s) if known else {}
    how = dict(known.how) if known else {}
    for dtype in dict.fromkeys(dtypes):
        if dtype in FLOAT_DTYPES and dtype not in flops:
            flops[dtype], how[dtype] = compute(dtype)
    bytes_per_s = known.bytes_per_s if known else None
    if bytes_per_s is None:
        bytes_per_s, how["bandwidth"] = bandwidth()
    triad_bytes_per_s = known.triad_bytes_per_s if known else None
    if triad_bytes_per_s is None and triad is not None:
        triad_bytes_per_s, how["triad"] = triad()
    if known is not None and known == dataclasses.replace(
        known, flops_per_s=flops, bytes_per_s=bytes_per_s, triad_bytes_per_s=triad_bytes_per_s
    ):
        return known
    return Ceilings(flops, bytes_per_s, how, now(), triad_bytes_per_s=triad_bytes_per_s)


def _rate(amount: float, seconds: list[float], what: str) -> float:
    best = min(seconds, default=0.0)
    if not best > 0:
        raise XBackendError(f"the {what} took no time: its clock is broken")
    return amount / best


# -- the compiled backends --------------------------------------------------------------------


_Size = TypeVar("_Size")


def _size_of(table: dict[str, _Size], device: DeviceInfo) -> _Size:
    """A CPU device's entry of ``table``, or a GPU's (any other kind is taken for one)."""
    return table["cpu" if device.kind == "cpu" else "gpu"]


def fma_geometry(device: DeviceInfo) -> tuple[int, int]:
    """Blocks of ``BLOCK`` threads and iterations of the FMA loop on ``device``: on a GPU
    four waves of 2048 threads per compute unit (the most an SM holds)."""
    per_unit, iterations = _size_of(FMA_SIZE, device)
    return per_unit * max(1, device.compute_units or 1), iterations


def copy_floats(device: DeviceInfo) -> int:
    """Floats the copy moves on ``device``: ``COPY_FLOATS``, or four times its cache in
    bytes where that is more (at most four times ``COPY_FLOATS``: a host's cache may be
    the whole socket's, 260 MB and more), a power of two; at most a quarter of its memory
    per buffer."""
    wanted = _size_of(COPY_FLOATS, device)
    floats = min(max(wanted, device.cache_bytes or 0), 4 * wanted)
    floats = 1 << (floats - 1).bit_length()
    limits = [device.global_mem_bytes // 16 if device.global_mem_bytes else floats]
    if device.max_alloc_bytes:
        limits.append(device.max_alloc_bytes // 4)
    while floats > max(min(limits), 2**12):
        floats //= 2
    return floats


def _options(dtype: np.dtype[Any], vector: int) -> tuple[str, ...]:
    """The -D options of both kernels: the same for the copy and the float32 FMA loop,
    so that one build serves both (nvcc takes a second a build)."""
    return (f"-DREAL={C_TYPES[dtype.name]}", f"-DVECTOR=float{vector}",
            f"-DCEILING_BLOCK={BLOCK}", f"-DACCUMULATORS={ACCUMULATORS}")  # fmt: skip


def fma_product(
    dtype: str | np.dtype[Any], blocks: int, iterations: int, vector: int = 4
) -> Product:
    """One launch of ``fma_loop``: ``blocks`` × ``BLOCK`` threads, one output each
    (``vector``: the copy's, only so that the two share a build)."""
    dtype = np.dtype(dtype)
    options = _options(dtype, vector)
    launch = KernelLaunch.of(
        "fma_loop", FAMILY, options, (blocks, 1, 1), (BLOCK, 1, 1), dims=1,
        out=Buffer(OUTPUT), iterations=iterations,
    )  # fmt: skip
    return Product(inputs={}, output_shape=(blocks * BLOCK,), dtype=dtype, steps=(launch,))


def copy_product(floats: int, vector: int = 4, source: Array | None = None) -> Product:
    """One launch of ``copy``: ``floats`` float32 (a multiple of ``vector``, 4 or 16) from
    ``src`` to the output, ``vector`` floats per thread. Without ``source`` the source is
    a workspace, filled on the device (poisoned), so that nothing crosses the bus."""
    if vector not in (4, 16) or floats % vector or floats < vector:
        raise XBackendError(f"the copy moves whole float{vector}s: {floats} floats are not")
    vectors = floats // vector
    options = _options(np.dtype(np.float32), vector)
    blocks = -(-vectors // BLOCK)
    launch = KernelLaunch.of(
        "copy", FAMILY, options, (blocks, 1, 1), (BLOCK, 1, 1), dims=1,
        src=Buffer("src"), dst=Buffer(OUTPUT), n=vectors,
    )  # fmt: skip
    sources = None if source is None else {"src": source}
    return _streaming(launch, ("src",), floats, np.dtype(np.float32), sources)


def _streaming(
    launch: KernelLaunch,
    reads: tuple[str, ...],
    elements: int,
    dtype: np.dtype[Any],
    sources: dict[str, Array] | None,
) -> Product:
    """A product of one launch that reads the arrays ``reads`` (``elements`` of ``dtype``
    each) and writes its output: from ``sources`` where given, else from workspaces
    filled on the device (poisoned), so that nothing crosses the bus."""
    if sources is None:
        workspaces = {name: dtype.itemsize * elements for name in reads}
        return Product({}, (elements,), dtype, (launch,), workspaces)
    inputs = {name: np.ascontiguousarray(sources[name], dtype) for name in reads}
    return Product(inputs, (elements,), dtype, (launch,))


def fma_ceiling(device: DeviceInfo, run: ProductRunner, dtype: str) -> Measured:
    """The FLOP/s of ``fma_loop`` in ``dtype`` on ``device``, and how it was measured."""
    blocks, iterations = fma_geometry(device)
    vector = _size_of(COPY_VECTOR, device)
    timed = run(fma_product(dtype, blocks, iterations, vector), SAMPLES)
    flops = 2 * ACCUMULATORS * iterations * blocks * BLOCK
    how = (
        f"fma_loop: {blocks} blocks × {BLOCK} threads × {ACCUMULATORS} chains × "
        f"{iterations} iterations = {flops / 1e9:.3g} GFLOP, {len(timed.seconds)} runs "
        f"({timed.clock})"
    )
    return _rate(flops, timed.seconds, "FMA loop"), how


def copy_ceiling(device: DeviceInfo, run: ProductRunner) -> Measured:
    """The bytes per second of ``copy`` on ``device`` (read and written), and how."""
    floats, vector = copy_floats(device), _size_of(COPY_VECTOR, device)
    timed = run(copy_product(floats, vector), SAMPLES)
    moved = 2 * 4 * floats
    how = (
        f"copy: {floats} floats ({4 * floats / 2**20:.0f} MiB) read and written, "
        f"float{vector} per thread, {len(timed.seconds)} runs ({timed.clock})"
    )
    return _rate(moved, timed.seconds, "copy"), how


# BabelStream's four operations (``stream_*`` in kernels/*/ceilings): the arrays each
# reads, and the one it writes. ``xbackend ceilings`` runs them in each API on one device.
STREAM = {
    "copy": (("a",), "c"),
    "mul": (("c",), "b"),
    "add": (("a", "b"), "c"),
    "triad": (("b", "c"), "a"),
}
STREAM_SCALAR = 0.4  # BabelStream's
# BabelStream's element type too: in float32, one element a thread, NVIDIA's OpenCL ran
# 2-3.5% below CUDA on an H200 (its launches cost more a block, and four bytes a thread
# keep too little in flight: 47% of the peak); in float64 both ran within 1.3%, at up to
# 88% of the peak (studies/stream_gap.py, docs/notebook/ceilings.md).
STREAM_DTYPE = "float64"
# Timed runs of each stream operation and sweep point, of which the best is kept. On an
# H200 the first 3-4 runs on freshly allocated arrays read 8-9% below the rest (3.92
# against 4.27 TB/s for CUDA's triad, 3.87 against 4.24 for OpenCL's), so that a best of
# 5 missed the device's best now and then (studies/triad_spread.py): 20 on a GPU.
STREAM_RUNS = {"gpu": 20, "cpu": 5}


def stream_product(
    op: str,
    elements: int,
    dtype: str | np.dtype[Any] = "float32",
    sources: dict[str, Array] | None = None,
    blocks: int | None = None,
) -> Product:
    """One launch of ``stream_OP`` over ``elements`` of ``dtype``, one a thread (at most
    ``blocks`` blocks: then each thread strides over several); the array it writes is
    the product's output, those it reads ``sources``' (else workspaces: ``_streaming``)."""
    dtype = np.dtype(dtype)
    reads, writes = STREAM[op]
    blocks = min(-(-elements // BLOCK), blocks or elements)
    buffers: dict[str, Buffer] = {name: Buffer(name) for name in reads}
    launch = KernelLaunch.of(
        f"stream_{op}", FAMILY, _options(dtype, 4), (blocks, 1, 1), (BLOCK, 1, 1), dims=1,
        scalar=dtype.type(STREAM_SCALAR), n=elements, **buffers, **{writes: Buffer(OUTPUT)},
    )  # fmt: skip
    return _streaming(launch, reads, elements, dtype, sources)


def stream_dtype(dtype_problem: Callable[[np.dtype[Any]], str | None]) -> str:
    """The streams' element type on a device: ``STREAM_DTYPE``, else float32 where it
    has no doubles (``dtype_problem``: the backend's)."""
    return STREAM_DTYPE if dtype_problem(np.dtype(STREAM_DTYPE)) is None else "float32"


def stream_rates(
    device: DeviceInfo, run: ProductRunner, dtype: str = "float32", blocks: int | None = None,
    ops: Iterable[str] = tuple(STREAM),
) -> dict[str, Measured]:  # fmt: skip
    """BabelStream's operations ``ops`` on ``device``: bytes read and written per second
    (the best of ``STREAM_RUNS`` runs), and how each was measured."""
    elements = copy_floats(device)
    rates = {}
    for op in ops:
        reads, _ = STREAM[op]
        timed = run(
            stream_product(op, elements, dtype, blocks=blocks), _size_of(STREAM_RUNS, device)
        )
        moved = (len(reads) + 1) * np.dtype(dtype).itemsize * elements
        how = (
            f"stream_{op}: {elements} {dtype} a array ({len(reads) + 1} arrays, "
            f"{moved / 2**20:.0f} MiB moved), one a thread, {len(timed.seconds)} runs "
            f"({timed.clock})"
        )
        rates[op] = (_rate(moved, timed.seconds, f"stream {op}"), how)
    return rates


# mixbench's sweep (``intensity`` in kernels/*/ceilings): the fused multiply-adds on each
# element, from memory-bound (a quarter of a flop a byte in float32) to compute-bound.
SWEEP_ROUNDS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


@dataclasses.dataclass(frozen=True)
class SweepPoint:
    """One setting of the intensity sweep: its rounds, flops a byte, and rates."""

    rounds: int
    flops_per_byte: float
    flops_per_s: float
    bytes_per_s: float
    how: str


def intensity_product(
    rounds: int,
    elements: int,
    dtype: str | np.dtype[Any] = "float32",
    source: Array | None = None,
    blocks: int | None = None,
) -> Product:
    """One launch of ``intensity`` built with ``ROUNDS=rounds``: ``elements`` read, each
    through ``rounds`` fused multiply-adds, and written, by at most ``blocks`` blocks;
    from ``source`` where given, else from a workspace (``_streaming``)."""
    dtype = np.dtype(dtype)
    options = (*_options(dtype, 4), f"-DROUNDS={rounds}")
    blocks = min(-(-elements // BLOCK), blocks or elements)
    launch = KernelLaunch.of(
        "intensity", FAMILY, options, (blocks, 1, 1), (BLOCK, 1, 1), dims=1,
        **{"in": Buffer("in")}, out=Buffer(OUTPUT), n=elements,
    )  # fmt: skip
    return _streaming(launch, ("in",), elements, dtype, None if source is None else {"in": source})


def intensity_sweep(
    device: DeviceInfo,
    run: ProductRunner,
    dtype: str = "float32",
    rounds: Iterable[int] = SWEEP_ROUNDS,
) -> list[SweepPoint]:
    """The sweep on ``device``: for each count of rounds, the best of ``STREAM_RUNS`` runs
    as FLOP/s and as bytes read and written per second. Eight blocks a compute unit stride
    over the array: one element a thread made NVIDIA's OpenCL 1-3.5% slower than CUDA on
    an H200, the cost of its launches a block (docs/notebook/ceilings.md)."""
    elements, itemsize = copy_floats(device), np.dtype(dtype).itemsize
    blocks = 8 * (device.compute_units or 1)
    found = []
    for count in rounds:
        product = intensity_product(count, elements, dtype, blocks=blocks)
        timed = run(product, _size_of(STREAM_RUNS, device))
        flops, moved = 2 * count * elements, 2 * itemsize * elements
        best = _rate(1.0, timed.seconds, f"intensity sweep at {count} rounds")
        runs = len(timed.seconds)
        how = f"intensity: {elements} {dtype}, {count} rounds, {runs} runs ({timed.clock})"
        found.append(SweepPoint(count, flops / moved, flops * best, moved * best, how))
    return found


# -- the CPU backend ---------------------------------------------------------------------------


def _host_times(work: Callable[[], object]) -> list[float]:
    """``work`` once untimed (the pages touched, the BLAS's threads started), then timed
    ``SAMPLES`` times and on until ``HOST_SECONDS`` have passed (``HOST_RUNS`` at most)."""
    work()
    seconds: list[float] = []
    while len(seconds) < SAMPLES or (sum(seconds) < HOST_SECONDS and len(seconds) < HOST_RUNS):
        start = time.perf_counter()
        work()
        seconds.append(time.perf_counter() - start)
    return seconds


def host_compute_ceiling(device: DeviceInfo, dtype: str) -> Measured:
    """The FLOP/s of NumPy's BLAS on an N×N product in ``dtype`` (N from the cores)."""
    cores = device.compute_units or 1
    n = next(size for most, size in HOST_PRODUCT_N if cores <= most)
    rng = np.random.default_rng(n)
    A = rng.uniform(-1.0, 1.0, (n, n)).astype(dtype)
    B = rng.uniform(-1.0, 1.0, (n, n)).astype(dtype)
    C = np.empty((n, n), dtype)
    seconds = _host_times(lambda: np.matmul(A, B, out=C))
    how = f"numpy.matmul {n}×{n} · {n}×{n} (the BLAS), {len(seconds)} runs (host)"
    return _rate(2 * n**3, seconds, "product"), how


def host_copy_ceiling(device: DeviceInfo) -> Measured:
    """The bytes per second of ``np.copyto`` of a large float32 array (one thread)."""
    floats = copy_floats(device)
    source = np.full(floats, 1.0, np.float32)
    target = np.empty_like(source)
    seconds = _host_times(lambda: np.copyto(target, source))
    how = (
        f"numpy.copyto: {floats} floats ({4 * floats / 2**20:.0f} MiB) read and written, "
        f"one thread, {len(seconds)} runs (host)"
    )
    return _rate(2 * 4 * floats, seconds, "copy"), how
