// Nina: naive and tiled. Tested on my laptop's OpenCL.

__global__ void matmul_naive(float* C, const float* A,
                             const float* B, int hA, int wA, int wB)
{
    const int gx = blockIdx.x * blockDim.x + threadIdx.x;
    const int gy = blockIdx.y * blockDim.y + threadIdx.y;
    if (gy < hA && gx < wB) {
        float r = 0.0f;
        for (int k = 0; k < wA; k++) r += A[gy * wA + k] * B[k * wB + gx];
        C[gy * wB + gx] = r;
    }
}

__global__ void matmul_tiled(float* C, const float* A,
                             const float* B, int hA, int wA, int wB)
{
    __shared__ float sA[BLOCK_SIZE * BLOCK_SIZE];
    __shared__ float sB[BLOCK_SIZE * BLOCK_SIZE];
    const int lx = threadIdx.x, ly = threadIdx.y;
    const int gx = blockIdx.x * BLOCK_SIZE + lx;
    const int gy = blockIdx.y * BLOCK_SIZE + ly;
    float r = 0.0f;
    for (int k0 = 0; k0 < wA; k0 += BLOCK_SIZE) {
        sA[ly * BLOCK_SIZE + lx] = (gy < hA && k0 + lx < wA) ? A[gy * wA + k0 + lx] : 0.0f;
        sB[ly * BLOCK_SIZE + lx] = (k0 + ly < wA && gx < wB) ? B[(k0 + ly) * wB + gx] : 0.0f;
        __syncthreads()
        for (int k = 0; k < BLOCK_SIZE; k++) r += sA[ly * BLOCK_SIZE + k] * sB[k * BLOCK_SIZE + lx];
        __syncthreads();
    }
    if (gy < hA && gx < wB) C[gy * wB + gx] = r;
}
