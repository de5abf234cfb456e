// A course's two CUDA kernels for C = A·B (A is m×k, B is k×n, C is m×n, all row-major).
// The launch gives one thread per element of C: x runs along the columns, y down the rows.

// Step 1: every thread walks one row of A and one column of B in global memory.
__global__ void matmul_global(int m, int n, int k, const float* A, const float* B, float* C)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < m && col < n) {                  // the grid may overhang C: skip those threads
        float dot = 0.0f;
        for (int i = 0; i < k; ++i)
            dot += A[row * k + i] * B[i * n + col];
        C[row * n + col] = dot;
    }
}

// Step 2: the block first copies a TILE_WIDTH×TILE_WIDTH square of A and one of B into
// shared memory, then every thread reads them from there TILE_WIDTH times. Squares that
// hang over an edge of A or B are padded with zeros, so the sum is unchanged.
__global__ void matmul_shared(int m, int n, int k, const float* A, const float* B, float* C)
{
    __shared__ float tileA[TILE_WIDTH][TILE_WIDTH];
    __shared__ float tileB[TILE_WIDTH][TILE_WIDTH];

    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE_WIDTH + ty;
    int col = blockIdx.x * TILE_WIDTH + tx;
    int phases = (k + TILE_WIDTH - 1) / TILE_WIDTH;   // squares along k, the last maybe partial

    float dot = 0.0f;
    for (int p = 0; p < phases; ++p) {
        int aCol = p * TILE_WIDTH + tx;                // which column of A this thread copies
        int bRow = p * TILE_WIDTH + ty;                // which row of B this thread copies
        tileA[ty][tx] = (row < m && aCol < k) ? A[row * k + aCol] : 0.0f;
        tileB[ty][tx] = (bRow < k && col < n) ? B[bRow * n + col] : 0.0f;
        __syncthreads();                               // both squares complete

        for (int i = 0; i < TILE_WIDTH; ++i)
            dot += tileA[ty][i] * tileB[i][tx];
        __syncthreads();                               // done reading before the next copy
    }
    // Every thread took part in the copies and barriers; only those inside C write.
    if (row < m && col < n)
        C[row * n + col] = dot;
}
