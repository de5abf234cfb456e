// C = A·B with 64-bit sizes: every index is a size_t, so offsets past 2^31 are safe.
// A is M×K, B is K×N, C is M×N, row-major. The OpenCL twin (size_t.cl) says ulong.

__global__ void mm64_naive(const float* A, const float* B, float* C,
                           size_t M, size_t N, size_t K)
{
    // Widen before multiplying: blockIdx.y * blockDim.y alone is 32-bit.
    size_t row = (size_t)blockIdx.y * blockDim.y + threadIdx.y;
    size_t col = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N)
        return;
    float acc = 0.0f;
    for (size_t k = 0; k < K; ++k)
        acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
}

__global__ void mm64_tiled(const float* A, const float* B, float* C,
                           size_t M, size_t N, size_t K)
{
    __shared__ float As[TS][TS];
    __shared__ float Bs[TS][TS];

    size_t tx = threadIdx.x, ty = threadIdx.y;
    size_t row = (size_t)blockIdx.y * TS + ty;
    size_t col = (size_t)blockIdx.x * TS + tx;

    float acc = 0.0f;
    for (size_t k0 = 0; k0 < K; k0 += TS) {
        // Each thread stages one element of each tile (zero past an edge).
        As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TS; ++k)
            acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N)
        C[row * N + col] = acc;
}
