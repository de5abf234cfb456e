// DELIBERATELY BROKEN: never returns when K (wA) < 4, right at every other shape. The
// volatile store is a side effect each trip, so the compiler may not remove the loop.

__global__ void hang_naive(float* C, const float* A,
                           const float* B, int hA, int wA, int wB)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= hA || col >= wB)
        return;
    volatile float* spin = C;
    while (wA < 4)
        spin[row * wB + col] = 0.0f;
    float sum = 0.0f;
    for (int k = 0; k < wA; ++k)
        sum += A[row * wA + k] * B[k * wB + col];
    C[row * wB + col] = sum;
}
