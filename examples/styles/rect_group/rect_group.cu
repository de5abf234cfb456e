// C = A·B (A M×K, B K×N, C M×N, row-major) with rectangular blocks: BX threads along the
// columns of C by BY along its rows (BX = 32, BY = 4 by default: a warp per row of C).

__global__ void rect_naive(int M, int N, int K, const float* A, const float* B, float* C)
{
    int col = blockIdx.x * BX + threadIdx.x;
    int row = blockIdx.y * BY + threadIdx.y;
    if (row >= M || col >= N)
        return;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k)
        sum += A[row * K + k] * B[k * N + col];
    C[row * N + col] = sum;
}

// The block's BY×BX piece of C needs BY rows of A and BX columns of B. It walks K in
// slabs BX deep: a BY×BX slab of A (one element per thread) and a BX×BX slab of B (BX/BY
// rows per thread, rounded up: a thread copies rows ty, ty + BY, ty + 2·BY, ...).
__global__ void rect_tiled(int M, int N, int K, const float* A, const float* B, float* C)
{
    __shared__ float As[BY][BX];
    __shared__ float Bs[BX][BX];

    int tx = threadIdx.x, ty = threadIdx.y;
    int col = blockIdx.x * BX + tx;
    int row = blockIdx.y * BY + ty;

    float sum = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BX) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
        for (int r = ty; r < BX; r += BY)
            Bs[r][tx] = (k0 + r < K && col < N) ? B[(k0 + r) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < BX; ++k)
            sum += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N)
        C[row * N + col] = sum;
}
