// DELIBERATELY BROKEN: no barrier between the tile loads and the inner product (the
// first barrier of a tiled kernel is missing). tests/test_verdicts.py checks that what
// it computes from tile elements not yet loaded is never called "unwritten".

__global__ void racy_tiled(float* C, const float* A,
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
        // (the barrier that belongs here is missing)
        for (int k = 0; k < BLOCK_SIZE; ++k)
            sum += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < hA && col < wB)
        C[row * wB + col] = sum;
}
