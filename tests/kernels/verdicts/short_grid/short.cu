// A correct naive kernel: one thread an element of C, guarded. Its family.toml launches
// too few blocks of rows (M // TILE): the rows past them stay unwritten.

__global__ void short_naive(float* C, const float* A,
                            const float* B, int hA, int wA, int wB)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= hA || col >= wB)
        return;
    float sum = 0.0f;
    for (int k = 0; k < wA; ++k)
        sum += A[row * wA + k] * B[k * wB + col];
    C[row * wB + col] = sum;
}
