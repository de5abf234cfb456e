// Matrix products C = A · B for row-major A (M×K), B (K×N) and C (M×N), one or a batch.
//
// One thread computes one element of C. Thread (x, y) of the launch owns column
// x and row y, so the threads of a warp read neighbouring elements of B and
// write neighbouring elements of C: those accesses coalesce.
//
// Rows are lda, ldb and ldc elements apart (the leading dimensions), so a
// sub-matrix of a larger one (a strided NumPy view) needs no copy. A batch of
// products runs on the grid's third dimension: product z reads A, B and C at
// z·strideA, z·strideB and z·strideC (0 for a single product).
//
// Compile-time parameters, passed as -D options so that every combination is a
// module of its own in the compiler cache:
//   TILE  edge of the square thread block; for mm_tiled also of the shared tiles
//   REAL  element type: float (default), double or int
//   WIDE_INDEX  defined: element offsets (row·lda + k, z·strideA) are 64-bit
//         integers, as are lda, ldb, ldc and the strides; else 32-bit, the fast
//         path. Python defines it only for a product whose offsets pass 2^31 - 1
//         (backends/plans.py), or where told to (XBACKEND_INDEX=wide).
//
// The OpenCL twin, kernels/mm/mm.cl, has the same kernels line for line.

// The batch's index z is taken as an int before it scales the strides: NVIDIA's OpenCL
// compiler, given get_group_id(2)'s 64-bit size_t, kept the k-step of A's pointer in
// per-thread registers and ran the naive kernel 22% slower at 608x532 on an H200 (a
// 32-bit z: the same time as CUDA's; docs/measurement.md). The offset z·stride fits an
// int wherever the default build is used (backends/plans.py checks the reach).

#include "stamp.h"
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
#define INDEX long long
#define AS_INDEX(x) ((INDEX)(x))
#else
#define INDEX int
#define AS_INDEX(x) (x)
#endif

// naive: every operand comes straight from global memory, so each element of A
// is read N times and each element of B M times; only the caches soften that.
extern "C" __global__ __launch_bounds__(TILE * TILE)
void mm_naive(const REAL* __restrict__ A,
              const REAL* __restrict__ B,
              REAL* __restrict__ C,
              const int M, const int N, const int K,
              const INDEX lda, const INDEX ldb, const INDEX ldc,
              const INDEX strideA, const INDEX strideB, const INDEX strideC STAMP_PARAMETER)
{
    STAMP_ENTER;
    const int z = blockIdx.z;  // an int: see the note at the top
    A += z * strideA;
    B += z * strideB;
    C += z * strideC;
    const int col = blockIdx.x * TILE + threadIdx.x;
    const int row = blockIdx.y * TILE + threadIdx.y;
    if (row >= M || col >= N)
        return;

    REAL acc = 0;
    for (int k = 0; k < K; ++k)
        acc += A[row * lda + k] * B[k * ldb + col];
    C[row * ldc + col] = acc;
    STAMP_EXIT;
}

// tiled: the block walks along K one TILE×TILE tile of A and of B at a time.
// Each thread loads one element of each tile into shared memory, so every
// element fetched from global memory is reused TILE times from shared memory.
extern "C" __global__ __launch_bounds__(TILE * TILE)
void mm_tiled(const REAL* __restrict__ A,
              const REAL* __restrict__ B,
              REAL* __restrict__ C,
              const int M, const int N, const int K,
              const INDEX lda, const INDEX ldb, const INDEX ldc,
              const INDEX strideA, const INDEX strideB, const INDEX strideC STAMP_PARAMETER)
{
    STAMP_ENTER;
    __shared__ REAL As[TILE][TILE];
    __shared__ REAL Bs[TILE][TILE];

    const int z = blockIdx.z;  // an int: see the note at the top
    A += z * strideA;
    B += z * strideB;
    C += z * strideC;
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int col = blockIdx.x * TILE + tx;
    const int row = blockIdx.y * TILE + ty;

    // Threads outside C still load and reach every barrier: an early return
    // here would leave tiles half-filled for their neighbours.
    REAL acc = 0;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        // Out-of-range elements load as zero, which adds nothing to the sum.
        As[ty][tx] = (row < M && k0 + tx < K) ? A[row * lda + k0 + tx] : (REAL)0;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * ldb + col] : (REAL)0;
        __syncthreads();

        for (int k = 0; k < TILE; ++k)
            acc += As[ty][k] * Bs[k][tx];
        // No thread may overwrite a tile while another still reads it.
        __syncthreads();
    }
    if (row < M && col < N)
        C[row * ldc + col] = acc;
    STAMP_EXIT;
}
