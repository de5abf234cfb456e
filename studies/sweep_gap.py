"""The intensity sweep's gap near the ridge, API clock against the kernels' own span
(issue 42; a record, not a tool).

``xbackend ceilings --sweep`` times mixbench's sweep by each API's clock (CUDA events
behind the hold, OpenCL's profiling events). On an H200 (2026-11-27) NVIDIA's OpenCL ran
0-5% below CUDA at 2 to 32 rounds, by a different amount in each run, and within 1% at
the sweep's ends. Here each setting is timed both ways in each API, interleaved: the
product as ``ceilings`` runs it, and the same product built stamped (each block's first
worker stamps ``%globaltimer``: the span from the first block's entry to the last one's
exit, no launch in it). If the gap is in the span too, it is the kernels' (their blocks);
if only in the API's time, it is the launch. ``REPEATS`` passes, the backends' order
swapped each pass.

    PYTHONPATH=. python studies/sweep_gap.py          # on an NVIDIA GPU
"""

from __future__ import annotations

import statistics
import sys

import xbackend
from xbackend.backends.ceilings import STREAM_RUNS, copy_floats, intensity_product

ROUNDS = (1, 2, 4, 8, 16, 32, 64, 256)
REPEATS = 4


def best_s(backend, product) -> float:
    return float(min(backend.run_product(product, STREAM_RUNS["gpu"]).seconds))


def main() -> int:
    with xbackend.get_backend("cuda") as cuda, xbackend.get_backend("opencl", "nvidia") as ocl:
        device = cuda.device
        elements, blocks = copy_floats(device), 8 * (device.compute_units or 1)
        ratios: dict[tuple[int, str], list[float]] = {}
        for repeat in range(REPEATS):
            pair = [("cuda", cuda), ("opencl", ocl)]
            for rounds in ROUNDS:
                product = intensity_product(rounds, elements, "float32", blocks=blocks)
                found: dict[tuple[str, str], float] = {}
                for label, backend in pair if repeat % 2 == 0 else pair[::-1]:
                    found[label, "api"] = best_s(backend, product)
                    found[label, "span"] = best_s(backend, product.with_stamps())
                for clock in ("api", "span"):
                    ratio = found["cuda", clock] / found["opencl", clock]
                    ratios.setdefault((rounds, clock), []).append(ratio)
                print(f"pass {repeat} rounds {rounds:3d}: OpenCL/CUDA speed, API clock "
                      f"{ratios[rounds, 'api'][-1]:.3f}, span {ratios[rounds, 'span'][-1]:.3f}; "
                      f"CUDA {found['cuda', 'api'] * 1e6:.1f} µs (API) "
                      f"{found['cuda', 'span'] * 1e6:.1f} µs (span)", flush=True)  # fmt: skip
        print("\nrounds  API clock: min-max (median)   span: min-max (median)")
        for rounds in ROUNDS:
            cells = []
            for clock in ("api", "span"):
                values = ratios[rounds, clock]
                cells.append(f"{min(values):.3f}-{max(values):.3f} "
                             f"({statistics.median(values):.3f})")  # fmt: skip
            print(f"{rounds:6d}  {cells[0]:28s}  {cells[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
