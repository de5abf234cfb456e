"""Why CUDA's and NVIDIA OpenCL's naive kernels differ on the device (docs/notebook/measurement.md).

Their PTX is the same loop (studies/clock_study.py --ptx; nvcc -ptx): so is it how the
multiprocessor's memory is split between L1 and shared memory? CUDA lets a kernel say
which split it prefers; NVIDIA's OpenCL does not. This times CUDA's naive kernel by its
span with the driver's own choice, then preferring L1 (carveout 0) and shared memory
(carveout 100), beside OpenCL's naive kernel, interleaved round after round.
(Loading OpenCL's PTX into CUDA to time it there does not work: NVIDIA's OpenCL reads a
group's offsets from %envreg0-2, which CUDA does not set.)

    python studies/naive_twins.py [--variant naive|tiled] [--sizes 128x112,608x532] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Any

import numpy as np

import xbackend
from xbackend.measuring.timing import Sampling

SIZES = {
    "128x112": (128, 112, 128),
    "304x266": (304, 266, 304),
    "608x532": (608, 532, 608),
    "4096": (4096, 4096, 4096),
}
SAMPLING = Sampling(min_samples=10, max_samples=60, max_noise=0.01, timeout_s=3.0)


def _span(backend: Any, A: np.ndarray, B: np.ndarray, variant: str) -> float:
    kernel, _ = backend.measure(A, B, variant, sampling=SAMPLING).kept
    return float(statistics.median(kernel))


def _carveout(cuda: Any, percent: int | None, kernel_name: str) -> None:
    """Every compiled ``kernel_name`` of the CUDA backend prefers ``percent`` of shared
    memory (None: the driver's choice, -1)."""
    import pycuda.driver as drv

    for (_, _, kernel), function in cuda._functions.items():
        if kernel == kernel_name:
            function.set_attribute(
                drv.function_attribute.PREFERRED_SHARED_MEMORY_CARVEOUT,
                -1 if percent is None else percent,
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(SIZES))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--variant", choices=("naive", "tiled"), default="naive")
    parser.add_argument("--carveouts", default="0,100", help="shared-memory percentages")
    args = parser.parse_args()
    cuda, opencl = xbackend.get_backend("cuda"), xbackend.get_backend("opencl", "nvidia")
    cases: dict[str, int | None] = {"cuda": None}
    cases.update({f"cuda {p}%": int(p) for p in args.carveouts.split(",")})
    for size in args.sizes.split(","):
        M, K, N = SIZES[size]
        rng = np.random.default_rng(3)
        A, B = rng.standard_normal((M, K), np.float32), rng.standard_normal((K, N), np.float32)
        _span(cuda, A, B, args.variant)  # compiles it
        found: dict[str, list[float]] = {name: [] for name in [*cases, "opencl"]}
        for _ in range(args.rounds):
            for name, percent in cases.items():
                with cuda._active():
                    _carveout(cuda, percent, f"mm_{args.variant}")
                found[name].append(_span(cuda, A, B, args.variant))
            found["opencl"].append(_span(opencl, A, B, args.variant))
        line = "  ".join(f"{n} {statistics.median(v) * 1e6:9.2f}" for n, v in found.items())
        print(f"{size:8} span µs (median of {args.rounds} rounds): {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
