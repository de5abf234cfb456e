"""A blocked matrix product in Triton, float32 with TF32 off: the line a Python user would
write instead of CUDA or OpenCL, timed beside cuBLAS by ``scripts/ladder_benchmark.py``.

Each program computes a BM×BN tile of C, walking K a BK slab at a time (Triton pipelines
the slabs' loads over ``num_stages``); programs are ordered in groups of GROUP rows of
tiles so that neighbours share slabs of B in L2. ``tl.dot(..., input_precision="ieee")``
keeps the products in float32 (no TF32), as the ladder's kernels and the cuBLAS line do.
The configurations autotuned over are the usual ones for float32 on a large GPU.

Needs torch and triton (the GPU machine has both); xbackend itself does not import it.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

# (BM, BN, BK, stages, warps)
CONFIGS = [
    (128, 128, 32, 3, 8),
    (128, 256, 32, 3, 8),
    (256, 128, 32, 3, 8),
    (128, 128, 32, 4, 4),
    (128, 64, 32, 4, 4),
    (64, 128, 32, 4, 4),
    (64, 64, 32, 5, 2),
    (128, 128, 16, 4, 8),
]


@triton.autotune(
    configs=[
        triton.Config({"BM": bm, "BN": bn, "BK": bk, "GROUP": 8}, num_stages=s, num_warps=w)
        for bm, bn, bk, s, w in CONFIGS
    ],
    key=["M", "N", "K"],
)
@triton.jit
def matmul_kernel(
    a, b, c, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr,
):  # fmt: skip
    program = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    in_group = GROUP * tiles_n
    first_m = (program // in_group) * GROUP
    rows_of_group = tl.minimum(tiles_m - first_m, GROUP)
    tile_m = first_m + (program % in_group) % rows_of_group
    tile_n = (program % in_group) // rows_of_group

    rows = tile_m * BM + tl.arange(0, BM)
    cols = tile_n * BN + tl.arange(0, BN)
    depth = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, tl.cdiv(K, BK)):
        ks = k0 * BK + depth
        a_slab = tl.load(
            a + rows[:, None] * stride_am + ks[None, :] * stride_ak,
            mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0,
        )  # fmt: skip
        b_slab = tl.load(
            b + ks[:, None] * stride_bk + cols[None, :] * stride_bn,
            mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0,
        )  # fmt: skip
        acc = tl.dot(a_slab, b_slab, acc, input_precision="ieee")
    tl.store(
        c + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
        mask=(rows[:, None] < M) & (cols[None, :] < N),
    )  # fmt: skip


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """C = A · B for float32 CUDA tensors (autotuned on the first call of a size)."""
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=torch.float32)

    def grid(meta: dict[str, int]) -> tuple[int]:
        return (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)

    matmul_kernel[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
    )  # fmt: skip
    return c


def best_config() -> str:
    """The configuration the autotuner chose last, as text."""
    chosen = matmul_kernel.best_config
    return f"{chosen.kwargs} stages={chosen.num_stages} warps={chosen.num_warps}"
