// The student's kernels (examples/assignment/student/student.cl) with, after the real naive
// kernel, a declaration under #if 0 that takes its sizes in another order
// (tests/test_families_round5.py): the launch is bound by the one the build compiles.

__kernel void matmul_naive(__global float* C, __global const float* A,
                           __global const float* B, int hA, int wA, int wB)
{
    int col = get_global_id(0);
    int row = get_global_id(1);
    if (row >= hA || col >= wB)
        return;
    float sum = 0.0f;
    for (int k = 0; k < wA; ++k)
        sum += A[row * wA + k] * B[k * wB + col];
    C[row * wB + col] = sum;
}

#if 0
// An old try, kept out of the build: its sizes in another order. The build never sees it,
// so its launch must not be bound by it.
__kernel void matmul_naive(__global float* C, __global const float* A,
                           __global const float* B, int wA, int hA, int wB)
{
}
#endif

__kernel void matmul_tiled(__global float* C, __global const float* A,
                           __global const float* B, int hA, int wA, int wB)
{
    __local float As[BLOCK_SIZE][BLOCK_SIZE];
    __local float Bs[BLOCK_SIZE][BLOCK_SIZE];
    int tx = get_local_id(0), ty = get_local_id(1);
    int col = get_group_id(0) * BLOCK_SIZE + tx;
    int row = get_group_id(1) * BLOCK_SIZE + ty;
    float sum = 0.0f;
    for (int t = 0; t < (wA + BLOCK_SIZE - 1) / BLOCK_SIZE; ++t) {
        int ka = t * BLOCK_SIZE + tx, kb = t * BLOCK_SIZE + ty;
        As[ty][tx] = (row < hA && ka < wA) ? A[row * wA + ka] : 0.0f;
        Bs[ty][tx] = (kb < wA && col < wB) ? B[kb * wB + col] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < BLOCK_SIZE; ++k)
            sum += As[ty][k] * Bs[k][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < hA && col < wB)
        C[row * wB + col] = sum;
}
