// Yvonne -- lab 4

__kernel void mm_basic(__global float* C, __global const float* A,
                       __global const float* B, int hA, int wA, int wB)
{
    int r = get_global_id(1), c = get_global_id(0);
    if (r < hA && c < wB) {
        float v = 0.0f;
        for (int i = 0; i < wA; i++)
            v += A[r * wA + i] * B[i * wB + c];
        C[r * wB + c] = v;
    }
}

__kernel void mm_shared(__global float* C, __global const float* A,
                        __global const float* B, int hA, int wA, int wB)
{
    __local float sA[BLOCK_SIZE][BLOCK_SIZE], sB[BLOCK_SIZE][BLOCK_SIZE];
    int tx = get_local_id(0), ty = get_local_id(1);
    int r = get_group_id(1) * BLOCK_SIZE + ty, c = get_group_id(0) * BLOCK_SIZE + tx;
    float v = 0.0f;
    for (int t = 0; t < (wA + BLOCK_SIZE - 1) / BLOCK_SIZE; t++) {
        int ka = t * BLOCK_SIZE + tx, kb = t * BLOCK_SIZE + ty;
        sA[ty][tx] = (r < hA && ka < wA) ? A[r * wA + ka] : 0.0f;
        sB[ty][tx] = (kb < wA && c < wB) ? B[kb * wB + c] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int i = 0; i < BLOCK_SIZE; i++)
            v += sA[ty][i] * sB[i][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (r < hA && c < wB)
        C[r * wB + c] += v;   // add this block's result into C
}
