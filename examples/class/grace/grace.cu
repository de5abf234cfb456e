/* v1: straightforward */
__global__ void gemm_v1(int M, int N, int K, const float *A,
                        const float *B, float *C)
{
    int i = blockIdx.y * blockDim.y + threadIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < M && j < N) {
        float s = 0.0f;
        for (int k = 0; k < K; ++k)
            s += A[i * K + k] * B[k * N + j];
        C[i * N + j] = s;
    }
}

/* v2: shared memory tiles, step through K one tile at a time until we reach K */
__global__ void gemm_v2(int M, int N, int K, const float *A,
                        const float *B, float *C)
{
    __shared__ float As[BLOCK_SIZE][BLOCK_SIZE], Bs[BLOCK_SIZE][BLOCK_SIZE];
    int ti = threadIdx.y, tj = threadIdx.x;
    int i = blockIdx.y * BLOCK_SIZE + ti, j = blockIdx.x * BLOCK_SIZE + tj;
    float s = 0.0f;
    for (size_t k0 = 0; k0 != K; k0 += BLOCK_SIZE) {
        As[ti][tj] = (i < M && k0 + tj < K) ? A[i * K + k0 + tj] : 0.0f;
        Bs[ti][tj] = (k0 + ti < K && j < N) ? B[(k0 + ti) * N + j] : 0.0f;
        __syncthreads();
        for (int k = 0; k < BLOCK_SIZE; ++k)
            s += As[ti][k] * Bs[k][tj];
        __syncthreads();
    }
    if (i < M && j < N)
        C[i * N + j] = s;
}
