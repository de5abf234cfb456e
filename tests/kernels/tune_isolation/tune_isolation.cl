// For tests/test_tune_isolation.py: one naive kernel, built at three tiles (BLOCK_SIZE).
// At 4 it computes the product; at 8 it never returns; at 16 it writes far outside C. Run
// natively, the last two would hang or kill the process that tunes them: `tune --kernels`
// times a user's kernels in a process of their own for that reason (xbackend/isolation.py).

__kernel void matmul_by_tile(__global float* C, __global const float* A,
                             __global const float* B, int hA, int wA, int wB)
{
    int col = get_global_id(0);
    int row = get_global_id(1);
    if (row >= hA || col >= wB)
        return;
    float sum = 0.0f;
    for (int k = 0; k < wA; ++k)
        sum += A[row * wA + k] * B[k * wB + col];
#if BLOCK_SIZE == 8
    // Waits for K to be 0, which no launch gives; the volatile store is a side effect each
    // trip, so the compiler may not assume the loop ends and remove it.
    volatile __global float* out = C;
    int trips = 0;
    while (wA != 0) {
        out[row * wB + col] = (float)trips;
        trips = (trips + 1) & 0xffff;
    }
#endif
#if BLOCK_SIZE == 16
    // Each element 100 million elements past where it belongs: 400 MB apart, far outside
    // any buffer, which on a CPU's OpenCL runtime is a segmentation fault.
    long gid = (long)row * wB + col + 1;
    C[gid * 100000000L] = sum;
#else
    C[row * wB + col] = sum;
#endif
}
