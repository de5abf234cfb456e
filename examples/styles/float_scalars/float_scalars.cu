// SGEMM's contract: C = alpha·(A·B) + beta·C (A M×K, B K×N, C M×N, row-major).
// As in BLAS, beta == 0 means "C is output only": it is then never read, so whatever
// C held before (even NaN) cannot leak into the result (0 · NaN would be NaN).

__device__ float scale_and_add(float alpha, float ab, float beta, const float* c)
{
    return beta == 0.0f ? alpha * ab : alpha * ab + beta * (*c);
}

__global__ void sgemm_naive(int M, int N, int K, float alpha, const float* A,
                            const float* B, float beta, float* C)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N)
        return;
    float ab = 0.0f;
    for (int k = 0; k < K; ++k)
        ab += A[row * K + k] * B[k * N + col];
    float* c = C + row * N + col;
    *c = scale_and_add(alpha, ab, beta, c);
}

__global__ void sgemm_tiled(int M, int N, int K, float alpha, const float* A,
                            const float* B, float beta, float* C)
{
    __shared__ float As[TS][TS];
    __shared__ float Bs[TS][TS];

    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TS + ty;
    int col = blockIdx.x * TS + tx;

    float ab = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TS) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TS; ++k)
            ab += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) {
        float* c = C + row * N + col;
        *c = scale_and_add(alpha, ab, beta, c);
    }
}
