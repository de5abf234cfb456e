// The shipped tiled kernel (kernels/mm/mm.cu, float, 32-bit offsets, one product) with a
// trace: the first thread of each block writes its multiprocessor (%smid), the GPU's
// %globaltimer at the block's entry and, after a last barrier, at its exit, and the
// multiprocessor's cycles (%clock64) between the two.
// studies/block_timeline.py reads the traces: how many blocks each multiprocessor held at
// once, how long a block took, when the waves began. The OpenCL twin is tiled_trace.cl.
#ifndef TILE
#define TILE 16
#endif

extern "C" __global__ __launch_bounds__(TILE * TILE)
void mm_tiled_trace(const float* __restrict__ A,
                    const float* __restrict__ B,
                    float* __restrict__ C,
                    const int M, const int N, const int K,
                    const int lda, const int ldb, const int ldc,
                    unsigned long long* __restrict__ trace)
{
    unsigned long long entered = 0;
    unsigned int sm = 0;
    unsigned long long began = 0;
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    if (tx == 0 && ty == 0) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(entered));
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        asm volatile("mov.u64 %0, %%clock64;" : "=l"(began));
    }
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];

    const int col = blockIdx.x * TILE + tx;
    const int row = blockIdx.y * TILE + ty;

    float acc = 0;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[row * lda + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * ldb + col] : 0.0f;
        __syncthreads();

        for (int k = 0; k < TILE; ++k)
            acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N)
        C[row * ldc + col] = acc;
    __syncthreads();
    if (tx == 0 && ty == 0) {
        unsigned long long left;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(left));
        unsigned long long ended;
        asm volatile("mov.u64 %0, %%clock64;" : "=l"(ended));
        const int block = blockIdx.y * gridDim.x + blockIdx.x;
        trace[4 * block] = entered;
        trace[4 * block + 1] = left;
        trace[4 * block + 2] = sm;
        trace[4 * block + 3] = ended - began;
    }
}
