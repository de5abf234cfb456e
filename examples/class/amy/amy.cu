// Amy: the block is BLOCK_SIZE x BLOCK_SIZE, so I told the compiler.

__global__ __launch_bounds__(BLOCK_SIZE * BLOCK_SIZE)
void amy_gemm_naive(const float *A, const float *B, float *C,
                    int M, int N, int K)
{
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N)
        return;
    const float *a = A + row * K;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k)
        sum += a[k] * B[k * N + col];
    C[row * N + col] = sum;
}

__global__ __launch_bounds__(BLOCK_SIZE * BLOCK_SIZE)
void amy_gemm_tiled(const float *A, const float *B, float *C,
                    int M, int N, int K)
{
    __shared__ float a[BLOCK_SIZE][BLOCK_SIZE];
    __shared__ float b[BLOCK_SIZE][BLOCK_SIZE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * blockDim.y + ty, col = blockIdx.x * blockDim.x + tx;
    float sum = 0.0f;
    for (int t = 0; t < K; t += BLOCK_SIZE) {
        a[ty][tx] = (row < M && t + tx < K) ? A[row * K + t + tx] : 0.0f;
        b[ty][tx] = (t + ty < K && col < N) ? B[(t + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < BLOCK_SIZE; ++k)
            sum += a[ty][k] * b[k][tx];
        __syncthreads();
    }
    if (row < M && col < N)
        C[row * N + col] = sum;
}
