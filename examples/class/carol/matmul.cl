/* Carol - assignment 3 */

__kernel void matmul_naive(__global float* C, __global const float* A,
                           __global const float* B, int hA, int wA, int wB)
{
    int row = get_global_id(1);
    int col = get_global_id(0);
    int idx = row * wB + col;

    if (row < hA && col < wB) {
        float value = 0;
        for (int e = 0; e < wA; ++e)
            value += A[row * wA + e] * B[e * wB + col];
        C[idx] = value;
    }
}

__kernel void matmul_tiled(__global float* C, __global const float* A,
                           __global const float* B, int hA, int wA, int wB)
{
    __local float Asub[BLOCK_SIZE][BLOCK_SIZE];
    __local float Bsub[BLOCK_SIZE][BLOCK_SIZE];

    int bx = get_group_id(0), by = get_group_id(1);
    int tx = get_local_id(0), ty = get_local_id(1);
    int row = by * BLOCK_SIZE + ty;
    int col = bx * BLOCK_SIZE + tx;
    float value = 0;

    /* phases over the shared dimension, the last one partly full */
    for (int ph = 0; ph < (wA - 1) / BLOCK_SIZE + 1; ++ph) {
        if (row < hA && ph * BLOCK_SIZE + tx < wA)
            Asub[ty][tx] = A[row * wA + ph * BLOCK_SIZE + tx];
        else
            Asub[ty][tx] = 0;
        if (col < wB && ph * BLOCK_SIZE + ty < wA)
            Bsub[ty][tx] = B[(ph * BLOCK_SIZE + ty) * wB + col];
        else
            Bsub[ty][tx] = 0;
        barrier(CLK_LOCAL_MEM_FENCE);

        for (int e = 0; e < BLOCK_SIZE; ++e)
            value += Asub[ty][e] * Bsub[e][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < hA && col < wB)
        C[row * wB + col] = value;
}
