// Oscar -- written in CUDA first, then translated by hand

__kernel void oscar_naive(__global const float *A, __global const float *B, __global float *C,
                          int Arows, int Acols, int Bcols)
{
    int row = get_group_id(1) * get_local_size(1) + get_local_id(1);
    int col = get_group_id(0) * get_local_size(0) + get_local_id(0);
    if (row < Arows && col < Bcols) {
        float sum = 0.0f;
        for (int i = 0; i < Acols; i++)
            sum += A[row * Acols + i] * B[i * Bcols + col]);
        C[row * Bcols + col] = sum;
    }
}

__kernel void oscar_tiled(__global const float *A, __global const float *B, __global float *C,
                          int Arows, int Acols, int Bcols)
{
    __local float As[BLOCK_SIZE][BLOCK_SIZE];
    __local float Bs[BLOCK_SIZE][BLOCK_SIZE];
    int tx = get_local_id(0), ty = get_local_id(1);
    int row = get_group_id(1) * BLOCK_SIZE + ty;
    int col = get_group_id(0) * BLOCK_SIZE + tx;
    float sum = 0.0f;
    for (int t = 0; t < (Acols + BLOCK_SIZE - 1) / BLOCK_SIZE; t++) {
        As[ty][tx] = (row < Arows && t * BLOCK_SIZE + tx < Acols) ? A[row * Acols + t * BLOCK_SIZE + tx] : 0.0f;
        Bs[ty][tx] = (t * BLOCK_SIZE + ty < Acols && col < Bcols) ? B[(t * BLOCK_SIZE + ty) * Bcols + col] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int i = 0; i < BLOCK_SIZE; i++)
            sum += As[ty][i] * Bs[i][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < Arows && col < Bcols)
        C[row * Bcols + col] = sum;
}
