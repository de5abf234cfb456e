// Reduced matrix products: for row-major A (M×K) and B (K×N) with even M and N,
// C is (M/2)×(N/2) and each element sums a 2×2 block of the full product A · B:
//
//   C[i][j] = Σ_{r ∈ {2i, 2i+1}} Σ_{c ∈ {2j, 2j+1}} A[r] · B[:, c]
//           = (A[2i] + A[2i+1]) · (B[:, 2j] + B[:, 2j+1])
//
// One work-item computes one element of C; rows are lda, ldb and ldc elements apart.
// The three kernels trade multiplications and memory traffic differently:
//   rmm_naive4  4·K multiplications per element, straight from the definition;
//               added one by one, so an Inf times products of both signs is NaN
//               (−inf·0.75 + −inf·(−0.25)) where the pair sums give −inf·0.5 = −inf
//   rmm_naive   K multiplications: the two rows and the two columns are added first
//   rmm_tiled   as rmm_naive, with the pair sums made while loading local tiles
// The ladder's top rung computes rmm too: kernels/mm_warp built with -DREDUCED.
//
// Compile-time parameters (-D options): TILE, the edge of the square work-group
// and of the local tiles; REAL, the element type (float, double or int); SUM_BLOCK,
// the work-group of rmm_pair_sums; XB_FP64, defined when REAL is double, to enable
// cl_khr_fp64; WIDE_INDEX, 64-bit offsets (as in mm). Python passes each (the
// defaults let the file compile on its own).
//
// The CUDA twin, kernels/rmm/rmm.cu, has the same kernels line for line.

#include "stamp.h"
#ifdef XB_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif
#ifndef TILE
#define TILE 16
#endif
#ifndef REAL
#define REAL float
#endif
// INDEX: the type of element offsets and of the leading dimensions and strides they
// are made of. AS_INDEX widens a 32-bit value before a product that may pass
// 2^31 - 1; in the default build it is the value itself, so that build is the
// 32-bit code as it was.
#ifdef WIDE_INDEX
#define INDEX long
#define AS_INDEX(x) ((INDEX)(x))
#else
#define INDEX int
#define AS_INDEX(x) (x)
#endif
#ifndef SUM_BLOCK
#define SUM_BLOCK 256
#endif

__kernel __attribute__((reqd_work_group_size(TILE, TILE, 1)))
void rmm_naive4(__global const REAL* restrict A,
                __global const REAL* restrict B,
                __global REAL* restrict C,
                const int M, const int N, const int K,
                const INDEX lda, const INDEX ldb, const INDEX ldc STAMP_PARAMETER)
{
    STAMP_ENTER;
    const int col = get_group_id(0) * TILE + get_local_id(0);
    const int row = get_group_id(1) * TILE + get_local_id(1);
    if (row >= M / 2 || col >= N / 2)
        return;

    const INDEX top = 2 * row * lda;
    const INDEX bottom = top + lda;
    REAL acc = 0;
    for (int k = 0; k < K; ++k) {
        const REAL left = B[k * ldb + 2 * col];
        const REAL right = B[k * ldb + 2 * col + 1];
        acc += A[top + k] * left + A[top + k] * right
             + A[bottom + k] * left + A[bottom + k] * right;
    }
    C[row * ldc + col] = acc;
    STAMP_EXIT;
}

__kernel __attribute__((reqd_work_group_size(TILE, TILE, 1)))
void rmm_naive(__global const REAL* restrict A,
               __global const REAL* restrict B,
               __global REAL* restrict C,
               const int M, const int N, const int K,
               const INDEX lda, const INDEX ldb, const INDEX ldc STAMP_PARAMETER)
{
    STAMP_ENTER;
    const int col = get_group_id(0) * TILE + get_local_id(0);
    const int row = get_group_id(1) * TILE + get_local_id(1);
    if (row >= M / 2 || col >= N / 2)
        return;

    const INDEX top = 2 * row * lda;
    const INDEX bottom = top + lda;
    REAL acc = 0;
    for (int k = 0; k < K; ++k)
        acc += (A[top + k] + A[bottom + k]) * (B[k * ldb + 2 * col] + B[k * ldb + 2 * col + 1]);
    C[row * ldc + col] = acc;
    STAMP_EXIT;
}

// tiled: each work-item loads one pair sum of A and one of B per tile, so the sums
// are made once per tile and every one is reused TILE times from local memory.
__kernel __attribute__((reqd_work_group_size(TILE, TILE, 1)))
void rmm_tiled(__global const REAL* restrict A,
               __global const REAL* restrict B,
               __global REAL* restrict C,
               const int M, const int N, const int K,
               const INDEX lda, const INDEX ldb, const INDEX ldc STAMP_PARAMETER)
{
    STAMP_ENTER;
    __local REAL As[TILE][TILE];
    __local REAL Bs[TILE][TILE];

    const int tx = get_local_id(0);
    const int ty = get_local_id(1);
    const int col = get_group_id(0) * TILE + tx;
    const int row = get_group_id(1) * TILE + ty;
    const INDEX top = 2 * row * lda;

    // Work-items outside C still load and reach every barrier.
    REAL acc = 0;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        const int ka = k0 + tx;
        const int kb = k0 + ty;
        As[ty][tx] = (row < M / 2 && ka < K) ? A[top + ka] + A[top + lda + ka] : (REAL)0;
        Bs[ty][tx] = (kb < K && col < N / 2)
                   ? B[kb * ldb + 2 * col] + B[kb * ldb + 2 * col + 1] : (REAL)0;
        barrier(CLK_LOCAL_MEM_FENCE);

        for (int k = 0; k < TILE; ++k)
            acc += As[ty][k] * Bs[k][tx];
        // No work-item may overwrite a tile while another still reads it.
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < M / 2 && col < N / 2)
        C[row * ldc + col] = acc;
    STAMP_EXIT;
}

// The first step of rmm's vendor line: the pair sums as matrices of their own,
// for a vendor GEMM on the half-size product (the CUDA backend's rmm `vendor`).
// S (rows × cols, contiguous) gets S[r][c] = X[e] + X[e + partner], where
// e = r·row_step + c·col_step: A's row pairs with row_step = 2·lda, col_step = 1 and
// partner = lda; B's column pairs with row_step = ldb, col_step = 2 and partner = 1.
// One work-item per element of S, in work-groups of SUM_BLOCK.
__kernel __attribute__((reqd_work_group_size(SUM_BLOCK, 1, 1)))
void rmm_pair_sums(__global const REAL* restrict X,
                   __global REAL* restrict S,
                   const int rows, const int cols,
                   const INDEX row_step, const INDEX col_step, const INDEX partner STAMP_PARAMETER)
{
    STAMP_ENTER;
    const INDEX element = AS_INDEX(get_group_id(0)) * SUM_BLOCK + get_local_id(0);
    if (element >= AS_INDEX(rows) * cols)
        return;
    const INDEX e = element / cols * row_step + element % cols * col_step;
    S[element] = X[e] + X[e + partner];
    STAMP_EXIT;
}
