// accumulate straight into C, no temporary needed
__global__ void mm_direct(float *C, const float *A, const float *B,
                          int M, int N, int K)
{
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N)
        for (int k = 0; k < K; k++)
            C[row * N + col] += A[row * K + k] * B[k * N + col];
}

__global__ void mm_blocked(float *C, const float *A, const float *B,
                           int M, int N, int K)
{
    __shared__ float a[TILE][TILE], b[TILE][TILE];
    int tr = threadIdx.y, tc = threadIdx.x;
    int row = blockIdx.y * TILE + tr, col = blockIdx.x * TILE + tc;
    float s = 0.0f;
    for (int kt = 0; kt < (K + TILE - 1) / TILE; kt++) {
        int ka = kt * TILE + tc, kb = kt * TILE + tr;
        a[tr][tc] = (row < M && ka < K) ? A[row * K + ka] : 0.0f;
        b[tr][tc] = (kb < K && col < N) ? B[kb * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; k++)
            s += a[tr][k] * b[k][tc];
        __syncthreads();
    }
    if (row < M && col < N)
        C[row * N + col] = s;
}
