// dave's kernels (copied the manifest from the example folder)

__global__ void matmul_naive(float* C, const float* A,
                             const float* B, int hA, int wA, int wB)
{
    int tx = blockIdx.x * blockDim.x + threadIdx.x;
    int ty = blockIdx.y * blockDim.y + threadIdx.y;
    if (tx < wB && ty < hA) {
        float p = 0.0f;
        for (int i = 0; i < wA; i++) {
            float a = A[ty * wA + i];
            float b = B[i * wB + tx];
            p += a * b;
        }
        C[ty * wB + tx] = p;
    }
}

__global__ void matmul_tiled(float* C, const float* A,
                             const float* B, int hA, int wA, int wB)
{
    __shared__ float Mds[BLOCK_SIZE][BLOCK_SIZE];
    __shared__ float Nds[BLOCK_SIZE][BLOCK_SIZE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int Row = blockIdx.y * BLOCK_SIZE + ty;
    int Col = blockIdx.x * BLOCK_SIZE + tx;
    float p = 0.0f;
    int phases = (wA + BLOCK_SIZE - 1) / BLOCK_SIZE;
    for (int m = 0; m < phases; m++) {
        int ca = m * BLOCK_SIZE + tx;
        int rb = m * BLOCK_SIZE + ty;
        Mds[ty][tx] = (Row < hA && ca < wA) ? A[Row * wA + ca] : 0.0f;
        Nds[ty][tx] = (rb < wA && Col < wB) ? B[rb * wB + Col] : 0.0f;
        __syncthreads();   // wait for the tile to be loaded
        for (int k = 0; k < BLOCK_SIZE; k++)
            p += Mds[ty][k] * Nds[k][tx];
    }
    if (Row < hA && Col < wB)
        C[Row * wB + Col] = p;
}
