/* v1: straightforward */
__kernel void gemm_v1(int M, int N, int K, __global const float *A,
                      __global const float *B, __global float *C)
{
    int i = get_global_id(1), j = get_global_id(0);
    if (i < M && j < N) {
        float s = 0.0f;
        for (int k = 0; k < K; ++k)
            s += A[i * K + k] * B[k * N + j];
        C[i * N + j] = s;
    }
}

/* v2: local memory tiles, step through K one tile at a time until we reach K */
__kernel void gemm_v2(int M, int N, int K, __global const float *A,
                      __global const float *B, __global float *C)
{
    __local float As[BLOCK_SIZE][BLOCK_SIZE], Bs[BLOCK_SIZE][BLOCK_SIZE];
    int ti = get_local_id(1), tj = get_local_id(0);
    int i = get_group_id(1) * BLOCK_SIZE + ti, j = get_group_id(0) * BLOCK_SIZE + tj;
    float s = 0.0f;
    for (size_t k0 = 0; k0 != K; k0 += BLOCK_SIZE) {
        As[ti][tj] = (i < M && k0 + tj < K) ? A[i * K + k0 + tj] : 0.0f;
        Bs[ti][tj] = (k0 + ti < K && j < N) ? B[(k0 + ti) * N + j] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < BLOCK_SIZE; ++k)
            s += As[ti][k] * Bs[k][tj];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (i < M && j < N)
        C[i * N + j] = s;
}
