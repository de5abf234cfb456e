"""How far BabelStream's triad moves between measurements in one process, in each API on
one device: ten rounds, CUDA's and OpenCL's taken in turn, each the best of 5 runs (as
``xbackend ceilings`` takes it), each round on arrays allocated afresh; then ten rounds on
the same arrays. On an H200 (2026-11-27) CUDA's triad read 3.92-4.25 TB/s between runs of
the command where OpenCL's read 4.06-4.23 (docs/notebook/ceilings.md).

    PYTHONPATH=. python studies/triad_spread.py
"""

from __future__ import annotations

from typing import Any

import xbackend
from xbackend.backends import ceilings


def main() -> None:
    opened: dict[str, Any] = {  # compiled backends: run_product is theirs
        "cuda": xbackend.get_backend("cuda"),
        "opencl": xbackend.get_backend("opencl", "nvidia"),
    }
    elements = ceilings.copy_floats(opened["cuda"].device)
    moved = 3 * 8 * elements
    for round_ in range(10):
        rates = {}
        for name, backend in opened.items():
            product = ceilings.stream_product("triad", elements, "float64")
            timed = backend.run_product(product, ceilings.SAMPLES)
            rates[name] = [moved / s / 1e12 for s in timed.seconds]
        print(round_, " ".join(f"{name} best {max(r):.3f} runs {' '.join(f'{x:.3f}' for x in r)}"
                               for name, r in rates.items()), flush=True)  # fmt: skip
    for name, backend in opened.items():
        product = ceilings.stream_product("triad", elements, "float64")
        timed = backend.run_product(product, 50)
        rates_ = sorted(moved / s / 1e12 for s in timed.seconds)
        print(
            f"{name}: 50 runs on the same arrays: min {rates_[0]:.3f} median "
            f"{rates_[25]:.3f} max {rates_[-1]:.3f} TB/s",
            flush=True,
        )


if __name__ == "__main__":
    main()
