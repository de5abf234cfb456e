// Oscar -- written in CUDA first, then translated by hand

__global__ void oscar_naive(const float *A, const float *B, float *C,
                            int Arows, int Acols, int Bcols)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < Arows && col < Bcols) {
        float sum = 0.0f;
        for (int i = 0; i < Acols; i++)
            sum += A[row * Acols + i] * B[i * Bcols + col];
        C[row * Bcols + col] = sum;
    }
}

__global__ void oscar_tiled(const float *A, const float *B, float *C,
                            int Arows, int Acols, int Bcols)
{
    __shared__ float As[BLOCK_SIZE][BLOCK_SIZE];
    __shared__ float Bs[BLOCK_SIZE][BLOCK_SIZE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * BLOCK_SIZE + ty;
    int col = blockIdx.x * BLOCK_SIZE + tx;
    float sum = 0.0f;
    for (int t = 0; t < (Acols + BLOCK_SIZE - 1) / BLOCK_SIZE; t++) {
        As[ty][tx] = (row < Arows && t * BLOCK_SIZE + tx < Acols) ? A[row * Acols + t * BLOCK_SIZE + tx] : 0.0f;
        Bs[ty][tx] = (t * BLOCK_SIZE + ty < Acols && col < Bcols) ? B[(t * BLOCK_SIZE + ty) * Bcols + col] : 0.0f;
        __syncthreads();
        for (int i = 0; i < BLOCK_SIZE; i++)
            sum += As[ty][i] * Bs[i][tx];
        __syncthreads();
    }
    if (row < Arows && col < Bcols)
        C[row * Bcols + col] = sum;
}
