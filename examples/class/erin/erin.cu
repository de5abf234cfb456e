// Erin H. -- matrix multiply, naive and shared-memory versions

__global__ void mmNaive(const float *A, const float *B, float *C,
                        int rowsA, int colsA, int colsB)
{
    int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rowsA || c >= colsB)
        return;
    float total = 0.0f;
    for (int i = 0; i < colsA; i++)
        total += A[r * colsA + i] * B[i * colsB + c];
    C[r * colsB + c] = total;
}

__global__ void mmTiled(const float *A, const float *B, float *C,
                        int rowsA, int colsA, int colsB)
{
    __shared__ float tileA[BLOCK_SIZE][BLOCK_SIZE];
    __shared__ float tileB[BLOCK_SIZE][BLOCK_SIZE];
    int lr = threadIdx.y, lc = threadIdx.x;
    int r = blockIdx.y * BLOCK_SIZE + lr;
    int c = blockIdx.x * BLOCK_SIZE + lc;
    int numTiles = colsA / BLOCK_SIZE;
    float total = 0.0f;
    for (int t = 0; t < numTiles; t++) {
        tileA[lr][lc] = (r < rowsA) ? A[r * colsA + t * BLOCK_SIZE + lc] : 0.0f;
        tileB[lr][lc] = (c < colsB) ? B[(t * BLOCK_SIZE + lr) * colsB + c] : 0.0f;
        __syncthreads();
        for (int i = 0; i < BLOCK_SIZE; i++)
            total += tileA[lr][i] * tileB[i][lc];
        __syncthreads();
    }
    if (r < rowsA && c < colsB)
        C[r * colsB + c] = total;
}
