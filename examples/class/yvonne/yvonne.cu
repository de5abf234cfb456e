// Yvonne -- lab 4

__global__ void mm_basic(float* C, const float* A,
                         const float* B, int hA, int wA, int wB)
{
    int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < hA && c < wB) {
        float v = 0.0f;
        for (int i = 0; i < wA; i++)
            v += A[r * wA + i] * B[i * wB + c];
        C[r * wB + c] = v;
    }
}

__global__ void mm_shared(float* C, const float* A,
                          const float* B, int hA, int wA, int wB)
{
    __shared__ float sA[BLOCK_SIZE][BLOCK_SIZE], sB[BLOCK_SIZE][BLOCK_SIZE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int r = blockIdx.y * BLOCK_SIZE + ty, c = blockIdx.x * BLOCK_SIZE + tx;
    float v = 0.0f;
    for (int t = 0; t < (wA + BLOCK_SIZE - 1) / BLOCK_SIZE; t++) {
        int ka = t * BLOCK_SIZE + tx, kb = t * BLOCK_SIZE + ty;
        sA[ty][tx] = (r < hA && ka < wA) ? A[r * wA + ka] : 0.0f;
        sB[ty][tx] = (kb < wA && c < wB) ? B[kb * wB + c] : 0.0f;
        __syncthreads();
        for (int i = 0; i < BLOCK_SIZE; i++)
            v += sA[ty][i] * sB[i][tx];
        __syncthreads();
    }
    if (r < hA && c < wB)
        C[r * wB + c] += v;   // add this block's result into C
}
