// The shipped tiled kernel (kernels/mm/mm.cl, float, 32-bit offsets, one product) with a
// trace: the first work-item of each group writes its multiprocessor (%smid) and the
// GPU's %globaltimer (NVIDIA's OpenCL compiler takes inline PTX) at the group's entry and,
// after a last barrier, at its exit, and the multiprocessor's cycles (%clock64) between
// the two. The CUDA twin is tiled_trace.cu.
#ifndef TILE
#define TILE 16
#endif

__kernel __attribute__((reqd_work_group_size(TILE, TILE, 1)))
void mm_tiled_trace(__global const float* restrict A,
                    __global const float* restrict B,
                    __global float* restrict C,
                    const int M, const int N, const int K,
                    const int lda, const int ldb, const int ldc,
                    __global unsigned long* restrict trace)
{
    unsigned long entered = 0;
    unsigned int sm = 0;
    unsigned long began = 0;
    const int tx = get_local_id(0);
    const int ty = get_local_id(1);
    if (tx == 0 && ty == 0) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(entered));
        asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
        asm volatile("mov.u64 %0, %%clock64;" : "=l"(began));
    }
    __local float As[TILE][TILE];
    __local float Bs[TILE][TILE];

    const int col = get_group_id(0) * TILE + tx;
    const int row = get_group_id(1) * TILE + ty;

    float acc = 0;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[row * lda + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * ldb + col] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);

        for (int k = 0; k < TILE; ++k)
            acc += As[ty][k] * Bs[k][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < M && col < N)
        C[row * ldc + col] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (tx == 0 && ty == 0) {
        unsigned long left;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(left));
        unsigned long ended;
        asm volatile("mov.u64 %0, %%clock64;" : "=l"(ended));
        const int group = get_group_id(1) * get_num_groups(0) + get_group_id(0);
        trace[4 * group] = entered;
        trace[4 * group + 1] = left;
        trace[4 * group + 2] = sm;
        trace[4 * group + 3] = ended - began;
    }
}
