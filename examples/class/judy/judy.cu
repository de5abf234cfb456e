__global__ void mmGlobal(const float* __restrict__ A, const float* __restrict__ B,
                         float* __restrict__ C, int M, int N, int K)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < M && c < N) {
        float sum = 0.f;
#pragma unroll 4
        for (int k = 0; k < K; ++k)
            sum += A[r * K + k] * B[k * N + c];
        C[r * N + c] = sum;
    }
}

__global__ void mmShared(const float* __restrict__ A, const float* __restrict__ B,
                         float* __restrict__ C, int M, int N, int K)
{
    __shared__ float sa[TILE_DIM][TILE_DIM];
    __shared__ float sb[TILE_DIM][TILE_DIM];
    const int c = blockIdx.x * TILE_DIM + threadIdx.x;
    const int r = blockIdx.y * TILE_DIM + threadIdx.y;
    float sum = 0.f;
    for (int k0 = 0; k0 < K; k0 += TILE_DIM) {
        const int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
        sa[threadIdx.y][threadIdx.x] = (r < M && ka < K) ? A[r * K + ka] : 0.f;
        sb[threadIdx.y][threadIdx.x] = (kb < K && c < N) ? B[kb * N + c] : 0.f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE_DIM; ++k)
            sum += sa[threadIdx.y][k] * sb[k][threadIdx.x];
        __syncthreads();
    }
    if (r < M && c < N)
        C[r * N + c] = sum;
}
