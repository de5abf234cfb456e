// +1 column of padding: no bank conflicts when reading a column of bT
__global__ void sgemm_tile(const int mA, const int nB, const int kA,
                           const float *__restrict__ A,
                           const float *__restrict__ B,
                           float *__restrict__ C)
{
    __shared__ float aT[TW][TW + 1];
    __shared__ float bT[TW][TW + 1];
    const int x = threadIdx.x, y = threadIdx.y;
    const int gr = blockIdx.y * TW + y;
    const int gc = blockIdx.x * TW + x;
    float r = 0.0f;
    for (int kk = 0; kk < kA; kk += TW) {
        aT[y][x] = (gr < mA && kk + x < kA) ? A[gr * kA + kk + x] : 0.0f;
        bT[y][x] = (kk + y < kA && gc < nB) ? B[(kk + y) * nB + gc] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int q = 0; q < TW; ++q)
            r += aT[y][q] * bT[q][x];
        __syncthreads();
    }
    if (gr < mA && gc < nB)
        C[gr * nB + gc] = r;
}
