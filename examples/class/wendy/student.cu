// Wendy W.

__global__ void matmul_naive(float* C, const float* A,
                             const float* B, int hA, int wA, int wB)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < hA && col < wB) {
        float sum = 0.0f;
        for (int k = 0; k < wA; ++k)
            sum += A[row * wA + k] * B[k * wB + col];
        C[row * wB + col] = sum;
    }
}

__global__ void matmul_tiled(float* C, const float* A,
                             const float* B, int hA, int wA, int wB)
{
    __shared__ float As[BLOCK_SIZE][BLOCK_SIZE];
    __shared__ float Bs[BLOCK_SIZE][BLOCK_SIZE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int col = blockIdx.x * BLOCK_SIZE + tx;
    int row = blockIdx.y * BLOCK_SIZE + ty;
    float sum = 0.0f;
    for (int t = 0; t < wA; t += BLOCK_SIZE) {
        // a row of A and a column of B, the same way round
        As[ty][tx] = (row < hA && t + tx < wA) ? A[row * wA + t + tx] : 0.0f;
        Bs[ty][tx] = (t + ty < wA && col < wB) ? B[col * wA + t + ty] : 0.0f;
        __syncthreads();
        for (int k = 0; k < BLOCK_SIZE; ++k)
            sum += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < hA && col < wB)
        C[row * wB + col] = sum;
}
