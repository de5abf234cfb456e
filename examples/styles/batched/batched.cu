// A batch of products: C[b] = A[b]·B[b] for b = 0 .. batch-1, each A[b] M×K, B[b] K×N,
// C[b] M×N, row-major. Product b starts strideA (strideB, strideC) elements after
// product b-1: element (b, i, j) of C is C[b * strideC + i * N + j].

// The grid covers one M×N product; each thread computes its (row, col) of every product.
__global__ void bmm_loop_naive(const int batch, const int M, const int N, const int K,
                               const float* A, const int strideA,
                               const float* B, const int strideB,
                               float* C, const int strideC)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N)
        return;
    for (int b = 0; b < batch; ++b) {
        const float* Ab = A + b * strideA;     // product b's operands
        const float* Bb = B + b * strideB;
        float acc = 0.0f;
        for (int k = 0; k < K; ++k)
            acc += Ab[row * K + k] * Bb[k * N + col];
        C[b * strideC + row * N + col] = acc;
    }
}

// One product's TS×TS square of C through shared memory, for the block at (row, col).
// Every thread of the block must call it (it has barriers), inside C or not.
__device__ float tile_product(const float* Ab, const float* Bb, int M, int N, int K,
                              int row, int col, float (*As)[TS], float (*Bs)[TS])
{
    int tx = threadIdx.x, ty = threadIdx.y;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TS) {
        As[ty][tx] = (row < M && k0 + tx < K) ? Ab[row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? Bb[(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TS; ++k)
            acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    return acc;
}

// The batch in a loop: the block computes its square of C[0], then of C[1], ...
__global__ void bmm_loop_tiled(const int batch, const int M, const int N, const int K,
                               const float* A, const int strideA,
                               const float* B, const int strideB,
                               float* C, const int strideC)
{
    __shared__ float As[TS][TS];
    __shared__ float Bs[TS][TS];
    int row = blockIdx.y * TS + threadIdx.y;
    int col = blockIdx.x * TS + threadIdx.x;
    for (int b = 0; b < batch; ++b) {
        float acc = tile_product(A + b * strideA, B + b * strideB, M, N, K, row, col, As, Bs);
        if (row < M && col < N)
            C[b * strideC + row * N + col] = acc;
    }
}

// The batch on the grid: z index b computes product b only.
__global__ void bmm_z_tiled(const int batch, const int M, const int N, const int K,
                            const float* A, const int strideA,
                            const float* B, const int strideB,
                            float* C, const int strideC)
{
    __shared__ float As[TS][TS];
    __shared__ float Bs[TS][TS];
    int b = blockIdx.z;
    if (b >= batch)                            // the whole block leaves together
        return;
    int row = blockIdx.y * TS + threadIdx.y;
    int col = blockIdx.x * TS + threadIdx.x;
    float acc = tile_product(A + b * strideA, B + b * strideB, M, N, K, row, col, As, Bs);
    if (row < M && col < N)
        C[b * strideC + row * N + col] = acc;
}
