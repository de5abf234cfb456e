"""One product each of cuBLAS, our rung in cuBLAS's shape (3 stages, and 4 in dynamic shared
memory) and our best tuned rung, at 4096³ on CUDA: the launches ``studies/parity_ncu.sh``
profiles side by side (issue 43; a record, not a tool). Each is measured once and checked
(one sample, no warm-up)."""

from __future__ import annotations

import sys

import numpy as np

import xbackend
from xbackend.operations import Shape
from xbackend.problems import Reference, check, make_operands

CUBLAS_SHAPE = {"BM": 256, "BN": 128, "BK": 8, "WM": 64, "WN": 64, "TM": 16, "TN": 8, "stages": 3}


def main() -> int:
    A, B = make_operands(Shape(4096, 4096, 4096), 0, np.dtype("float32"))
    reference = Reference.of(A, B, "mm")
    with xbackend.get_backend("cuda") as cuda:
        four = {**CUBLAS_SHAPE, "stages": 4}
        products = (("vendor", None), ("warp_async", CUBLAS_SHAPE), ("warp_async", four),
                    ("warp_db", None))  # fmt: skip
        for variant, params in products:
            measured = cuda.measure(A, B, variant, params=params, warmup=0, samples=1,
                                    min_samples=1)  # fmt: skip
            equal = check(measured.result, reference).equal
            print(f"{variant} {measured.params or ''}: equal {equal}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
