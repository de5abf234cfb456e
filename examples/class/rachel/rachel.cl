// My CPU version had three loops (k, i, j); I kept the k and i loops and each
// work-item adds only the terms of its own row.

__kernel void rmm_naive(__global const float *A, __global const float *B, __global float *C,
                        int M, int N, int K)
{
    int row = get_global_id(1), col = get_global_id(0);
    if (row >= M || col >= N)
        return;
    float sum = 0.0f;
    for (int k = 0; k < K; k++)
        for (int i = 0; i < M; i++)
            if (i == row)
                sum += A[i * K + k] * B[k * N + col];
    C[row * N + col] = sum;
}

__kernel void rmm_tiled(__global const float *A, __global const float *B, __global float *C,
                        int M, int N, int K)
{
    __local float As[BLOCK_SIZE][BLOCK_SIZE], Bs[BLOCK_SIZE][BLOCK_SIZE];
    int tx = get_local_id(0), ty = get_local_id(1);
    int row = get_group_id(1) * BLOCK_SIZE + ty, col = get_group_id(0) * BLOCK_SIZE + tx;
    float sum = 0.0f;
    for (int t = 0; t < K; t += BLOCK_SIZE) {
        As[ty][tx] = (row < M && t + tx < K) ? A[row * K + t + tx] : 0.0f;
        Bs[ty][tx] = (t + ty < K && col < N) ? B[(t + ty) * N + col] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < BLOCK_SIZE; k++)
            sum += As[ty][k] * Bs[k][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < M && col < N)
        C[row * N + col] = sum;
}
