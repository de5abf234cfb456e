"""The vendor lines on the device's clock (docs/notebook/measurement.md): CLBlast timed between
two markers on its queue, as xbackend times it, against the host clock around a finished
queue, as it was timed before; cuBLAS (CUDA events behind the hold) beside it.

    python studies/vendor_clock.py        (needs CUDA, NVIDIA's OpenCL and pyclblast)
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

import numpy as np

import xbackend

SIZES = ((16, 14, 16), (608, 532, 608), (2048, 2048, 2048), (4096, 4096, 4096))


def _host_clock_us(backend: Any, A: np.ndarray, B: np.ndarray, runs: int = 20) -> float:
    """CLBlast's call timed by the host clock around a finished queue (the old way)."""
    execution = backend._launch_execution(backend._plan("mm", "vendor", None, A, B))
    try:
        execution.upload()
        execution.run()
        queue, seconds = backend._queue, []
        for _ in range(runs):
            queue.finish()
            start = time.perf_counter()
            for step in execution._queued:
                step()
            queue.finish()
            seconds.append(time.perf_counter() - start)
    finally:
        execution.release()
    return statistics.median(seconds) * 1e6


def main() -> int:
    clblast, cublas = xbackend.get_backend("opencl", "nvidia"), xbackend.get_backend("cuda")
    for M, K, N in SIZES:
        rng = np.random.default_rng(1)
        A, B = rng.standard_normal((M, K), np.float32), rng.standard_normal((K, N), np.float32)
        markers, events = clblast.measure(A, B, "vendor"), cublas.measure(A, B, "vendor")
        print(
            f"{M}x{K}x{N}: CLBlast {statistics.median(markers.kernel_s) * 1e6:.1f} µs "
            f"({markers.clock}), host clock {_host_clock_us(clblast, A, B):.1f} µs; "
            f"cuBLAS {statistics.median(events.kernel_s) * 1e6:.1f} µs ({events.clock})",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
