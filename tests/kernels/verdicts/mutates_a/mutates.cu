// DELIBERATELY BROKEN: double_a doubles A in place before each product and halving_naive
// halves the sum, so a run is right only while A holds what was uploaded: the second run
// without an upload between (a timed batch) reads 2·A doubled again.

__global__ void double_a(float* A, int hA, int wA)
{
    int k = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < hA && k < wA)
        A[row * wA + k] *= 2.0f;
}

__global__ void halving_naive(float* C, const float* A,
                              const float* B, int hA, int wA, int wB)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= hA || col >= wB)
        return;
    float sum = 0.0f;
    for (int k = 0; k < wA; ++k)
        sum += A[row * wA + k] * B[k * wB + col];
    C[row * wB + col] = 0.5f * sum;
}
