// dave's kernels (copied the manifest from the example folder)

__kernel void matmul_naive(__global float* C, __global const float* A,
                           __global const float* B, int hA, int wA, int wB)
{
    int tx = get_global_id(0);
    int ty = get_global_id(1);
    if (tx < wB && ty < hA) {
        float p = 0.0f;
        for (int i = 0; i < wA; i++) {
            float a = A[ty * wA + i];
            float b = B[i * wB + tx];
            p += a * b;
        }
        C[ty * wB + tx] = p;
    }
}

__kernel void matmul_tiled(__global float* C, __global const float* A,
                           __global const float* B, int hA, int wA, int wB)
{
    __local float Mds[BLOCK_SIZE][BLOCK_SIZE];
    __local float Nds[BLOCK_SIZE][BLOCK_SIZE];
    int tx = get_local_id(0), ty = get_local_id(1);
    int Row = get_group_id(1) * BLOCK_SIZE + ty;
    int Col = get_group_id(0) * BLOCK_SIZE + tx;
    float p = 0.0f;
    int phases = (wA + BLOCK_SIZE - 1) / BLOCK_SIZE;
    for (int m = 0; m < phases; m++) {
        int ca = m * BLOCK_SIZE + tx;
        int rb = m * BLOCK_SIZE + ty;
        Mds[ty][tx] = (Row < hA && ca < wA) ? A[Row * wA + ca] : 0.0f;
        Nds[ty][tx] = (rb < wA && Col < wB) ? B[rb * wB + Col] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);   // wait for the tile to be loaded
        for (int k = 0; k < BLOCK_SIZE; k++)
            p += Mds[ty][k] * Nds[k][tx];
    }
    if (Row < hA && Col < wB)
        C[Row * wB + Col] = p;
}
