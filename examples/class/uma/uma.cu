// dimension x = row of C, dimension y = column of C (like (i, j) in maths)

__global__ void uma_mm(const float *A, const float *B, float *C,
                       int M, int N, int K)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < M && j < N) {
        float cij = 0.0f;
        for (int k = 0; k < K; k++)
            cij += A[i * K + k] * B[k * N + j];
        C[i * N + j] = cij;
    }
}

__global__ void uma_mm_tiled(const float *A, const float *B, float *C,
                             int M, int N, int K)
{
    __shared__ float At[BLOCK_SIZE][BLOCK_SIZE];
    __shared__ float Bt[BLOCK_SIZE][BLOCK_SIZE];
    int li = threadIdx.x, lj = threadIdx.y;
    int i = blockIdx.x * BLOCK_SIZE + li;
    int j = blockIdx.y * BLOCK_SIZE + lj;
    float cij = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BLOCK_SIZE) {
        At[li][lj] = (i < M && k0 + lj < K) ? A[i * K + k0 + lj] : 0.0f;
        Bt[li][lj] = (k0 + li < K && j < N) ? B[(k0 + li) * N + j] : 0.0f;
        __syncthreads();
        for (int k = 0; k < BLOCK_SIZE; k++)
            cij += At[li][k] * Bt[k][lj];
        __syncthreads();
    }
    if (i < M && j < N)
        C[i * N + j] = cij;
}
