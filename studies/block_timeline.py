"""Where the tiled kernel's time goes in CUDA and in NVIDIA's OpenCL, block by block
(docs/notebook/measurement.md, issue 23: the tiled twins' spans differ by 1.22x at 608x532 on
an H200 with the same SASS loop).

The kernels (studies/block_timeline/tiled_trace.{cu,cl}: the shipped tiled kernel with a
trace) write, for every block, its multiprocessor, the GPU's %globaltimer at entry and
exit and its multiprocessor's cycles (%clock64) between. From one launch's trace: the
span (first entry to last exit), a block's median time and cycles, the clock they give
(cycles over nanoseconds), how many blocks a multiprocessor held at once (the most, and
the median over the multiprocessors), the first wave (blocks that entered before any
block left), and how many multiprocessors ran blocks. The median of each over the
launches is printed, for CUDA with the driver's shared-memory carveout and with the ones
given, and for OpenCL; then for two CUDA launches of other machine code: CUDA's PTX
compiled by the driver at load time (as NVIDIA's OpenCL compiles its PTX) instead of
nvcc's cubin, and OpenCL's own PTX (the program's binary) loaded and launched through
CUDA, its reads of %envreg (the global offsets of clEnqueueNDRangeKernel, 0 in every
launch here, and the number of groups; CUDA leaves them undefined: a launch read out of
bounds) made CUDA's (``ENVREG``). Where OpenCL's PTX runs as slowly in CUDA as in
OpenCL, the difference is in the code; where it runs as fast as CUDA's, it is in how
NVIDIA's OpenCL launches it.

    python studies/block_timeline.py [--sizes 128x112,608x532,2048] [--launches 30]
"""

from __future__ import annotations

import argparse
import re
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent / "block_timeline"
TILE = 16
SIZES = {"128x112": (128, 112, 128), "608x532": (608, 532, 608), "2048": (2048, 2048, 2048)}


# What NVIDIA's OpenCL passes its kernels in %envreg, as CUDA has it: the global offsets
# (0 in every launch here) and the number of groups.
ENVREG = {0: b"0", 1: b"0", 2: b"0", 6: b"%nctaid.x", 7: b"%nctaid.y", 8: b"%nctaid.z"}


def _in_cuda(found: re.Match[bytes]) -> bytes:
    return ENVREG.get(int(found.group(1)), found.group(0))


def stats(trace: np.ndarray) -> dict[str, float]:
    """One launch's trace (blocks × [entry ns, exit ns, sm, cycles]) summed up."""
    entered, left, sm = trace[:, 0].astype(np.int64), trace[:, 1].astype(np.int64), trace[:, 2]
    cycles = trace[:, 3].astype(np.int64)
    held = []
    for unit in np.unique(sm):
        mine = sm == unit
        events = sorted([(t, 1) for t in entered[mine]] + [(t, -1) for t in left[mine]])
        now = most = 0
        for _, change in events:  # at one time an exit (-1) sorts before an entry
            now += change
            most = max(most, now)
        held.append(most)
    first_exit = left.min()
    return {
        "span_us": (left.max() - entered.min()) / 1e3,
        "block_us": float(np.median(left - entered)) / 1e3,
        "block_kcycles": float(np.median(cycles)) / 1e3,
        "ghz": float(np.median(cycles / np.maximum(left - entered, 1))),
        "held_max": float(max(held)),
        "held_median": float(statistics.median(held)),
        "first_wave": float((entered < first_exit).sum()),
        "sms": float(len(held)),
        "last_entry_us": (entered.max() - entered.min()) / 1e3,
    }


def run(launch: Callable[[], np.ndarray], launches: int) -> dict[str, float]:
    launch()  # warm
    each = [stats(launch()) for _ in range(launches)]
    return {key: statistics.median(one[key] for one in each) for key in each[0]}


