// My CPU version had three loops (k, i, j); I kept the k and i loops and each
// thread adds only the terms of its own row.

__global__ void rmm_naive(const float *A, const float *B, float *C,
                          int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N)
        return;
    float sum = 0.0f;
    for (int k = 0; k < K; k++)
        for (int i = 0; i < M; i++)
            if (i == row)
                sum += A[i * K + k] * B[k * N + col];
    C[row * N + col] = sum;
}

__global__ void rmm_tiled(const float *A, const float *B, float *C,
                          int M, int N, int K)
{
    __shared__ float As[BLOCK_SIZE][BLOCK_SIZE], Bs[BLOCK_SIZE][BLOCK_SIZE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * BLOCK_SIZE + ty, col = blockIdx.x * BLOCK_SIZE + tx;
    float sum = 0.0f;
    for (int t = 0; t < K; t += BLOCK_SIZE) {
        As[ty][tx] = (row < M && t + tx < K) ? A[row * K + t + tx] : 0.0f;
        Bs[ty][tx] = (t + ty < K && col < N) ? B[(t + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < BLOCK_SIZE; k++)
            sum += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N)
        C[row * N + col] = sum;
}
