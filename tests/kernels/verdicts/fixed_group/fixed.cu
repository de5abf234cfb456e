// A correct naive kernel that takes blocks of 8×8 only: its family.toml launches blocks of
// TILE×TILE at a default tile of 16, more threads than these launch bounds allow.

__global__ __launch_bounds__(64)
void fixed_naive(float* C, const float* A,
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