def cuda_launcher(
    A: np.ndarray,
    B: np.ndarray,
    carveout: int | None = None,
    code: str | bytes = "cubin",
    nvcc: tuple[str, ...] = (),
) -> Callable[[], np.ndarray] | str:
    """A launch of the traced kernel through CUDA: nvcc's cubin ("cubin"), nvcc's PTX
    compiled by the driver ("ptx"), or the PTX given (bytes). A string: why it cannot run."""
    import pycuda.autoinit  # noqa: F401 - the context
    import pycuda.driver as drv
    from pycuda.compiler import SourceModule, compile

    source = (HERE / "tiled_trace.cu").read_text()
    options = [f"-DTILE={TILE}", *nvcc]
    if code == "cubin":
        module = SourceModule(source, options=options, no_extern_c=True)
    else:
        ptx = (
            code
            if isinstance(code, bytes)
            else bytes(compile(source, options=options, no_extern_c=True, target="ptx"))
        )
        try:
            module = drv.module_from_buffer(ptx if ptx.endswith(b"\0") else ptx + b"\0")
        except drv.Error as error:
            return f"does not load: {error}"
    kernel = module.get_function("mm_tiled_trace")
    if carveout is not None:
        kernel.set_attribute(drv.function_attribute.PREFERRED_SHARED_MEMORY_CARVEOUT, carveout)
    M, K = A.shape
    N = B.shape[1]
    grid = ((N + TILE - 1) // TILE, (M + TILE - 1) // TILE)
    dA, dB = drv.to_device(A), drv.to_device(B)
    dC = drv.mem_alloc(M * N * 4)
    dT = drv.mem_alloc(grid[0] * grid[1] * 4 * 8)

    def launch() -> np.ndarray:
        kernel(dA, dB, dC, np.int32(M), np.int32(N), np.int32(K), np.int32(K), np.int32(N),
               np.int32(N), dT, block=(TILE, TILE, 1), grid=grid)  # fmt: skip
        drv.Context.synchronize()
        trace: np.ndarray = drv.from_device(dT, (grid[0] * grid[1], 4), np.uint64)
        return trace

    C = np.full((M, N), np.nan, np.float32)
    drv.memcpy_htod(dC, C)  # poisoned: an element the kernel leaves is NaN
    launch()
    drv.memcpy_dtoh(C, dC)
    if not np.allclose(C, A @ B, rtol=1e-3, atol=1e-3):
        return "computes a wrong product"
    return launch


def opencl_launcher(
    A: np.ndarray, B: np.ndarray, read_only: bool = True
) -> tuple[Callable[[], np.ndarray], bytes]:
    """A launch of the traced kernel through NVIDIA's OpenCL, and the program's PTX; A and
    B in READ_ONLY buffers (as xbackend makes them), or READ_WRITE. (NVIDIA's OpenCL also
    takes PTX as a program's binary, but nvcc's PTX, launched so, faulted: its parameters
    are not OpenCL's, and the device's OpenCL contexts failed after it.)"""
    import pyopencl as cl

    (platform,) = [p for p in cl.get_platforms() if "NVIDIA" in p.name]
    context = cl.Context(platform.get_devices())
    queue = cl.CommandQueue(context)
    program = cl.Program(context, (HERE / "tiled_trace.cl").read_text()).build(f"-DTILE={TILE}")
    kernel = program.mm_tiled_trace
    M, K = A.shape
    N = B.shape[1]
    groups = ((N + TILE - 1) // TILE, (M + TILE - 1) // TILE)
    flags = cl.mem_flags
    access = flags.READ_ONLY if read_only else flags.READ_WRITE
    dA = cl.Buffer(context, access | flags.COPY_HOST_PTR, hostbuf=A)
    dB = cl.Buffer(context, access | flags.COPY_HOST_PTR, hostbuf=B)
    dC = cl.Buffer(context, flags.READ_WRITE, M * N * 4)
    trace = np.zeros((groups[0] * groups[1], 4), np.uint64)
    dT = cl.Buffer(context, flags.READ_WRITE, trace.nbytes)
    ints = [np.int32(v) for v in (M, N, K, K, N, N)]

    def launch() -> np.ndarray:
        kernel(queue, (groups[0] * TILE, groups[1] * TILE), (TILE, TILE), dA, dB, dC, *ints, dT)
        cl.enqueue_copy(queue, trace, dT)
        queue.finish()
        return trace.copy()

    C = np.full((M, N), np.nan, np.float32)
    cl.enqueue_copy(queue, dC, C)  # poisoned: an element the kernel leaves is NaN
    launch()
    cl.enqueue_copy(queue, C, dC)
    queue.finish()
    assert np.allclose(C, A @ B, rtol=1e-3, atol=1e-3), "OpenCL: wrong product"
    return launch, bytes(program.binaries[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(SIZES))
    parser.add_argument("--launches", type=int, default=30)
    parser.add_argument("--carveouts", default="", help="CUDA's, in percent, e.g. 0,5,100")
    parser.add_argument(
        "--read-write", action="store_true", help="and OpenCL with A and B READ_WRITE"
    )
    parser.add_argument(
        "--load-cache", default="", help="CUDA also built with these -dlcm modes, e.g. cg,ca"
    )
    parser.add_argument("--ptx-out", default=None, help="a folder for OpenCL's PTX")
    args = parser.parse_args()
    rng = np.random.default_rng(23)
    columns = ["span_us", "block_us", "block_kcycles", "ghz", "held_max", "held_median",
               "first_wave", "sms", "last_entry_us"]  # fmt: skip
    print("| size | run | " + " | ".join(columns) + " |")
    print("| --- " * (len(columns) + 2) + "|")
    for name in args.sizes.split(","):
        M, K, N = SIZES[name]
        A = rng.standard_normal((M, K), np.float32)
        B = rng.standard_normal((K, N), np.float32)
        opencl, opencl_ptx = opencl_launcher(A, B)
        opencl_ptx = re.sub(rb"%envreg([0-9]+)", _in_cuda, opencl_ptx)
        if args.ptx_out:
            Path(args.ptx_out).mkdir(parents=True, exist_ok=True)
            (Path(args.ptx_out) / "tiled_trace.opencl.ptx").write_bytes(opencl_ptx.rstrip(b"\0"))
        builds: list[tuple[str, dict[str, Any]]] = [("CUDA", {})]
        for percent in filter(None, args.carveouts.split(",")):
            builds.append((f"CUDA carveout {percent}%", {"carveout": int(percent)}))
        builds.append(("CUDA, its PTX compiled by the driver", {"code": "ptx"}))
        for mode in filter(None, args.load_cache.split(",")):  # ptxas's default for loads
            builds.append((f"CUDA, -dlcm={mode}", {"nvcc": ("-Xptxas", f"-dlcm={mode}")}))
        builds.append(("CUDA, OpenCL's PTX", {"code": opencl_ptx}))
        if args.read_write:
            builds.insert(0, ("OpenCL, A and B READ_WRITE", {}))
        for label, options in [("OpenCL", {}), *builds]:  # each built as it is measured
            launch: Callable[[], np.ndarray] | str = opencl
            if label == "OpenCL, A and B READ_WRITE":
                launch, _ = opencl_launcher(A, B, read_only=False)
            elif label != "OpenCL":
                launch = cuda_launcher(A, B, **options)
            if isinstance(launch, str):
                print(f"| {name} | {label}: {launch} |", flush=True)
                continue
            found = run(launch, args.launches)
            cells = " | ".join(f"{found[c]:.1f}" for c in columns)
            print(f"| {name} | {label} | {cells} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
