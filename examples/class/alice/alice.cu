// Alice: C = A * B, A is M x K, B is K x N, all row-major.

__global__ void naive_mm(const float *A, const float *B,
                         float *C, int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; k++)
            acc += A[row * K + k] * B[k * N + col];
        C[row * N + col] = acc;
    }
}

__global__ void tiled_mm(const float *A, const float *B,
                         float *C, int M, int N, int K)
{
    __shared__ float sA[BLOCK_SIZE][BLOCK_SIZE];
    __shared__ float sB[BLOCK_SIZE][BLOCK_SIZE];
    int lx = threadIdx.x, ly = threadIdx.y;
    int row = blockIdx.y * blockDim.y + ly, col = blockIdx.x * blockDim.x + lx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BLOCK_SIZE) {
        // load one tile of each, zeros past the edges
        sA[ly][lx] = (row < M && k0 + lx < K) ? A[row * K + k0 + lx] : 0.0f;
        sB[ly][lx] = (k0 + ly < K && col < N) ? B[(k0 + ly) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < BLOCK_SIZE; k++)
            acc += sA[ly][k] * sB[k][lx];
        __syncthreads();
    }
    if (row < M && col < N)
        C[row * N + col] = acc;
}
