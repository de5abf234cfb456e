// Wendy W.

__kernel void matmul_naive(__global float* C, __global const float* A,
                           __global const float* B, int hA, int wA, int wB)
{
    int col = get_global_id(0);
    int row = get_global_id(1);
    if (row < hA && col < wB) {
        float sum = 0.0f;
        for (int k = 0; k < wA; ++k)
            sum += A[row * wA + k] * B[k * wB + col];
        C[row * wB + col] = sum;
    }
}

__kernel void matmul_tiled(__global float* C, __global const float* A,
                           __global const float* B, int hA, int wA, int wB)
{
    __local float As[BLOCK_SIZE][BLOCK_SIZE];
    __local float Bs[BLOCK_SIZE][BLOCK_SIZE];
    int tx = get_local_id(0), ty = get_local_id(1);
    int col = get_group_id(0) * BLOCK_SIZE + tx;
    int row = get_group_id(1) * BLOCK_SIZE + ty;
    float sum = 0.0f;
    for (int t = 0; t < wA; t += BLOCK_SIZE) {
        // a row of A and a column of B, the same way round
        As[ty][tx] = (row < hA && t + tx < wA) ? A[row * wA + t + tx] : 0.0f;
        Bs[ty][tx] = (t + ty < wA && col < wB) ? B[col * wA + t + ty] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < BLOCK_SIZE; ++k)
            sum += As[ty][k] * Bs[k][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < hA && col < wB)
        C[row * wB + col] = sum;
}
