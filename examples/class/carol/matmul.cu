/* Carol - assignment 3 */

__global__ void matmul_naive(float* C, const float* A,
                             const float* B, int hA, int wA, int wB)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int idx = row * wB + col;

    if (row < hA && col < wB) {
        float value = 0;
        for (int e = 0; e < wA; ++e)
            value += A[row * wA + e] * B[e * wB + col];
        C[idx] = value;
    }
}

__global__ void matmul_tiled(float* C, const float* A,
                             const float* B, int hA, int wA, int wB)
{
    __shared__ float Asub[BLOCK_SIZE][BLOCK_SIZE];
    __shared__ float Bsub[BLOCK_SIZE][BLOCK_SIZE];

    int bx = blockIdx.x, by = blockIdx.y;
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = by * BLOCK_SIZE + ty;
    int col = bx * BLOCK_SIZE + tx;
    float value = 0;

    /* phases over the shared dimension, the last one partly full */
    for (int ph = 0; ph < (wA - 1) / BLOCK_SIZE + 1; ++ph) {
        if (row < hA && ph * BLOCK_SIZE + tx < wA)
            Asub[ty][tx] = A[row * wA + ph * BLOCK_SIZE + tx];
        else
            Asub[ty][tx] = 0;
        if (col < wB && ph * BLOCK_SIZE + ty < wA)
            Bsub[ty][tx] = B[(ph * BLOCK_SIZE + ty) * wB + col];
        else
            Bsub[ty][tx] = 0;
        __syncthreads();

        for (int e = 0; e < BLOCK_SIZE; ++e)
            value += Asub[ty][e] * Bsub[e][tx];
        __syncthreads();
    }
    if (row < hA && col < wB)
        C[row * wB + col] = value;
}
