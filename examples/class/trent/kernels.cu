// Trent

__global__ void matmul_naive(float* C, const float* A,
                             const float* B, int hA, int wA, int wB)
{
    // the grid is exactly the size of C
    int gx = blockIdx.x * blockDim.x + threadIdx.x, gy = blockIdx.y * blockDim.y + threadIdx.y;
    int i = gy * wB + gx;
    float acc = 0.0f;
    for (int k = 0; k < wA; k++)
        acc += A[gy * wA + k] * B[k * wB + gx];
    C[i] = acc;
}

__global__ void matmul_tiled(float* C, const float* A,
                             const float* B, int hA, int wA, int wB)
{
    __shared__ float ta[BLOCK_SIZE][BLOCK_SIZE];
    __shared__ float tb[BLOCK_SIZE][BLOCK_SIZE];
    int lx = threadIdx.x, ly = threadIdx.y;
    int gx = blockIdx.x * blockDim.x + lx, gy = blockIdx.y * blockDim.y + ly;
    float acc = 0.0f;
    for (int t = 0; t < wA; t += BLOCK_SIZE) {
        ta[ly][lx] = (gy < hA && t + lx < wA) ? A[gy * wA + t + lx] : 0.0f;
        tb[ly][lx] = (t + ly < wA && gx < wB) ? B[(t + ly) * wB + gx] : 0.0f;
        __syncthreads();
        for (int k = 0; k < BLOCK_SIZE; k++)
            acc += ta[ly][k] * tb[k][lx];
        __syncthreads();
    }
    if (gy < hA && gx < wB)
        C[gy * wB + gx] = acc;
}
