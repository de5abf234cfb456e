"""Is cuBLAS's own tile, as our kernel, nearer to cuBLAS? (issue 43; a record, not a tool)

cuBLAS launched, on an H200 (2026-11-27, CUPTI and Nsight Compute: docs/results/h200/vendor/),
``sm80_xmma_gemm_..._tilesize256x128x8_stage3_warpsize4x2x1`` at 4096³ and
``cutlass_80_simt_sgemm_256x128_8x4`` at 8000×7000: a 256×128 block of 8 warps (4×2, each
64×64), k-slabs of 8, 3 or 4 stages. mm_warp's warp_async takes that shape as parameters:
BM=256, BN=128, BK=8, 16×8 outputs a thread (a warp's 4×8 threads: 64×64), ``stages`` slabs
in flight. Each such rung is timed interleaved with cuBLAS (the CUDA backend's vendor
line): cuBLAS, rung, cuBLAS, rung, ... ``ROUNDS`` rounds of ``SAMPLES`` samples, each a
kernel time on its device clock; a share is cuBLAS's median over the rung's, with a seeded
bootstrap 95% interval of that ratio from both sets of samples (``xbackend diff``'s).

    PYTHONPATH=. python studies/cublas_shape.py          # on a GPU machine
"""

from __future__ import annotations

import statistics
import sys

import numpy as np

import xbackend
from xbackend.analysis.diff import ratio_interval
from xbackend.problems import make_operands
from xbackend.sweep.sizes import parse_shapes

SIZES = "4096x4096x4096,8000x7000x8000"
ROUNDS, SAMPLES = 4, 10
CUBLAS_SHAPE = {"BM": 256, "BN": 128, "BK": 8, "WM": 64, "WN": 64, "TM": 16, "TN": 8}


def samples_s(backend, A, B, variant, params=None) -> list[float]:
    measured = backend.measure(A, B, variant, params=params, warmup=1, samples=SAMPLES,
                               min_samples=SAMPLES)  # fmt: skip
    return list(measured.kept[0])


def main() -> int:
    with xbackend.get_backend("cuda") as cuda, xbackend.get_backend("opencl", "nvidia") as ocl:
        for shape in parse_shapes(SIZES):
            A, B = make_operands(shape, 0, np.dtype("float32"))
            for label, backend in (("cuda", cuda), ("opencl", ocl)):
                for stages in (2, 3, 4):
                    params = {**CUBLAS_SHAPE, "stages": stages}
                    vendor, rung = [], []
                    try:
                        for _ in range(ROUNDS):
                            vendor += samples_s(cuda, A, B, "vendor")
                            rung += samples_s(backend, A, B, "warp_async", params)
                    except xbackend.XBackendError as error:
                        print(f"{shape} {label} stages={stages}: {str(error).splitlines()[0]}")
                        continue
                    share = ratio_interval(rung, vendor)
                    print(f"{shape} {label} warp_async 256x128x8 16x8 stages={stages}: "
                          f"{statistics.median(rung) * 1e3:.3f} ms, cuBLAS "
                          f"{statistics.median(vendor) * 1e3:.3f} ms: {share.ratio:.1%} "
                          f"[{share.low:.1%}–{share.high:.1%}] of cuBLAS", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
