// Register-blocked matrix products C = A · B (row-major, leading dimensions and batch
// strides as in mm.cu): the first rungs of the ladder above mm_tiled.
//
// A block computes a TILE×TILE tile of C with (TILE/TM)×(TILE/TN) threads, and each
// thread computes a TM×TN patch of it in registers. Per step along K the block stages
// a TILE×BK slab of A and a BK×TILE slab of B in shared memory; then every value a
// thread reads from shared memory feeds TN (for A) or TM (for B) multiply-adds,
// against one in mm_tiled. With TN = 1 this is 1-D register blocking (a column
// of TM results per thread); with TM, TN > 1, 2-D.
//
// Which outputs a thread owns: by default a contiguous TM×TN patch. With STRIDED
// defined, rows ty + i·(TILE/TM) and columns tx + j·(TILE/TN) instead: neighbouring
// threads then read neighbouring words of Bs (no bank conflicts; contiguous patches
// read them TN words apart) and write neighbouring elements of C. With GROUPS4
// defined (TM and TN multiples of 4), groups of 4 contiguous rows and columns,
// the groups strided: 16-byte reads of As and Bs that neighbouring threads
// spread over all the banks.
//
// Compile-time parameters (-D options): TILE, TM, TN, BK, STRIDED or GROUPS4, REAL
// (float, double, int) and WIDE_INDEX (64-bit offsets, as in mm).
// The OpenCL twin, kernels/mm_reg/mm_reg.cl, has the same kernel line for line.

// The batch's index z is taken as an int before it scales the strides: NVIDIA's OpenCL
// compiler, given get_group_id(2)'s 64-bit size_t, kept the k-step of A's pointer in
// per-thread registers and ran the naive kernel 22% slower at 608x532 on an H200 (a
// 32-bit z: the same time as CUDA's; docs/measurement.md). The offset z·stride fits an
// int wherever the default build is used (backends/plans.py checks the reach).

#include "stamp.h"
#ifndef TILE
#define TILE 64
#endif
#ifndef TM
#define TM 4
#endif
#ifndef TN
#define TN 4
#endif
#ifndef BK
#define BK 8
#endif
#ifndef REAL
#define REAL float
#endif
// INDEX: the type of element offsets and of the leading dimensions and strides they
// are made of. AS_INDEX widens a 32-bit value before a product that may pass
// 2^31 - 1; in the default build it is the value itself, so that build is the
// 32-bit code as it was.
#ifdef WIDE_INDEX
#define INDEX long long
#define AS_INDEX(x) ((INDEX)(x))
#else
#define INDEX int
#define AS_INDEX(x) (x)
#endif

#define THREADS ((TILE / TM) * (TILE / TN))
#if defined(STRIDED)
#define ROW_OF(i) (ty + (i) * (TILE / TM))
#define COL_OF(j) (tx + (j) * (TILE / TN))
#elif defined(GROUPS4)
// Groups of 4 contiguous outputs, the groups strided across the block.
#define ROW_OF(i) (((i) / 4) * (TILE / TM) * 4 + ty * 4 + (i) % 4)
#define COL_OF(j) (((j) / 4) * (TILE / TN) * 4 + tx * 4 + (j) % 4)
#else
#define ROW_OF(i) (ty * TM + (i))
#define COL_OF(j) (tx * TN + (j))
#endif

extern "C" __global__ __launch_bounds__(THREADS)
void mm_reg(const REAL* __restrict__ A,
            const REAL* __restrict__ B,
            REAL* __restrict__ C,
            const int M, const int N, const int K,
            const INDEX lda, const INDEX ldb, const INDEX ldc,
            const INDEX strideA, const INDEX strideB, const INDEX strideC STAMP_PARAMETER)
{
    STAMP_ENTER;
    // A slab is stored transposed, As[k][m], so that a thread's TM values of A for
    // one k lie next to each other, as its TN values of B do in Bs[k][n].
    __shared__ REAL As[BK][TILE];
    __shared__ REAL Bs[BK][TILE];

    const int z = blockIdx.z;  // an int: see the note at the top
    A += z * strideA;
    B += z * strideB;
    C += z * strideC;
    const int tx = threadIdx.x;  // 0 .. TILE/TN - 1: which TN columns
    const int ty = threadIdx.y;  // 0 .. TILE/TM - 1: which TM rows
    const int thread = ty * (TILE / TN) + tx;
    const int a_k = thread % BK;    // the column of the A slab this thread loads
    const int b_n = thread % TILE;  // the column of the B slab this thread loads
    const int row0 = blockIdx.y * TILE;
    const int col0 = blockIdx.x * TILE;

    REAL acc[TM][TN];
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j)
            acc[i][j] = 0;

    for (int k0 = 0; k0 < K; k0 += BK) {
        // The block loads both slabs together: THREADS/BK rows of the A slab
        // and THREADS/TILE rows of the B slab per pass (THREADS is a multiple of
        // both). Out-of-range elements load as zero, which adds nothing to the sums.
        for (int m = thread / BK; m < TILE; m += THREADS / BK) {
            const int row = row0 + m, kk = k0 + a_k;
            As[a_k][m] = (row < M && kk < K) ? A[row * lda + kk] : (REAL)0;
        }
        for (int k = thread / TILE; k < BK; k += THREADS / TILE) {
            const int kk = k0 + k, col = col0 + b_n;
            Bs[k][b_n] = (kk < K && col < N) ? B[kk * ldb + col] : (REAL)0;
        }
        __syncthreads();

        for (int k = 0; k < BK; ++k) {
            REAL a[TM], b[TN];
            for (int i = 0; i < TM; ++i)
                a[i] = As[k][ROW_OF(i)];
            for (int j = 0; j < TN; ++j)
                b[j] = Bs[k][COL_OF(j)];
            for (int i = 0; i < TM; ++i)
                for (int j = 0; j < TN; ++j)
                    acc[i][j] += a[i] * b[j];
        }
        // No thread may overwrite a slab while another still reads it.
        __syncthreads();
    }

    for (int i = 0; i < TM; ++i) {
        const int row = row0 + ROW_OF(i);
        for (int j = 0; j < TN; ++j) {
            const int col = col0 + COL_OF(j);
            if (row < M && col < N)
                C[row * ldc + col] = acc[i][j];
        }
    }
    STAMP_EXIT;
}
