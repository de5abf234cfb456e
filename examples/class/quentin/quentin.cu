// Q. -- my groups are 32 rows tall (I tuned that on my GPU)

__global__ void qmm(const float *A, const float *B, float *C,
                    int M, int N, int K)
{
    int col = blockIdx.x * BLOCK_SIZE + threadIdx.x;
    int row = blockIdx.y * 32 + threadIdx.y;
    if (row < M && col < N) {
        float s = 0;
        for (int k = 0; k < K; k++)
            s += A[row * K + k] * B[k * N + col];
        C[row * N + col] = s;
    }
}

__global__ void qmm_tiled(const float *A, const float *B, float *C,
                          int M, int N, int K)
{
    __shared__ float a[BLOCK_SIZE][BLOCK_SIZE], b[BLOCK_SIZE][BLOCK_SIZE];
    int x = threadIdx.x, y = threadIdx.y;
    int col = blockIdx.x * BLOCK_SIZE + x;
    int row = blockIdx.y * BLOCK_SIZE + y;
    float s = 0;
    for (int k0 = 0; k0 < K; k0 += BLOCK_SIZE) {
        a[y][x] = (row < M && k0 + x < K) ? A[row * K + k0 + x] : 0;
        b[y][x] = (k0 + y < K && col < N) ? B[(k0 + y) * N + col] : 0;
        __syncthreads();
        for (int k = 0; k < BLOCK_SIZE; k++)
            s += a[y][k] * b[k][x];
        __syncthreads();
    }
    if (row < M && col < N)
        C[row * N + col] = s;
}
