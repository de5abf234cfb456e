// A student's two kernels for the assignment, as they wrote them: their own names, their
// own argument order (C first, then A and B, then the sizes: hA rows of A, wA its
// columns, wB the columns of B), float only, and BLOCK_SIZE given at build time.
// family.toml beside this file tells xbackend how to bind and launch them.

__global__ void matmul_naive(float* C, const float* A,
                             const float* B, int hA, int wA, int wB)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= hA || col >= wB)
        return;
    float sum = 0.0f;
    for (int k = 0; k < wA; ++k)
        sum += A[row * wA + k] * B[k * wB + col];
    C[row * wB + col] = sum;
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
    for (int t = 0; t < (wA + BLOCK_SIZE - 1) / BLOCK_SIZE; ++t) {
        int ka = t * BLOCK_SIZE + tx, kb = t * BLOCK_SIZE + ty;
        As[ty][tx] = (row < hA && ka < wA) ? A[row * wA + ka] : 0.0f;
        Bs[ty][tx] = (kb < wA && col < wB) ? B[kb * wB + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < BLOCK_SIZE; ++k)
            sum += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < hA && col < wB)
        C[row * wB + col] = sum;
}
