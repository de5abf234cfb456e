"""Why NVIDIA's OpenCL ran BabelStream's operations 2-3.5% below CUDA on an H200 where its
FMA loop and float4 copy were within 1% (docs/notebook/ceilings.md, 2026-11-27): each
operation in both APIs, in float32 and float64, one element a thread (BabelStream's launch)
and in a grid of 8 blocks per SM striding over the arrays, on the API's own clock and, for
the span, on the kernels' globaltimer stamps where the build takes them.

    PYTHONPATH=. python studies/stream_gap.py
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
    units = opened["cuda"].device.compute_units or 1
    for dtype in ("float32", "float64"):
        for label, blocks in (("one a thread", None), ("8 blocks/SM", 8 * units)):
            rates = {name: ceilings.stream_rates(b.device, b.run_product, dtype, blocks)
                     for name, b in opened.items()}  # fmt: skip
            for op in ceilings.STREAM:
                cuda, opencl = rates["cuda"][op][0], rates["opencl"][op][0]
                print(f"{dtype:8} {label:13} {op:6} cuda {cuda / 1e12:.3f} TB/s  "
                      f"opencl {opencl / 1e12:.3f} TB/s  opencl/cuda {opencl / cuda:.3f}",
                      flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
